"""KIP-848 quality suites on the kip848_consumer_protocol recording (a real Kafka 3.9 broker
running a consumer-protocol group): its records pass, and copies broken the way a wrong
decoder or a lost record would break them fail the right expectation with the right keys.

Broken on purpose (all in one temp lake, checked in one `check_tables` call):
* current_assignments: an intruder member's record holding a partition that another member
  still holds, and a member's epoch going backwards;
* target_assignment_epochs: the group's first target epoch raised above the next one (so the
  next one goes backwards, and the raised one exceeds the group epoch then in force);
* target_assignment_member_deltas: a member's target written after the group's last epoch
  record (a delta no epoch record refers to).
"""
from __future__ import annotations

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from pipelines.lake import Lake
from quality import check_tables
from quality.kip848 import SUITES as KIP848_SUITES
from tests.recordings_lake import segments_lake, spark  # noqa: F401

SCENARIO = "kip848_consumer_protocol"
TABLES = [s.table for s in KIP848_SUITES]


def _mine(df):
    return df.where(F.col("cluster") == SCENARIO)


def test_recording_passes_every_kip848_check(segments_lake, tmp_path_factory):  # noqa: F811
    for t in ("current_assignments", "target_assignment_epochs", "target_assignment_member_deltas"):
        assert _mine(segments_lake.read(t)).where(~F.col("is_deletion")).limit(1).count() == 1, t
    report = check_tables(segments_lake, TABLES, folder=tmp_path_factory.mktemp("quality-kip848"), record=False,
                          docs=False)
    failures = {o.table: {e.expectation: e.failing_keys[:3] for e in o.failed()} for o in report.outcomes}
    assert all(not f for f in failures.values()), failures
    skipped = {(o.table, e.expectation) for o in report.outcomes for e in o.expectations if not e.evaluated}
    assert skipped == set()


@pytest.fixture(scope="module")
def broken(segments_lake, spark, tmp_path_factory):  # noqa: F811
    src = segments_lake
    lake = Lake(tmp_path_factory.mktemp("broken-kip848"), spark=spark)
    facts = {}

    # 1. current_assignments. A member record holding a partition that is held until the
    # member's next record, with free log offsets in between: an intruder's record there
    # holding the same partition overlaps it.
    cur = _mine(src.read("current_assignments"))
    used = {r.log_offset for r in cur.select("log_offset").distinct().collect()}
    w = Window.partitionBy("group_id", "member_id").orderBy("log_offset")
    records = cur.select("group_id", "member_id", "log_offset", "is_deletion", "member_epoch").distinct() \
        .withColumn("_next", F.lead("log_offset").over(w)).withColumn("_prev_epoch", F.lag("member_epoch").over(w))
    holds = cur.where(F.col("topic_id").isNotNull() & ~F.col("is_deletion")).join(
        records.select("group_id", "member_id", "log_offset", "_next"), ["group_id", "member_id", "log_offset"])
    victim = None
    for h in holds.where(F.col("_next").isNotNull()).orderBy("log_offset", "partition").collect():
        free = [x for x in range(h.log_offset + 1, h._next) if x not in used]
        if free:
            victim, at = h, free[0]
            break
    assert victim is not None, "the recording has no hold with a free log offset inside it"
    intruder = cur.where((F.col("log_offset") == victim.log_offset) & (F.col("member_id") == victim.member_id)
                         & (F.col("partition") == victim.partition) & (F.col("topic_id") == victim.topic_id)) \
        .withColumn("member_id", F.lit("intruder-1")).withColumn("log_offset", F.lit(at).cast("long"))
    # A later record of a member whose epoch is lowered below its previous record's.
    back = records.where(~F.col("is_deletion") & (F.col("member_epoch") > F.col("_prev_epoch"))
                         & (F.col("_prev_epoch") >= 1)).orderBy(F.col("log_offset").desc()).first()
    assert back is not None
    lowered = back._prev_epoch - 1
    is_back = (F.col("log_offset") == back.log_offset) & (F.col("member_id") == back.member_id)
    cur_broken = cur.withColumn("member_epoch", F.when(is_back, F.lit(lowered)).otherwise(F.col("member_epoch")))
    lake.write_df("current_assignments", cur_broken.unionByName(intruder), partition_by=["cluster"])
    facts.update(victim=victim, intruder_at=at, back=back, lowered=lowered)

    # 2. target_assignment_epochs: the first epoch record raised above the second one.
    ep = _mine(src.read("target_assignment_epochs"))
    first, second = ep.where(~F.col("is_deletion")).orderBy("log_offset").limit(2).collect()
    raised = second.assignment_epoch + 1
    lake.write_df("target_assignment_epochs", ep.withColumn("assignment_epoch", F.when(
        F.col("log_offset") == first.log_offset, F.lit(raised)).otherwise(F.col("assignment_epoch"))),
        partition_by=["cluster"])
    facts.update(first=first, second=second, raised=raised)

    # 3. target_assignment_member_deltas: a member's target after the group's last epoch record.
    deltas = _mine(src.read("target_assignment_member_deltas"))
    last_epoch = ep.agg(F.max("log_offset")).first()[0]
    late_at = max(used | {last_epoch}) + 100
    late = deltas.where(~F.col("is_deletion")).orderBy("log_offset", "partition").limit(1) \
        .withColumn("member_id", F.lit("late-member")).withColumn("log_offset", F.lit(late_at).cast("long"))
    lake.write_df("target_assignment_member_deltas", deltas.unionByName(late), partition_by=["cluster"])
    facts.update(late_at=late_at)

    # Unbroken: what the broken tables are compared with.
    lake.write_df("consumer_group_epochs", _mine(src.read("consumer_group_epochs")), partition_by=["cluster"])
    report = check_tables(lake, ["current_assignments", "target_assignment_epochs", "target_assignment_member_deltas",
                                 "consumer_group_epochs"], folder=tmp_path_factory.mktemp("quality-kip848-broken"))
    return report, facts


def _failed(report, table):
    o = report.by_table()[table]
    return {e.expectation: e for e in o.failed()}, o


def test_partition_in_two_members_fails_with_its_keys(broken):
    report, f = broken
    failed, outcome = _failed(report, "current_assignments")
    assert set(failed) == {"partition_held_by_one_member", "member_epoch_never_decreases"}
    assert outcome.severity == "ERROR"
    v = f["victim"]
    keys = failed["partition_held_by_one_member"].failing_keys
    [k] = [k for k in keys if k["member_id"] == "intruder-1"]
    assert (k["cluster"], k["group_id"], k["log_offset"], k["topic_id"], k["partition"]) == (
        SCENARIO, v.group_id, f["intruder_at"], v.topic_id, v.partition)
    assert v.member_id in k["detail"] and f"record at log offset {v.log_offset}" in k["detail"]
    # The intruder never releases the partition (no later record): whoever gets it next is
    # flagged too, naming the intruder; nothing else is.
    assert all(x["partition"] == v.partition and "intruder-1" in x["detail"] for x in keys if x is not k), keys


def test_member_epoch_going_backwards_fails_with_its_key(broken):
    report, f = broken
    failed, _ = _failed(report, "current_assignments")
    b = f["back"]
    e = failed["member_epoch_never_decreases"]
    assert e.violations == 1  # one record, however many partitions it lists
    [k] = e.failing_keys
    assert (k["group_id"], k["member_id"], k["log_offset"]) == (b.group_id, b.member_id, b.log_offset)
    assert f"member epoch {f['lowered']} written after {b._prev_epoch}" in k["detail"]


def test_target_epoch_going_backwards_fails_with_its_keys(broken):
    report, f = broken
    failed, _ = _failed(report, "target_assignment_epochs")
    assert set(failed) == {"target_epoch_never_decreases", "target_epoch_within_group_epoch"}
    [k] = failed["target_epoch_never_decreases"].failing_keys
    assert k["log_offset"] == f["second"].log_offset
    # In the recording the group epoch in force at the first target record is that target's
    # own epoch (the coordinator writes type 3, then the target for it), below the raised one.
    [k] = failed["target_epoch_within_group_epoch"].failing_keys
    assert k["log_offset"] == f["first"].log_offset and f"epoch {f['raised']} above" in k["detail"]


def test_delta_without_epoch_record_fails_with_its_key(broken):
    report, f = broken
    failed, _ = _failed(report, "target_assignment_member_deltas")
    assert set(failed) == {"delta_followed_by_epoch"}
    [k] = failed["delta_followed_by_epoch"].failing_keys
    assert (k["member_id"], k["log_offset"]) == ("late-member", f["late_at"])
    assert report.by_table()["consumer_group_epochs"].success


def test_a_table_without_a_column_its_claims_need_fails_naming_it(segments_lake, spark, tmp_path_factory):  # noqa: F811
    """A table written without a column its suite reads (an older or foreign writer) is a
    broken contract, reported as a violation naming the column, never a skipped claim."""
    lake = Lake(tmp_path_factory.mktemp("kip848-no-epoch"), spark=spark)
    lake.write_df("consumer_group_epochs", _mine(segments_lake.read("consumer_group_epochs")).drop("epoch"),
                  partition_by=["cluster"])
    report = check_tables(lake, ["consumer_group_epochs"], record=False, docs=False,
                          folder=tmp_path_factory.mktemp("quality-no-epoch"))
    failed, outcome = _failed(report, "consumer_group_epochs")
    assert set(failed) == {"group_epoch_never_decreases", "group_epoch_present"}
    assert outcome.severity == "ERROR"
    for e in failed.values():
        assert e.failing_keys == [{"cluster": None, "missing_columns": ["epoch"],
                                   "detail": "table lacks column(s) epoch"}]
