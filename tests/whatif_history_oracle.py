"""An independent Spark formulation of each group's replay history: the test oracle of
`pipelines.whatif.assemble` (which builds the same rows per group in Python, inside the
replay job). Kept with the tests: the engine never runs it.

One row per (group, step, member, partition) with durations, commit stats and topic counts.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pipelines.whatif.spark_job import WhatifInputs


def _ms(col) -> F.Column:
    return F.unix_micros(col) / 1000.0


# ----------------------------------------------------------------------------- classic groups
def _classic_steps(inp: WhatifInputs) -> DataFrame:
    g = inp.group_generations.where(
        ~F.col("is_deletion") & F.col("generation").isNotNull()
        # Consumer groups only (Connect and others use their own protocols), plus empty generations.
        & ((F.col("protocol_type") == "consumer") | (F.coalesce(F.col("member_count"), F.lit(0)) == 0))
        # The new coordinator's generation-0 creation record carries no membership.
        & ~((F.col("generation") == 0) & (F.coalesce(F.col("member_count"), F.lit(0)) == 0))
    )
    g = g.select("cluster", "group_id", F.coalesce("incarnation", F.lit(0)).cast("int").alias("incarnation"),
                 "generation", "protocol", "coordinator_partition", "log_offset", "record_ts", "current_state_ts")
    durations = _classic_durations(inp, g)
    m = inp.member_assignments.select(
        "cluster", "coordinator_partition", "log_offset", "member_id", F.col("group_instance_id").alias("instance_id"),
        "client_id", F.col("subscribed_topics").alias("topics"), "topic", "partition",
    )
    rows = g.join(m, ["cluster", "coordinator_partition", "log_offset"], "left").join(
        durations, ["cluster", "coordinator_partition", "log_offset"], "left")
    return rows.select(
        "cluster", "group_id", "incarnation", F.lit("classic").alias("kind"), "generation",
        F.col("log_offset").alias("position"), _ms("record_ts").cast("long").alias("ts_ms"), "protocol", "member_id",
        "instance_id", "client_id", "topics", "topic", "partition", "duration_ms", "duration_source",
        F.lit(None).cast("string").alias("topic_counts"),
    )


def _classic_durations(inp: WhatifInputs, g: DataFrame) -> DataFrame:
    keys = ["cluster", "coordinator_partition", "log_offset"]
    w = Window.partitionBy("cluster", "group_id", "incarnation").orderBy("log_offset")
    base = g.withColumn("_prev_ts", F.lag("record_ts").over(w))
    out = base.select(*keys, "group_id", "incarnation", "generation", "record_ts", "_prev_ts",
                      F.when(F.col("current_state_ts").isNotNull(),
                             _ms("record_ts") - _ms("current_state_ts")).alias("_sync_ms"))
    if inp.coordinator_events is not None:
        ev = inp.coordinator_events.where(F.col("event") == "rebalance_started").select(
            "cluster", F.col("group_id").alias("_g"), F.col("event_ts").alias("_start"))
        joined = out.join(ev, (out.cluster == ev.cluster) & (out.group_id == ev._g) & (ev._start <= out.record_ts)
                          & (F.col("_prev_ts").isNull() | (ev._start > F.col("_prev_ts"))), "left").drop(ev.cluster)
        # The first start line after the previous generation: a rebalance restarted by another
        # join before it completed is still one episode (the one that ended in this record).
        out = joined.groupBy(*keys, "group_id", "incarnation", "generation", "record_ts", "_sync_ms").agg(
            F.min("_start").alias("_start"))
        log_ms = _ms("record_ts") - _ms("_start")
    else:
        log_ms = F.lit(None).cast("double")
    dur = F.when(F.col("_start").isNotNull() if inp.coordinator_events is not None else F.lit(False), log_ms)
    src = F.when(F.col("_start").isNotNull() if inp.coordinator_events is not None else F.lit(False),
                 F.lit("coordinator_events"))
    if inp.rebalance_episodes is not None:
        ep = inp.rebalance_episodes.where(F.col("duration_ms").isNotNull()).select(
            "cluster", F.col("group_id").alias("_eg"), F.col("incarnation").alias("_ei"),
            F.col("to_generation").alias("_eto"), F.col("duration_ms").cast("double").alias("_ep_ms"))
        ep = ep.groupBy("cluster", "_eg", "_ei", "_eto").agg(F.max("_ep_ms").alias("_ep_ms"))
        out = out.join(ep, (out.cluster == ep.cluster) & (out.group_id == ep._eg) & (out.incarnation == ep._ei)
                       & (out.generation == ep._eto), "left").drop(ep.cluster)
        dur = F.when(F.col("_ep_ms").isNotNull(), F.col("_ep_ms")).otherwise(dur)
        src = F.when(F.col("_ep_ms").isNotNull(), F.lit("rebalance_episodes")).otherwise(src)
    dur = F.coalesce(dur, F.col("_sync_ms"))
    src = F.coalesce(src, F.when(F.col("_sync_ms").isNotNull(), F.lit("records: sync phase only (lower bound)")))
    return out.select(*keys, dur.cast("double").alias("duration_ms"), src.alias("duration_source"))


# ----------------------------------------------------------------------------- KIP-848 groups
def _consumer_steps(inp: WhatifInputs) -> DataFrame | None:
    if inp.target_assignments is None or inp.consumer_group_members is None:
        return None
    t = inp.target_assignments
    epochs = t.select("cluster", "group_id", "coordinator_partition", "assignment_epoch", "epoch_offset", "epoch_ts").distinct()
    members = inp.consumer_group_members.select(
        "cluster", "group_id", "coordinator_partition", "member_id", "is_deletion", F.col("instance_id"),
        "client_id", F.col("subscribed_topic_names").alias("topics"), "server_assignor", F.col("log_offset").alias("_mo"))
    # Each member's metadata as of the epoch: its newest member record before the epoch record.
    tm = t.select("cluster", "group_id", "coordinator_partition", "assignment_epoch", "epoch_offset", "epoch_ts",
                  "member_id").distinct()
    j = tm.join(members, ["cluster", "group_id", "coordinator_partition", "member_id"], "left").where(
        F.col("_mo").isNull() | (F.col("_mo") < F.col("epoch_offset")))
    w = Window.partitionBy("cluster", "group_id", "assignment_epoch", "member_id").orderBy(F.col("_mo").desc_nulls_last())
    meta = j.withColumn("_rn", F.row_number().over(w)).where("_rn = 1").drop("_rn", "_mo", "is_deletion")
    parts = t.select("cluster", "group_id", "assignment_epoch", "member_id", "topic", "partition")
    rows = meta.join(parts, ["cluster", "group_id", "assignment_epoch", "member_id"], "left")
    assignor = inp.consumer_group_members.where(F.col("server_assignor").isNotNull()).groupBy("cluster", "group_id").agg(
        F.max("server_assignor").alias("_sa"))
    rows = rows.join(assignor, ["cluster", "group_id"], "left")
    counts = None
    if inp.topic_ids is not None:
        counts = inp.topic_ids.where(F.col("num_partitions").isNotNull()).groupBy("cluster", "topic").agg(
            F.max("num_partitions").alias("n")).groupBy("cluster").agg(
            F.to_json(F.map_from_entries(F.collect_list(F.struct("topic", "n")))).alias("topic_counts"))
        rows = rows.join(counts, ["cluster"], "left")
    else:
        rows = rows.withColumn("topic_counts", F.lit(None).cast("string"))
    dur = _consumer_durations(inp, epochs)
    rows = rows.join(dur, ["cluster", "group_id", "assignment_epoch"], "left")
    return rows.select(
        "cluster", "group_id", F.lit(0).alias("incarnation"), F.lit("consumer").alias("kind"),
        F.col("assignment_epoch").alias("generation"), F.col("epoch_offset").alias("position"),
        _ms("epoch_ts").cast("long").alias("ts_ms"),
        # KIP-848's default server assignor (group.consumer.assignors' first entry) is uniform.
        F.coalesce("_sa", F.lit("uniform")).alias("protocol"), "member_id", "instance_id", "client_id", "topics", "topic",
        "partition", "duration_ms", "duration_source", "topic_counts",
    )


def _consumer_durations(inp: WhatifInputs, epochs: DataFrame) -> DataFrame:
    if inp.current_assignments is None:
        return epochs.select("cluster", "group_id", "assignment_epoch", F.lit(None).cast("double").alias("duration_ms"),
                             F.lit(None).cast("string").alias("duration_source"))
    ca = inp.current_assignments.where(~F.col("is_deletion")).select(
        "cluster", "group_id", F.col("member_epoch").alias("assignment_epoch"), F.col("record_ts").alias("_rts"))
    last = ca.groupBy("cluster", "group_id", "assignment_epoch").agg(F.max("_rts").alias("_done"))
    j = epochs.join(last, ["cluster", "group_id", "assignment_epoch"], "left")
    d = F.greatest(F.lit(0.0), _ms("_done") - _ms("epoch_ts"))
    return j.select("cluster", "group_id", "assignment_epoch", F.when(F.col("_done").isNotNull(), d).alias("duration_ms"),
                    F.when(F.col("_done").isNotNull(), F.lit("current_assignments: reconciliation")).alias("duration_source"))


# ----------------------------------------------------------------------------- shared
def _commit_stats(inp: WhatifInputs) -> DataFrame | None:
    if inp.offset_commits is None:
        return None
    c = inp.offset_commits.where(~F.col("is_deletion") & F.col("offset").isNotNull())
    ts = F.coalesce("commit_ts", "record_ts")
    per = c.groupBy("cluster", "group_id", "topic", "partition").agg(
        F.count("*").alias("n"), F.min(ts).alias("t0"), F.max(ts).alias("t1"),
        F.min("offset").alias("o0"), F.max("offset").alias("o1"))
    span_s = (_ms("t1") - _ms("t0")) / 1000.0
    per = per.where((F.col("n") > 1) & (span_s > 0)).select(
        "cluster", "group_id", (span_s * 1000.0 / (F.col("n") - 1)).alias("interval_ms"),
        ((F.col("o1") - F.col("o0")) / span_s).alias("rate"))
    return per.groupBy("cluster", "group_id").agg(F.avg("interval_ms").alias("commit_interval_ms"),
                                                  F.avg("rate").alias("records_per_partition_s"))


def _cluster_topic_counts(inp: WhatifInputs) -> DataFrame:
    """Per cluster: topic → highest partition seen anywhere + 1 (or the stored count)."""
    parts = [inp.member_assignments.where(F.col("topic").isNotNull()).select("cluster", "topic", "partition")]
    if inp.offset_commits is not None:
        parts.append(inp.offset_commits.select("cluster", "topic", "partition"))
    if inp.target_assignments is not None:
        parts.append(inp.target_assignments.where(F.col("topic").isNotNull()).select("cluster", "topic", "partition"))
    seen = parts[0]
    for p in parts[1:]:
        seen = seen.unionByName(p)
    seen = seen.groupBy("cluster", "topic").agg((F.max("partition") + 1).alias("n"))
    if inp.topic_ids is not None:
        stored = inp.topic_ids.where(F.col("num_partitions").isNotNull()).select("cluster", "topic", F.col("num_partitions").alias("n"))
        seen = seen.unionByName(stored).groupBy("cluster", "topic").agg(F.max("n").alias("n"))
    return seen.groupBy("cluster").agg(F.to_json(F.map_from_entries(F.collect_list(F.struct("topic", "n")))).alias("_cluster_counts"))


def history_rows(inp: WhatifInputs) -> DataFrame:
    """One row per (group, step, member, partition) with durations, commit stats and topic counts."""
    rows = _classic_steps(inp)
    consumer = _consumer_steps(inp)
    if consumer is not None:
        rows = rows.unionByName(consumer)
    stats = _commit_stats(inp)
    if stats is not None:
        rows = rows.join(stats, ["cluster", "group_id"], "left")
    else:
        rows = rows.withColumn("commit_interval_ms", F.lit(None).cast("double")).withColumn(
            "records_per_partition_s", F.lit(None).cast("double"))
    return rows.join(_cluster_topic_counts(inp), ["cluster"], "left")
