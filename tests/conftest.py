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
# `sql` runs its queries in the test's own process: a warm server per test process would be
# a third JVM beside the two workers'. tests/test_sql_server.py tests the server itself.
os.environ.setdefault("REBALANCE_AUDIT_SQL_SERVER", "off")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"shared test data not found at {SHARED} (set REBALANCE_AUDIT_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def recordings_dir(shared_dir: Path) -> Path:
    return shared_dir / "recordings"


# The longest modules, started first. With --dist loadscope a module runs whole on one
# worker, in collection order: one of several minutes collected late (the Spark standalone
# run) would run alone at the end while the other worker idles.
LONGEST_FIRST = (  # measured: `make test PYTEST_ARGS=--durations=0`, 2026-11-28, longest first
    "test_gold_incremental", "test_spark_standalone", "test_dashboards_report", "test_run_killed",
    "test_gold_findings", "test_ingest_live", "test_lake_lock", "test_assets_run_cli",
    "test_ingest_broker_trouble", "test_quality_suites", "test_whatif_incremental", "test_assets_materialize",
    "test_silver_incremental", "test_shell", "test_sql_server", "test_dagster_instance", "test_maintain_cli",
    "test_quality_incremental", "test_whatif_recordings",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def module_rank(item) -> int:
        module = getattr(item, "module", None)
        return rank.get(module.__name__.rsplit(".", 1)[-1] if module else "", len(rank))

    items.sort(key=module_rank)  # stable: each module's own order, and the others', kept
