"""Gold: rebalance history and findings.

NOT WIRED YET. The gold engine (pipelines/gold, being written) exposes `build_all(inputs)`
returning lazy DataFrames, but no lake-facing entry point (one that reads silver from the
lake and writes the gold tables with their positions) exists yet. Once it does, add one
multi-asset here that calls it, in the shape of `assets/silver.py`, and list it in
`GOLD_ASSETS`; `assets/definitions.py` and `rebalance-audit run` pick it up from there.
"""
from __future__ import annotations

GOLD_ASSETS: list = []
