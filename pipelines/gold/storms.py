"""rebalance_storms: rebalances that keep stopping one group's consumption.

A rebalance stops the partitions it revokes until they are assigned again: every partition
in an eager (classic) rebalance, only the moved ones in an incremental one
(cooperative-sticky, KIP-848). So each logical rebalance weighs the share of the group's
partitions it revoked, 1 for an eager one, and a storm is where those weights add up to at
least K inside W minutes: K stop-the-world rebalances or their equivalent in partial ones.
The same measure holds for classic and KIP-848 groups. A rolling restart or a scale-out of
an incremental group moves each partition about once and stays far below K; flapping
members, repeated eager rebalances and a cooperative group churning on and on do not.

Counted per logical rebalance (a cooperative handover's second generation is part of the
first), leaving out rebalances into or out of Empty (start-up and shut-down); one whose
moves are unknown (started, never completed) weighs 1. Every rebalance that brings its
window to K starts a span from the window's first rebalance; overlapping spans merge into
one storm. Its flapping members are identities that joined three times or more inside it:
restarted more than once, which a rolling restart does not do.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .model import GoldParams

KEYS = ["cluster", "group_id", "incarnation"]
# An identity that joined this many times inside a storm flapped (a rolling restart joins
# each identity twice: before and after its restart).
FLAP_MIN_JOINS = 3


def build_rebalance_storms(episodes: DataFrame, params: GoldParams, membership: DataFrame | None,
                           ownership: DataFrame) -> DataFrame:
    """`ownership`: the ownership intervals, for how many partitions each group consumes."""
    k = params.storm_min_rebalances
    w_ms = int(params.storm_window_minutes * 60_000)
    e = episodes.where((F.col("phase") == 1) & ~F.col("empty_transition")) \
        .withColumn("t", F.coalesce("started_ms", "completed_ms")).where(F.col("t").isNotNull())
    e = _with_stopped_share(e, ownership)
    win = Window.partitionBy(*KEYS).orderBy("t").rangeBetween(-w_ms, 0)
    e = e.withColumn("_n", F.sum("_weight").over(win)).withColumn("_first", F.min("t").over(win))
    # A small tolerance: shares of partitions add up in floating point.
    spans = e.where(F.col("_n") >= k - 1e-9).select(*KEYS, F.col("_first").alias("s"), F.col("t").alias("e"))
    ws = Window.partitionBy(*KEYS).orderBy("s", "e")
    spans = spans.withColumn("_max_prev", F.max("e").over(ws.rowsBetween(Window.unboundedPreceding, -1))) \
        .withColumn("_new", F.when(F.col("_max_prev").isNull() | (F.col("s") > F.col("_max_prev")), 1).otherwise(0)) \
        .withColumn("_storm", F.sum("_new").over(ws.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    storms = spans.groupBy(*KEYS, "_storm").agg(F.min("s").alias("start_ms"), F.max("e").alias("end_ms"))
    all_eps = episodes.withColumn("t", F.coalesce("started_ms", "completed_ms"))
    j = storms.join(all_eps, KEYS).where((F.col("t") >= F.col("start_ms")) & (F.col("t") <= F.col("end_ms")))
    trig = j.groupBy(*KEYS, "_storm", "trigger").count()
    wt = Window.partitionBy(*KEYS, "_storm").orderBy(F.desc("count"), "trigger")
    dominant = trig.withColumn("_r", F.row_number().over(wt)).where(F.col("_r") == 1).select(*KEYS, "_storm", F.col("trigger").alias("dominant_trigger"))
    agg = j.groupBy(*KEYS, "_storm", "start_ms", "end_ms").agg(
        F.countDistinct(F.when((F.col("phase") == 1) & ~F.col("empty_transition"), F.col("logical_rebalance_id"))).alias("episodes"),
        F.count("*").alias("generations"),
        F.sum(F.coalesce("duration_ms", F.lit(0))).alias("time_rebalancing_ms"),
    )
    out = agg.join(dominant, KEYS + ["_storm"], "left")
    if membership is not None:
        out = out.join(_flappers(membership, storms), KEYS + ["_storm"], "left")
    else:
        out = out.withColumn("flapping_members", F.lit(None).cast("array<string>"))
    return out.select(
        *KEYS, F.timestamp_millis("start_ms").alias("started_at"), F.timestamp_millis("end_ms").alias("ended_at"),
        "episodes", "generations", "time_rebalancing_ms", "dominant_trigger", "flapping_members",
    )


def _with_stopped_share(e: DataFrame, ownership: DataFrame) -> DataFrame:
    """`_weight`: the share of the group's partitions each rebalance revoked (1 when unknown)."""
    revoked = F.col("partitions_revoked").cast("double")
    sizes = ownership.where(F.col("owner_kind") == "member").select(*KEYS, "topic", "partition").distinct() \
        .groupBy(*KEYS).agg(F.count("*").alias("_group_partitions"))
    e = e.join(sizes, KEYS, "left")
    share = F.least(F.lit(1.0), revoked / F.col("_group_partitions"))
    return e.withColumn("_weight", F.coalesce(share, F.lit(1.0))).drop("_group_partitions")


def _flappers(membership: DataFrame, storms: DataFrame) -> DataFrame:
    """Identities (instance id, else client id@host) that joined the group FLAP_MIN_JOINS times or more during the storm.

    `membership`: (cluster, group_id, incarnation, member_id, identity, first_ms) — when each member id first appeared.
    """
    j = membership.join(storms, KEYS).where((F.col("first_ms") >= F.col("start_ms")) & (F.col("first_ms") <= F.col("end_ms")))
    f = j.groupBy(*KEYS, "_storm", "identity").agg(F.countDistinct("member_id").alias("n")).where(F.col("n") >= FLAP_MIN_JOINS)
    return f.groupBy(*KEYS, "_storm").agg(F.sort_array(F.collect_list("identity")).alias("flapping_members"))


def membership_identities(member_assignments: DataFrame, consumer_group_members: DataFrame | None = None) -> DataFrame:
    m = member_assignments.groupBy("cluster", "group_id", "incarnation", "member_id").agg(
        F.min(F.unix_millis("record_ts")).alias("first_ms"),
        F.first(F.coalesce(F.col("group_instance_id"), F.concat_ws("@", "client_id", "client_host"))).alias("identity"),
    )
    if consumer_group_members is not None:
        c = consumer_group_members.where(~F.col("is_deletion")).groupBy("cluster", "group_id", "member_id").agg(
            F.min(F.unix_millis("record_ts")).alias("first_ms"),
            F.first(F.coalesce(F.col("instance_id"), F.concat_ws("@", "client_id", "client_host"))).alias("identity"),
        ).withColumn("incarnation", F.lit(0))
        m = m.unionByName(c)
    return m
