"""The one SparkSession of a test run (Spark allows one per process).

Import the fixture into a test module with `from spark_fixture import spark  # noqa: F401`.
"""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from pipelines.spark import get_spark

    session = get_spark("local[2]", app_name="rebalance-audit-tests", conf={"spark.sql.shuffle.partitions": "2"})
    yield session
    # Left running on purpose: other modules of the same run may still need it; the JVM
    # exits with the test process.
