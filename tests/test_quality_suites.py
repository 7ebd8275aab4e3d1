"""Quality suites on real data: every recording's tables pass every check, and a copy of a
table broken on purpose (an overlapping ownership, a generation going backwards, a negative
offset, a commit above the sampled high watermark) fails exactly the right expectation,
naming the broken row's key.

One lake holds every recording (tests/recordings_lake.py); gold and what-if tables are
added with their own runners (`pipelines.gold.runner.update_gold`, `pipelines.whatif
.spark_job.update_whatif`). All tables are checked in one `check_tables` call, and all
broken copies in another, to keep the number of Spark jobs small. The same lake is opened
by a fresh process with plain delta-spark and compared with delta-rs's read of every table.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from pipelines.lake import Lake
from quality import SUITES, check_tables
from quality.results import TABLE as RESULTS
from tests.recordings_lake import findings_lake, spark  # noqa: F401

BROKEN = ("ownership_intervals", "group_generations", "offset_commits")


@pytest.fixture(scope="module")
def full_lake(findings_lake):  # noqa: F811
    """The recordings lake with gold and what-if built by their own runners."""
    return findings_lake


@pytest.fixture(scope="module")
def recordings_report(full_lake, tmp_path_factory):
    tables = [t for t in SUITES if full_lake.exists(t)]
    return check_tables(full_lake, tables, folder=tmp_path_factory.mktemp("quality-recordings"))


def test_every_layer_is_checked(full_lake, recordings_report):
    checked = {o.table for o in recordings_report.outcomes}
    for table in ("offsets_records", "coordinator_log_lines", "quarantine", "group_generations", "member_assignments",
                  "offset_commits", "coordinator_events", "ownership_intervals", "duplicate_windows",
                  "rebalance_episodes", "whatif_episodes", "whatif_summary"):
        assert table in checked, f"{table} missing from the lake or not checked"


def test_recordings_pass_every_check(recordings_report):
    failures = {
        o.table: {e.expectation: (e.violations, e.failing_keys[:3]) for e in o.failed()}
        for o in recordings_report.outcomes if not o.success
    }
    assert failures == {}


def test_checks_are_evaluated_not_skipped(recordings_report):
    # A pass must mean "looked and found nothing", not "could not look": the only
    # invariant allowed to be skipped on offline recordings is the one that needs live
    # high-watermark samples.
    skipped = {(o.table, e.expectation) for o in recordings_report.outcomes for e in o.expectations if not e.evaluated}
    assert skipped <= {("offset_commits", "offset_within_high_watermark")}
    by = recordings_report.by_table()
    assert set(by["group_generations"].clusters) >= {"static_membership", "cooperative_rolling"}


def _first(df, order):
    return df.orderBy(*order).first()


@pytest.fixture(scope="module")
def broken(full_lake, spark, tmp_path_factory):  # noqa: F811
    """A temp lake holding broken copies of three tables, plus sampled high watermarks."""
    lake = Lake(tmp_path_factory.mktemp("broken-lake"), spark=spark)

    # 1. Ownership: a second member owns a partition while its first owner still holds it.
    own = full_lake.read("ownership_intervals")
    closed = own.where(F.col("end_pos").isNotNull() & (F.col("end_pos") > F.col("start_pos") + 1)
                       & F.col("member_id").isNotNull())
    victim = _first(closed, ["cluster", "group_id", "topic", "partition", "start_pos"])
    intruder = own.where(
        (F.col("cluster") == victim.cluster) & (F.col("group_id") == victim.group_id)
        & (F.col("incarnation") == victim.incarnation) & (F.col("topic") == victim.topic)
        & (F.col("partition") == victim.partition) & (F.col("start_pos") == victim.start_pos)
    ).withColumn("member_id", F.lit("intruder-1")).withColumn("start_pos", F.lit(victim.start_pos + 1))
    lake.write_df("ownership_intervals", own.unionByName(intruder), partition_by=["cluster"])

    # 2. Generations: a group's last generation record rewritten with a lower generation.
    gens = full_lake.read("group_generations")
    live = gens.where(~F.col("is_deletion"))
    grown = live.groupBy("cluster", "group_id", "incarnation").agg(
        F.max("log_offset").alias("log_offset"), F.min("generation").alias("_low"), F.max("generation").alias("_high")
    ).where((F.col("_high") > F.col("_low")) & (F.col("_low") >= 1))
    g = _first(grown, ["cluster", "group_id", "incarnation"])
    low = g["_low"] - 1  # below every earlier generation of the incarnation, still a valid number
    is_victim = ((F.col("cluster") == g.cluster) & (F.col("group_id") == g.group_id)
                 & (F.col("log_offset") == g.log_offset))
    lake.write_df("group_generations", gens.withColumn(
        "generation", F.when(is_victim, F.lit(low)).otherwise(F.col("generation"))), partition_by=["cluster"])

    # 3. Commits: one offset made negative, another committed above a sampled high watermark.
    commits = full_lake.read("offset_commits")
    real = commits.where(~F.col("is_deletion") & (F.col("offset") > 0)).orderBy(
        "cluster", "group_id", "topic", "partition", "log_offset").limit(2).collect()
    neg, high = real[0], real[1]
    is_neg = (F.col("cluster") == neg.cluster) & (F.col("coordinator_partition") == neg.coordinator_partition) \
        & (F.col("log_offset") == neg.log_offset)
    lake.write_df("offset_commits", commits.withColumn(
        "offset", F.when(is_neg, F.lit(-5).cast("long")).otherwise(F.col("offset"))), partition_by=["cluster"])
    # A sample taken after every commit, whose log end is below `high`'s committed offset.
    from pipelines.ingest.schemas import PARTITION_END_OFFSETS, ensure

    ensure(lake, PARTITION_END_OFFSETS)
    lake.append("partition_end_offsets", pa.Table.from_pylist([{
        "cluster": high.cluster, "topic": high.topic, "partition": high.partition, "start_offset": 0,
        "end_offset": high.offset - 1, "sampled_at": datetime(2100, 1, 1, tzinfo=timezone.utc),
    }], schema=PARTITION_END_OFFSETS.schema))

    report = check_tables(lake, [*BROKEN, "partition_end_offsets"], folder=tmp_path_factory.mktemp("quality-broken"))
    return lake, report, {"victim": victim, "generation": (g, low), "negative": neg, "high": high}


def _failed(report, table):
    o = report.by_table()[table]
    return {e.expectation: e for e in o.failed()}, o


def test_overlapping_ownership_fails_with_its_keys(broken):
    _, report, rows = broken
    failed, outcome = _failed(report, "ownership_intervals")
    assert set(failed) == {"intervals_never_overlap"}
    assert outcome.severity == "ERROR"
    v = rows["victim"]
    keys = failed["intervals_never_overlap"].failing_keys
    # The first owner's interval is reported (it still held the partition), with the intruder named.
    assert any(k["cluster"] == v.cluster and k["group_id"] == v.group_id and k["topic"] == v.topic
               and k["partition"] == v.partition and k["start_pos"] == v.start_pos
               and "intruder-1" in k["detail"] for k in keys), keys


def test_backwards_generation_fails_with_its_keys(broken):
    _, report, rows = broken
    failed, outcome = _failed(report, "group_generations")
    assert set(failed) == {"generation_never_decreases"}
    assert outcome.severity == "ERROR"
    g, low = rows["generation"]
    keys = failed["generation_never_decreases"].failing_keys
    assert failed["generation_never_decreases"].violations == 1
    assert keys[0]["cluster"] == g.cluster and keys[0]["group_id"] == g.group_id
    assert keys[0]["log_offset"] == g.log_offset and keys[0]["incarnation"] == g.incarnation
    assert f"generation {low} written after" in keys[0]["detail"]


def test_negative_and_above_watermark_offsets_fail_with_their_keys(broken):
    _, report, rows = broken
    failed, outcome = _failed(report, "offset_commits")
    assert set(failed) == {"offset_non_negative", "offset_within_high_watermark"}
    neg, high = rows["negative"], rows["high"]
    [k] = failed["offset_non_negative"].failing_keys
    assert (k["cluster"], k["group_id"], k["topic"], k["partition"], k["log_offset"]) == (
        neg.cluster, neg.group_id, neg.topic, neg.partition, neg.log_offset)
    assert "-5" in k["detail"]
    keys = failed["offset_within_high_watermark"].failing_keys
    assert any((k["group_id"], k["topic"], k["partition"], k["log_offset"]) == (high.group_id, high.topic, high.partition, high.log_offset)
               for k in keys), keys
    # Every commit of that partition at or above the fake watermark is flagged, none below.
    assert all(str(high.offset - 1) in k["detail"] for k in keys)


def test_results_history_and_data_docs(broken):
    lake, report, _ = broken
    rows = DeltaTable(lake.uri(RESULTS)).to_pyarrow_table().to_pylist()
    mine = [r for r in rows if r["run_id"] == report.run_id]
    assert {r["table_name"] for r in mine} == {*BROKEN, "partition_end_offsets"}
    bad = [r for r in mine if not r["success"]]
    assert {(r["table_name"], r["expectation"]) for r in bad} == {
        ("ownership_intervals", "intervals_never_overlap"), ("group_generations", "generation_never_decreases"),
        ("offset_commits", "offset_non_negative"), ("offset_commits", "offset_within_high_watermark")}
    for r in bad:
        assert r["violations"] >= 1 and r["cluster"] is not None
        sample = json.loads(r["failing_keys_sample"])
        assert sample and all(k["cluster"] == r["cluster"] for k in sample)
    # One row per cluster the table holds, passing ones included.
    gens_rows = [r for r in mine if r["table_name"] == "group_generations" and r["expectation"] == "generation_present"]
    assert len(gens_rows) == len(report.by_table()["group_generations"].clusters) > 1
    # Data docs: the index links each suite's validation page.
    index = report.data_docs
    assert index and index.startswith("file://")
    html = open(index[len("file://"):]).read()
    for table in BROKEN:
        assert SUITES[table].name in html


def test_every_table_opens_with_plain_delta_spark_and_delta_rs(full_lake):
    """Every table of the pipeline, opened by a fresh process with plain delta-spark (no
    setting of ours) and by delta-rs, holds the same rows; its history is one commit per
    write: the creation (delta-rs), then each run step's WRITE or MERGE."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests_canonical import canonical

    tables = full_lake.tables()
    assert {"offsets_records", "offset_commits", "ownership_intervals", "whatif_episodes"} <= set(tables)
    probe = Path(__file__).with_name("delta_engines_probe.py")
    done = subprocess.run([sys.executable, str(probe), *[full_lake.uri(t) for t in tables]],
                          capture_output=True, text=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    spark_side = json.loads(done.stdout)
    for t in tables:
        dt = DeltaTable(full_lake.uri(t))
        arrow = dt.to_pyarrow_table()
        rs_rows = sorted(canonical(r) for r in arrow.to_pylist(maps_as_pydicts="strict"))
        got = spark_side[full_lake.uri(t)]
        assert len(got["rows"]) == len(rs_rows), t
        assert got["rows"] == rs_rows, t
        p = dt.protocol()
        assert (p.min_reader_version, p.min_writer_version) == (1, 2), t
        history = got["history"]
        assert [v for v, _ in history] == list(range(dt.version() + 1)), t
        assert history[0][1] == "CREATE TABLE", t
    # Gold was built once, in full: one write of each gold table after its creation.
    for t in ("ownership_intervals", "duplicate_windows", "rebalance_episodes"):
        assert [op for _, op in spark_side[full_lake.uri(t)]["history"]] == ["CREATE TABLE", "WRITE"], t
