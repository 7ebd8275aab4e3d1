#!/usr/bin/env bash
# The README's test command (`make test`), after set-up. A lint, then two phases:
#
# 0. `ruff check` over the tree and `mypy` over the packages (rules in pyproject.toml): a
#    lint or type failure fails the run after the tests, so one run reports all.
# 1. Tests marked `alone`, one at a time with the machine to themselves: live consumer
#    groups whose ground truth is timed in seconds (session timeouts lowered to 6 s for
#    test speed). Beside another worker's Spark jobs on two cores, their heartbeats and
#    the brokers' timers slip by seconds: members are fenced that a real cluster would
#    keep, and the scenario that ran is not the one scripted.
# 2. Everything else on $TEST_WORKERS pytest-xdist workers. --dist loadscope keeps each
#    module on one worker, so a module-scoped fixture (a materialized lake, a broker) is
#    built once. --no-loadscope-reorder keeps the order tests/conftest.py gives, the
#    longest modules first; xdist's own would start the modules with most tests first and
#    leave the few-test, many-minute ones to the end, one worker idling.
#
# Extra pytest arguments pass to both phases (e.g. --durations=30, -k gold). A phase
# that selects nothing (pytest's exit code 5) is not a failure unless neither phase
# selected anything; otherwise the exit code is the first failing phase's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
WORKERS=${TEST_WORKERS:-2}

status=0
ran=0
phase() {
    "$PY" -m pytest "$@"
    local rc=$?
    [ "$rc" -ne 5 ] && ran=1
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ] && [ "$status" -eq 0 ]; then
        status=$rc
    fi
}
.venv/bin/ruff check --quiet .
lint=$?
.venv/bin/mypy --no-error-summary || lint=1
phase -m alone -n 0 "$@"
phase -m "not alone" -n "$WORKERS" --dist loadscope --no-loadscope-reorder "$@"
[ "$ran" -eq 0 ] && exit 5
[ "$status" -eq 0 ] && [ "$lint" -ne 0 ] && status=$lint
exit "$status"
