"""consumer_lag across a coordinator move onto a broker whose clock is behind.

The old coordinator's commits carry its clock, the new one's another; samples carry the
ingesting host's. The committed offset at a sample is the last commit in log order written
before it, as Kafka's, not the one with the latest record time (seen on the testbed with
brokers 15 s ahead and behind: tests/test_coordinator_failover.py).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql import functions as F

from pipelines.gold.lag import build_consumer_lag
from pipelines.gold.model import GoldInputs
from tests.spark_fixture import spark  # noqa: F401

pytestmark = pytest.mark.spark

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
T0_MS = int(T0.timestamp() * 1000)
COMMITS = ("cluster string, group_id string, topic string, partition int, offset long, is_deletion boolean, "
           "record_ts timestamp, effective_log_offset long")
SAMPLES = "cluster string, topic string, partition int, start_offset long, end_offset long, sampled_at timestamp"


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _lag(spark, commits: list[tuple], samples: list[tuple]) -> dict:  # noqa: F811
    inputs = GoldInputs(offset_commits=spark.createDataFrame(commits, COMMITS),
                        group_generations=None,  # type: ignore[arg-type]  # not read by consumer_lag
                        member_assignments=None,  # type: ignore[arg-type]
                        partition_end_offsets=spark.createDataFrame(samples, SAMPLES))
    rows = build_consumer_lag(inputs).select("partition", F.unix_millis("sampled_at").alias("at_ms"),
                                             "committed_offset", "lag").collect()
    return {(r["partition"], (r["at_ms"] - T0_MS) / 1000): (r["committed_offset"], r["lag"]) for r in rows}


def test_a_commit_after_a_move_onto_a_slower_clock_is_in_force_after_the_old_ones(spark):  # noqa: F811
    # Real time: the old coordinator (clock +15 s) writes commits at 0..3 s; it dies; the new
    # one (clock -15 s) writes at 20 s. The host samples at 30 s.
    old = [("c", "g", "t", p, 10 + i, False, _at(i + 15), 100 + 2 * i + p) for i in range(4) for p in (0, 1)]
    new = [("c", "g", "t", 0, 64, False, _at(20 - 15), 200)]   # stamped 5 s, before the old term's 18 s
    samples = [("c", "t", p, 0, 64, _at(30)) for p in (0, 1)]
    got = _lag(spark, old + new, samples)
    assert got[(0, 30)] == (64, 0)
    assert got[(1, 30)] == (13, 51)   # partition 1 had no commit in the new term


def test_on_one_clock_nothing_changes(spark):  # noqa: F811
    commits = [("c", "g", "t", 0, 10 + i, False, _at(i), 100 + i) for i in range(5)]
    samples = [("c", "t", 0, 0, 20, _at(2.5)), ("c", "t", 0, 0, 20, _at(10))]
    got = _lag(spark, commits, samples)
    assert got == {(0, 2.5): (12, 8), (0, 10): (14, 6)}
