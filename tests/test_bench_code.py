"""The benchmarks' `--compare-with REV` runs REV's code, not the checkout's.

A command a benchmark starts for an exported revision must import the pipeline from that
export, whatever folder the benchmark was started from (a benchmark started in the
checkout once measured the checkout twice: `python -c` put the working folder ahead of
PYTHONPATH)."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from bench_pipeline import Code  # noqa: E402


def test_an_exported_revision_runs_its_own_code_from_the_checkout(tmp_path):
    code = Code.export("HEAD", tmp_path)
    assert code.root != REPO
    assert code.imports_from(cwd=REPO) == code.root
    assert code.imports_from(cwd=tmp_path) == code.root
    # This checkout's code imports from the checkout.
    assert Code().imports_from(cwd=tmp_path) == REPO
