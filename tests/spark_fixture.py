"""The one SparkSession of a test run (Spark allows one per process).

Import the fixture into a test module with `from spark_fixture import spark  # noqa: F401`.
"""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from pipelines.spark import get_spark

    # Spark's small-lake settings come from the suite's environment (tests/conftest.py).
    session = get_spark("local[2]", app_name="rebalance-audit-tests")
    yield session
    # Left running on purpose: other modules of the same run may still need it; the JVM
    # exits with the test process.


def spark_jobs(spark, group: str, fn):  # noqa: F811
    """(the Spark jobs started while `fn` runs, fn's result). The jobs are tagged with a job
    group set on this thread, so work that Dagster's in-process executor runs here counts."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        result = fn()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return list(sc.statusTracker().getJobIdsForGroup(group)), result
