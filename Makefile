# The two commands of the README. Both do all the set-up first (idempotent, fast when done).
.PHONY: setup demo test bench

setup:
	@./scripts/setup.sh

demo: setup
	.venv/bin/rebalance-audit demo

# Two pytest-xdist workers (TEST_WORKERS): many tests wait on JVMs, brokers and subprocesses,
# so two processes keep two cores busy. --dist loadscope keeps each module on one worker, so
# a module-scoped fixture (a materialized lake, a broker) is built once.
# PYTEST_ARGS passes more, e.g. PYTEST_ARGS=--durations=30 or PYTEST_ARGS='-k gold'.
TEST_WORKERS ?= 2
PYTEST_ARGS ?=
test: setup
	.venv/bin/python -m pytest -n $(TEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

bench: setup
	.venv/bin/python bench/run_all.py
