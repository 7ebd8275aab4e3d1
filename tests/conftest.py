"""Shared pytest configuration: where the shared test data lives."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("REBALANCE_AUDIT_SHARED", REPO.parent / "shared"))
RECORDINGS = SHARED / "recordings"

# Every Spark session of the suite (in-process, and in the commands it runs, which inherit
# the environment) works on small lakes: Spark's small-lake settings, as the demo's
# (pipelines/spark.py). They change how fast, never what: the benchmarks run without them.
os.environ.setdefault("REBALANCE_AUDIT_SPARK_PROFILE", "small-lake")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"shared test data not found at {SHARED} (set REBALANCE_AUDIT_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def recordings_dir(shared_dir: Path) -> Path:
    return shared_dir / "recordings"
