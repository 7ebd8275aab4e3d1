"""Silver suites: the decoded group history obeys the coordinator's own rules.

The rules come from how the group coordinator writes `__consumer_offsets`
(../shared/reference/kafka-internals.md): a classic group's generation only grows
within one incarnation (a static member's replacement rewrites the *same* generation,
a deleted group starts again at a new incarnation); one generation gives each partition
to one member; a consumer's commit cannot point past the partition's log end.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .model import ERROR, WARN, Context, Invariant, Suite, fmt, null_check, row_check, unique_check, violation

_POS = ["cluster", "coordinator_partition", "log_offset"]


def _generations_never_decrease(t: DataFrame, _ctx: Context) -> DataFrame:
    w = Window.partitionBy("cluster", "group_id", "incarnation").orderBy("coordinator_partition", "log_offset")
    g = t.where(~F.col("is_deletion")).withColumn("_prev", F.lag("generation").over(w)) \
        .withColumn("_prev_pos", F.lag("log_offset").over(w))
    bad = g.where(F.col("generation") < F.col("_prev"))
    return violation(bad, ["cluster", "group_id", "incarnation", "log_offset"],
                     fmt("generation %s written after generation %s (log offset %s)", "generation", "_prev", "_prev_pos"))


def _one_owner_per_partition(t: DataFrame, _ctx: Context) -> DataFrame:
    # A static member replaced mid-generation is rewritten under a new member id but the
    # same group.instance.id: the same owner. Two distinct owners is a real conflict.
    owned = t.where(F.col("topic").isNotNull()).withColumn("_owner", F.coalesce("group_instance_id", "member_id"))
    bad = owned.groupBy("cluster", "group_id", "incarnation", "generation", "topic", "partition").agg(
        F.sort_array(F.collect_set("_owner")).alias("_owners")).where(F.size("_owners") > 1)
    return violation(bad, ["cluster", "group_id", "incarnation", "generation", "topic", "partition"],
                     F.concat(F.lit("owned by "), F.concat_ws(", ", "_owners")))


def _member_identity(t: DataFrame, _ctx: Context) -> DataFrame:
    members = t.groupBy("cluster", "group_id", "incarnation", "generation", "member_id").agg(
        F.max(F.when(F.length(F.trim("client_id")) > 0, 1).otherwise(0)).alias("_cid"),
        F.max(F.when(F.length(F.trim("client_host")) > 0, 1).otherwise(0)).alias("_host"))
    bad = members.where((F.col("_cid") == 0) | (F.col("_host") == 0))
    return violation(bad, ["cluster", "group_id", "incarnation", "generation", "member_id"], F.concat_ws(
        " and ", F.when(F.col("_cid") == 0, F.lit("no client id")), F.when(F.col("_host") == 0, F.lit("no client host"))))


GROUP_GENERATIONS = Suite("group_generations", "silver", (
    Invariant("generation_never_decreases",
              "within a group incarnation, each generation record's generation is >= the previous one's "
              "(equal: a static member's replacement rewrites it)", ERROR,
              ("group_id", "incarnation", "generation", "is_deletion", "coordinator_partition", "log_offset"),
              _generations_never_decrease, scope=("cluster", "group_id", "incarnation")),
    row_check("generation_present", lambda: ~F.col("is_deletion") & (F.col("generation").isNull() | (F.col("generation") < 0)),
              ["cluster", "group_id", "log_offset"], lambda: fmt("generation %s", "generation"),
              ("is_deletion", "generation"), "every generation record (not a tombstone) has a generation >= 0"),
    null_check("generation_has_incarnation", ("group_id", "incarnation"), _POS,
               description="every generation record belongs to a group incarnation"),
    unique_check("generation_record_once", _POS, "a generation record is decoded once"),
))

MEMBER_ASSIGNMENTS = Suite("member_assignments", "silver", (
    Invariant("partition_has_one_owner",
              "no partition belongs to two members in one generation of a group incarnation", ERROR,
              ("group_id", "incarnation", "generation", "topic", "partition", "member_id", "group_instance_id"),
              _one_owner_per_partition, scope=("cluster", "group_id", "incarnation", "generation")),
    Invariant("member_has_client_id_and_host", "every member of a generation has a client id and a client host",
              ERROR, ("group_id", "incarnation", "generation", "member_id", "client_id", "client_host"), _member_identity,
              scope=("cluster", "group_id", "incarnation", "generation")),
    row_check("assignment_well_formed",
              lambda: (F.col("topic").isNull() != F.col("partition").isNull()) | (F.col("partition") < 0),
              ["cluster", "group_id", "generation", "member_id", "log_offset"],
              lambda: fmt("topic %s partition %s", "topic", "partition"), ("topic", "partition"),
              "an assignment row has both topic and partition >= 0, or neither (an empty assignment)"),
    row_check("assignment_decoded", lambda: F.col("decode_error").isNotNull(),
              ["cluster", "group_id", "generation", "member_id", "log_offset"], lambda: F.col("decode_error"),
              ("decode_error",), "every member's subscription and assignment bytes decoded", severity=WARN),
))


def _offsets_within_watermark(t: DataFrame, ctx: Context) -> DataFrame | None:
    """A commit cannot point past the partition's log end: any high watermark sampled after
    the commit was written is >= the committed offset (log ends only grow)."""
    ends = ctx.other("partition_end_offsets")
    if ends is None:
        return None
    latest = ends.groupBy("cluster", "topic", "partition").agg(
        F.max("end_offset").alias("_hw"), F.max("sampled_at").alias("_sampled"))
    c = t.where(~F.col("is_deletion")).join(latest, ["cluster", "topic", "partition"])
    bad = c.where((F.coalesce("record_ts", "commit_ts") <= F.col("_sampled")) & (F.col("offset") > F.col("_hw")))
    return violation(bad, ["cluster", "group_id", "topic", "partition", "log_offset"],
                     fmt("committed offset %s above the high watermark %s sampled at %s", "offset", "_hw", "_sampled"))


OFFSET_COMMITS = Suite("offset_commits", "silver", (
    row_check("offset_non_negative", lambda: ~F.col("is_deletion") & (F.col("offset").isNull() | (F.col("offset") < 0)),
              ["cluster", "group_id", "topic", "partition", "log_offset"], lambda: fmt("committed offset %s", "offset"),
              ("is_deletion", "offset"), "every commit (not a tombstone) has an offset >= 0"),
    Invariant("offset_within_high_watermark",
              "no committed offset is above a high watermark (log-end offset) sampled after the commit", ERROR,
              ("topic", "partition", "offset", "is_deletion", "record_ts", "commit_ts", "group_id", "log_offset"),
              _offsets_within_watermark, needs="partition_end_offsets (sampled by live ingestion)",
              scope=("cluster", "topic", "partition"), reads=("partition_end_offsets",)),
    null_check("commit_has_timestamp", ("commit_ts",), ["cluster", "group_id", "topic", "partition", "log_offset"],
               where=lambda: ~F.col("is_deletion"), severity=WARN,
               description="every commit carries its commit timestamp"),
    unique_check("commit_record_once", _POS, "a commit record is decoded once"),
))


COORDINATOR_EVENTS = Suite("coordinator_events", "silver", (
    row_check("coordinator_line_parsed", lambda: F.col("event") == "unrecognized",
              ["cluster", "broker", "file", "line"], lambda: F.substring(F.coalesce("message", F.lit("")), 1, 200),
              ("event", "broker", "file", "line", "message"),
              "every line of a coordinator logger is parsed into a known event (none `unrecognized`)", severity=WARN),
    row_check("coordinator_line_readable", lambda: F.col("event") == "error",
              ["cluster", "broker", "file", "line"], lambda: F.coalesce("error", F.lit("read error")),
              ("event", "broker", "file", "line", "error"), "every coordinator entry was readable (no `error` events)",
              severity=WARN),
    null_check("event_has_timestamp", ("ts",), ["cluster", "broker", "file", "line"], severity=WARN,
               description="every event has a timestamp"),
))

BROKER_CLOCKS = Suite("broker_clocks", "silver", (
    unique_check("broker_measured_once", ["cluster", "broker"], "one clock offset per broker of a cluster"),
    # Not the lake's fault, the cluster's: a broker whose clock is off its cluster's by more
    # than the measure's tolerance. Gold corrects the times it wrote; the SRE fixes its NTP.
    row_check("broker_clock_agrees", lambda: F.col("clock_offset_ms") != 0, ["cluster", "broker"],
              lambda: fmt("clock %s ms off the cluster's (from %s shared lines)", "clock_offset_ms", "shared_lines"),
              ("clock_offset_ms", "shared_lines"),
              "every broker's clock agrees with its cluster's within the measure's tolerance (2 s)", severity=WARN),
))

# The KIP-848 tables' suites are in quality/kip848.py.
SUITES = (GROUP_GENERATIONS, MEMBER_ASSIGNMENTS, OFFSET_COMMITS, COORDINATOR_EVENTS, BROKER_CLOCKS)
