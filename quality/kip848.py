"""KIP-848 (consumer protocol) suites: the coordinator's records of types 3-8 obey its rules.

What the group coordinator writes (../shared/reference/kafka-internals.md §1.6, §5.6):

* type 3: the group epoch; type 6: the target assignment epoch, written after the type-7
  records of the members whose target changed (one batch: deltas, then the epoch);
* type 8: a member's current assignment (assigned + pending revocation) at its member epoch;
* removing a member writes tombstones for its 8, 7 and 5; deleting the group adds 6 and 3.

Hence: epochs only grow until a tombstone ends the member (or group); a member's epoch
is at most the target epoch in force, which is at most the group epoch in force; a
partition is never in two members' current assignment at one point of the log (a new
owner gets it only after the previous owner's revocation record); every (non-tombstone)
delta is followed by its epoch record.

Why these hold after log compaction too: compaction keeps the newest record of each key,
so what survives is still in log order and every "record in force" found by looking
backwards is the real one or absent (absent: the comparison is skipped, never guessed).

Every query is partitioned by (cluster, coordinator_partition, group_id): a group lives on
one `__consumer_offsets` partition, and ordering by `log_offset` inside it is log order.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .model import ERROR, Context, Invariant, Suite, fmt, null_check, row_check, unique_check, violation

_GROUP = ["cluster", "coordinator_partition", "group_id"]
_POS = ["cluster", "coordinator_partition", "log_offset"]
_BEFORE = (Window.unboundedPreceding, -1)  # range frame on log_offset: the records strictly before


def _never_decreases(t: DataFrame, epoch: str, by: list[str], key: list[str], what: str) -> DataFrame:
    """`epoch` never decreases along the log within `by`, until a tombstone (a deleted member
    or group starts again). Rows of one record share its log offset, so the previous
    *record* is the last row of the range strictly before this offset."""
    w = Window.partitionBy(*by).orderBy("log_offset").rangeBetween(*_BEFORE)
    g = t.withColumn("_prev", F.last(epoch).over(w)).withColumn("_prev_del", F.last("is_deletion").over(w))
    bad = g.where(~F.col("is_deletion") & ~F.coalesce("_prev_del", F.lit(True)) & (F.col(epoch) < F.col("_prev")))
    return violation(bad, key, fmt(f"{what} %s written after %s (log offset %s)", epoch, "_prev", "log_offset"))


def _in_force(t: DataFrame, marks: DataFrame, epoch: str) -> DataFrame:
    """`t`'s rows with `_mark`: the newest record of `marks` (columns: group keys, log_offset,
    is_deletion, `epoch`) written before each row, or null when none was kept."""
    m = marks.select(*_GROUP, "log_offset", F.struct(F.col("is_deletion").alias("del"),
                                                     F.col(epoch).alias("epoch")).alias("_m"))
    rows = t.withColumn("_m", F.lit(None).cast(m.schema["_m"].dataType))
    both = rows.unionByName(m, allowMissingColumns=True)
    w = Window.partitionBy(*_GROUP).orderBy("log_offset").rangeBetween(*_BEFORE)
    return both.withColumn("_mark", F.last("_m", ignorenulls=True).over(w)).where(F.col("_m").isNull())


# --- consumer_group_epochs (type 3) ---------------------------------------------------

def _group_epoch_never_decreases(t: DataFrame, _ctx: Context) -> DataFrame:
    return _never_decreases(t, "epoch", _GROUP, ["cluster", "group_id", "log_offset"], "group epoch")


CONSUMER_GROUP_EPOCHS = Suite("consumer_group_epochs", "silver", (
    Invariant("group_epoch_never_decreases", "a KIP-848 group's epoch never decreases until the group is deleted",
              ERROR, ("group_id", "epoch", "is_deletion", "coordinator_partition", "log_offset"),
              _group_epoch_never_decreases, scope=tuple(_GROUP)),
    row_check("group_epoch_present", lambda: ~F.col("is_deletion") & (F.col("epoch").isNull() | (F.col("epoch") < 0)),
              ["cluster", "group_id", "log_offset"], lambda: fmt("group epoch %s", "epoch"),
              ("is_deletion", "epoch"), "every group epoch record (not a tombstone) has an epoch >= 0"),
    unique_check("group_epoch_record_once", _POS, "a group epoch record is decoded once"),
))

# --- consumer_group_members (type 5) ----------------------------------------------------

CONSUMER_GROUP_MEMBERS = Suite("consumer_group_members", "silver", (
    null_check("member_has_client_id_and_host", ("client_id", "client_host"),
               ["cluster", "group_id", "member_id", "log_offset"], where=lambda: ~F.col("is_deletion"),
               description="every KIP-848 member record has a client id and a client host"),
    unique_check("member_record_once", _POS, "a member record is decoded once"),
))

# --- target_assignment_epochs (type 6) ------------------------------------------------

def _target_epoch_never_decreases(t: DataFrame, _ctx: Context) -> DataFrame:
    return _never_decreases(t, "assignment_epoch", _GROUP, ["cluster", "group_id", "log_offset"],
                            "target assignment epoch")


def _target_within_group_epoch(t: DataFrame, ctx: Context) -> DataFrame | None:
    """The coordinator computes a target for the group epoch it just wrote (type 3 before
    type 6): a target epoch above the group epoch in force was never a group epoch."""
    groups = ctx.other("consumer_group_epochs")
    if groups is None:
        return None
    r = _in_force(t.where(~F.col("is_deletion")), groups, "epoch")
    bad = r.where(~F.col("_mark.del") & (F.col("assignment_epoch") > F.col("_mark.epoch")))
    return violation(bad, ["cluster", "group_id", "log_offset"],
                     fmt("target assignment epoch %s above the group epoch %s in force", "assignment_epoch", "_mark.epoch"))


TARGET_ASSIGNMENT_EPOCHS = Suite("target_assignment_epochs", "silver", (
    Invariant("target_epoch_never_decreases",
              "a KIP-848 group's target assignment epoch never decreases until the group is deleted", ERROR,
              ("group_id", "assignment_epoch", "is_deletion", "coordinator_partition", "log_offset"),
              _target_epoch_never_decreases, scope=tuple(_GROUP)),
    Invariant("target_epoch_within_group_epoch",
              "a target assignment epoch is at most the group epoch written before it", ERROR,
              ("group_id", "assignment_epoch", "is_deletion", "coordinator_partition", "log_offset"),
              _target_within_group_epoch, needs="consumer_group_epochs", scope=tuple(_GROUP),
              reads=("consumer_group_epochs",)),
    row_check("target_epoch_present",
              lambda: ~F.col("is_deletion") & (F.col("assignment_epoch").isNull() | (F.col("assignment_epoch") < 0)),
              ["cluster", "group_id", "log_offset"], lambda: fmt("assignment epoch %s", "assignment_epoch"),
              ("is_deletion", "assignment_epoch"), "every target epoch record (not a tombstone) has an epoch >= 0"),
    unique_check("target_epoch_record_once", _POS, "a target epoch record is decoded once"),
))

# --- target_assignment_member_deltas (type 7) ------------------------------------------

def _delta_has_epoch(t: DataFrame, ctx: Context) -> DataFrame | None:
    """A member's new target (type 7) is written in one batch with the epoch record (type 6)
    that follows it; a delta with no epoch record after it was never part of a target."""
    epochs = ctx.other("target_assignment_epochs")
    if epochs is None:
        return None
    last = epochs.groupBy(*_GROUP).agg(F.max("log_offset").alias("_last_epoch"))
    d = t.where(~F.col("is_deletion")).join(last, _GROUP, "left")
    bad = d.where(F.col("_last_epoch").isNull() | (F.col("_last_epoch") < F.col("log_offset")))
    return violation(bad, ["cluster", "group_id", "member_id", "log_offset"],
                     fmt("no target epoch record after this delta (last one at log offset %s)", "_last_epoch"))


def _well_formed(name: str, key: list[str], what: str) -> Invariant:
    return row_check(name, lambda: (F.col("topic_id").isNull() != F.col("partition").isNull()) | (F.col("partition") < 0),
                     key, lambda: fmt("topic id %s partition %s", "topic_id", "partition"), ("topic_id", "partition"),
                     f"a {what} row has both topic id and partition >= 0, or neither (an empty assignment)")


_DELTA_KEY = ["cluster", "group_id", "member_id", "log_offset"]
TARGET_ASSIGNMENT_MEMBER_DELTAS = Suite("target_assignment_member_deltas", "silver", (
    Invariant("delta_followed_by_epoch",
              "every member's target (not a tombstone) is followed by a target assignment epoch record of its group",
              ERROR, ("group_id", "member_id", "is_deletion", "coordinator_partition", "log_offset"),
              _delta_has_epoch, needs="target_assignment_epochs", scope=tuple(_GROUP),
              reads=("target_assignment_epochs",)),
    unique_check("delta_partition_once", [*_POS, "topic_id", "partition"],
                 "a member's target record lists a partition once"),
    _well_formed("delta_well_formed", _DELTA_KEY, "target"),
))

# --- current_assignments (type 8) -----------------------------------------------------

_MEMBER = [*_GROUP, "member_id"]
_CUR_KEY = ["cluster", "group_id", "member_id", "log_offset"]


def _member_epoch_never_decreases(t: DataFrame, _ctx: Context) -> DataFrame:
    return _never_decreases(t, "member_epoch", _MEMBER, _CUR_KEY, "member epoch")


def _one_holder_at_a_time(t: DataFrame, _ctx: Context) -> DataFrame:
    """A member holds what its record lists (assigned or pending revocation) from that record
    until its next record (or tombstone); two members' holds of one partition never overlap,
    because the coordinator gives a partition to its new owner only after the previous
    owner's revocation was written."""
    wm = Window.partitionBy(*_MEMBER).orderBy("log_offset").rangeBetween(1, Window.unboundedFollowing)
    held = t.withColumn("_until", F.min("log_offset").over(wm)) \
        .where(~F.col("is_deletion") & F.col("topic_id").isNotNull())
    wp = Window.partitionBy(*_GROUP, "topic_id", "partition").orderBy("log_offset", "member_id") \
        .rowsBetween(Window.unboundedPreceding, -1)
    # The earlier hold that lasts longest, with its member; an open hold (no next record) never ends.
    end = F.coalesce("_until", F.lit(2**62).cast("long"))
    o = held.withColumn("_before", F.max(F.struct(end.alias("until"), F.col("member_id").alias("member"),
                                                  F.col("log_offset").alias("since"))).over(wp))
    bad = o.where(F.col("log_offset") < F.col("_before.until"))
    return violation(bad, [*_CUR_KEY, "topic_id", "partition"], fmt(
        "also held by %s (record at log offset %s, until %s)", "_before.member", "_before.since",
        F.when(F.col("_before.until") < 2**62, F.col("_before.until").cast("string")).otherwise(F.lit("its last record"))))


def _member_epoch_within_target(t: DataFrame, ctx: Context) -> DataFrame | None:
    """A member's epoch is its old one or the target epoch it reconciles to: never above the
    target assignment epoch in force when its record was written."""
    epochs = ctx.other("target_assignment_epochs")
    if epochs is None:
        return None
    r = _in_force(t.where(~F.col("is_deletion")), epochs, "assignment_epoch")
    bad = r.where(~F.col("_mark.del") & (F.col("member_epoch") > F.col("_mark.epoch")))
    return violation(bad, _CUR_KEY, fmt("member epoch %s above the target assignment epoch %s in force",
                                        "member_epoch", "_mark.epoch"))


_CUR_COLS = ("group_id", "member_id", "is_deletion", "coordinator_partition", "log_offset")
CURRENT_ASSIGNMENTS = Suite("current_assignments", "silver", (
    Invariant("member_epoch_never_decreases",
              "a KIP-848 member's epoch never decreases until the member is removed (tombstone)", ERROR,
              (*_CUR_COLS, "member_epoch"), _member_epoch_never_decreases, scope=tuple(_GROUP)),
    Invariant("partition_held_by_one_member",
              "no partition is in two members' current assignment (assigned or pending revocation) at one point "
              "of the log", ERROR, (*_CUR_COLS, "topic_id", "partition"), _one_holder_at_a_time, scope=tuple(_GROUP)),
    Invariant("member_epoch_within_target",
              "a member's epoch is at most the target assignment epoch written before its record", ERROR,
              (*_CUR_COLS, "member_epoch"), _member_epoch_within_target, needs="target_assignment_epochs",
              scope=tuple(_GROUP), reads=("target_assignment_epochs",)),
    unique_check("partition_once_per_record", [*_POS, "topic_id", "partition"],
                 "a member's record lists a partition once (assigned or pending revocation, not both)"),
    row_check("member_epoch_present",
              lambda: ~F.col("is_deletion") & (F.col("member_epoch").isNull() | (F.col("member_epoch") < 0)),
              _CUR_KEY, lambda: fmt("member epoch %s", "member_epoch"), ("is_deletion", "member_epoch"),
              "every current assignment record (not a tombstone) has a member epoch >= 0"),
    _well_formed("assignment_well_formed", _CUR_KEY, "current assignment"),
))

# --- target_assignments (rebuilt from 6 + 7) and topic_ids (type 4) ---------------------

def _target_one_owner(t: DataFrame, _ctx: Context) -> DataFrame:
    # Per target epoch *record* (epoch_offset), not per epoch number: a deleted group that
    # starts again reuses epoch numbers.
    bad = t.where(F.col("partition").isNotNull()).groupBy(
        "cluster", "group_id", "epoch_offset", "topic_id", "partition").agg(
        F.first("assignment_epoch").alias("assignment_epoch"),
        F.sort_array(F.collect_set("member_id")).alias("_owners")).where(F.size("_owners") > 1)
    return violation(bad, ["cluster", "group_id", "assignment_epoch", "epoch_offset", "topic_id", "partition"],
                     F.concat(F.lit("targeted to "), F.concat_ws(", ", "_owners")))


TARGET_ASSIGNMENTS = Suite("target_assignments", "silver", (
    Invariant("target_partition_has_one_member",
              "a KIP-848 target assignment gives each partition to at most one member per assignment epoch", ERROR,
              ("group_id", "assignment_epoch", "epoch_offset", "topic_id", "partition", "member_id"), _target_one_owner,
              scope=("cluster", "group_id", "epoch_offset")),
    unique_check("target_row_once", ["cluster", "group_id", "epoch_offset", "member_id", "topic_id", "partition"],
                 "one row per (group, target epoch record, member, partition)"),
))


def _topic_one_name(t: DataFrame, _ctx: Context) -> DataFrame:
    bad = t.groupBy("cluster", "topic_id").agg(F.sort_array(F.collect_set("topic")).alias("_names")) \
        .where(F.size("_names") > 1)
    return violation(bad, ["cluster", "topic_id"], F.concat(F.lit("names "), F.concat_ws(", ", "_names")))


TOPIC_IDS = Suite("topic_ids", "silver", (
    Invariant("topic_id_has_one_name", "a topic id names one topic in a cluster", ERROR, ("topic_id", "topic"),
              _topic_one_name, scope=("cluster", "topic_id")),
))

SUITES = (CONSUMER_GROUP_EPOCHS, CONSUMER_GROUP_MEMBERS, TARGET_ASSIGNMENT_EPOCHS, TARGET_ASSIGNMENT_MEMBER_DELTAS,
          CURRENT_ASSIGNMENTS, TARGET_ASSIGNMENTS, TOPIC_IDS)
