"""rebalance_storms: at least K logical rebalances of one group inside W minutes.

Counted per logical rebalance (a cooperative handover's second generation is part of the
first), leaving out rebalances into or out of Empty (start-up and shut-down). Every
episode that closes a window of W minutes holding K or more starts a span from the
window's first episode; overlapping spans merge into one storm.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .model import GoldParams

KEYS = ["cluster", "group_id", "incarnation"]


def build_rebalance_storms(episodes: DataFrame, params: GoldParams, membership: DataFrame | None = None) -> DataFrame:
    k = params.storm_min_rebalances
    w_ms = int(params.storm_window_minutes * 60_000)
    e = episodes.where((F.col("phase") == 1) & ~F.col("empty_transition")) \
        .withColumn("t", F.coalesce("started_ms", "completed_ms")).where(F.col("t").isNotNull())
    win = Window.partitionBy(*KEYS).orderBy("t").rangeBetween(-w_ms, 0)
    e = e.withColumn("_n", F.count("*").over(win)).withColumn("_first", F.min("t").over(win))
    spans = e.where(F.col("_n") >= k).select(*KEYS, F.col("_first").alias("s"), F.col("t").alias("e"))
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


def _flappers(membership: DataFrame, storms: DataFrame) -> DataFrame:
    """Identities (instance id, else client id@host) that joined the group twice or more during the storm.

    `membership`: (cluster, group_id, incarnation, member_id, identity, first_ms) — when each member id first appeared.
    """
    j = membership.join(storms, KEYS).where((F.col("first_ms") >= F.col("start_ms")) & (F.col("first_ms") <= F.col("end_ms")))
    f = j.groupBy(*KEYS, "_storm", "identity").agg(F.countDistinct("member_id").alias("n")).where(F.col("n") >= 2)
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
