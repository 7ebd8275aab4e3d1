# The two commands of the README. Both do all the set-up first (idempotent, fast when done).
.PHONY: setup demo test bench

setup:
	@./scripts/setup.sh

demo: setup
	.venv/bin/rebalance-audit demo

# Tests whose ground truth is timed run first, alone; then the rest on TEST_WORKERS
# pytest-xdist workers (see scripts/test.sh). PYTEST_ARGS passes more to both, e.g.
# PYTEST_ARGS=--durations=30 or PYTEST_ARGS='-k gold'.
TEST_WORKERS ?= 2
PYTEST_ARGS ?=
test: setup
	TEST_WORKERS=$(TEST_WORKERS) ./scripts/test.sh $(PYTEST_ARGS)

bench: setup
	.venv/bin/python bench/run_all.py
