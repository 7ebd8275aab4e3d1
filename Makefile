# The two commands of the README. Both do all the set-up first (idempotent, fast when done).
.PHONY: setup demo test bench

setup:
	@./scripts/setup.sh

demo: setup
	.venv/bin/rebalance-audit demo

test: setup
	.venv/bin/python -m pytest

bench: setup
	.venv/bin/python bench/run_all.py
