"""What-if replay over every group, distributed with Spark.

`history_rows(inputs)` turns the silver tables into one row per (group, step, member,
partition); `whatif_tables(inputs, assignors)` groups them by (cluster, group_id,
incarnation, kind) and runs the Python assignors on the executors (`applyInArrow`), one
group per call: nothing per group runs on the driver. `update_whatif(lake, ...)` writes
`whatif_episodes` and `whatif_summary` (replacing each cluster's rows).

Episode durations: gold `rebalance_episodes.duration_ms` where that table is given; else the
coordinator's "Preparing to rebalance" line (silver `coordinator_events`) up to the
generation record; else only the sync phase the record itself bounds (record timestamp −
currentStateTimestamp: a lower bound). KIP-848 epochs: from the target epoch's record to the
last member record reaching that epoch (`current_assignments`). `duration_source` says which.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from .schemas import WHATIF_EPISODES, WHATIF_SUMMARY

GROUP_KEYS = ["cluster", "group_id", "incarnation", "kind"]

HISTORY_SCHEMA = pa.schema([
    pa.field("cluster", pa.string()), pa.field("group_id", pa.string()), pa.field("incarnation", pa.int32()),
    pa.field("kind", pa.string()), pa.field("generation", pa.int32()), pa.field("position", pa.int64()),
    pa.field("ts_ms", pa.int64()), pa.field("protocol", pa.string()), pa.field("member_id", pa.string()),
    pa.field("instance_id", pa.string()), pa.field("client_id", pa.string()), pa.field("topics", pa.list_(pa.string())),
    pa.field("topic", pa.string()), pa.field("partition", pa.int32()), pa.field("duration_ms", pa.float64()),
    pa.field("duration_source", pa.string()), pa.field("topic_counts", pa.string()),
])

_EXTRA = [pa.field("_divergence_list", pa.string()), pa.field("_notes", pa.string()), pa.field("_steps", pa.int32()),
          pa.field("_commit_interval_ms", pa.float64()), pa.field("_records_per_partition_s", pa.float64())]
EPISODES_WITH_EXTRAS = pa.schema(list(WHATIF_EPISODES) + _EXTRA)


@dataclass
class WhatifInputs:
    """Silver (and optionally gold) tables the replay reads. Only the classic two are required."""

    group_generations: DataFrame
    member_assignments: DataFrame
    offset_commits: DataFrame | None = None
    coordinator_events: DataFrame | None = None
    rebalance_episodes: DataFrame | None = None
    target_assignments: DataFrame | None = None
    consumer_group_members: DataFrame | None = None
    current_assignments: DataFrame | None = None
    topic_ids: DataFrame | None = None

    @classmethod
    def from_lake(cls, lake) -> "WhatifInputs":
        def opt(name):
            return lake.read(name) if lake.exists(name) else None

        if not lake.exists("group_generations") and not lake.exists("target_assignments"):
            raise ValueError(f"no group history in the lake at {lake.root}: run silver first (group_generations missing)")
        gg, ma = opt("group_generations"), opt("member_assignments")
        if gg is None or ma is None:
            gg = gg if gg is not None else _empty(lake.spark, _GG_MIN)
            ma = ma if ma is not None else _empty(lake.spark, _MA_MIN)
        return cls(
            group_generations=gg, member_assignments=ma, offset_commits=opt("offset_commits"),
            coordinator_events=opt("coordinator_events"), rebalance_episodes=opt("rebalance_episodes"),
            target_assignments=opt("target_assignments"), consumer_group_members=opt("consumer_group_members"),
            current_assignments=opt("current_assignments"), topic_ids=opt("topic_ids"),
        )


_GG_MIN = "cluster string, group_id string, incarnation int, generation int, is_deletion boolean, protocol_type string, " \
          "protocol string, current_state_ts timestamp, member_count int, coordinator_partition int, log_offset long, record_ts timestamp"
_MA_MIN = "cluster string, group_id string, generation int, member_id string, group_instance_id string, client_id string, " \
          "subscribed_topics array<string>, topic string, partition int, coordinator_partition int, log_offset long"


def _empty(spark, ddl: str) -> DataFrame:
    return spark.createDataFrame([], ddl)


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


def _replay_fn(assignors: list[str]):
    def run(table: pa.Table) -> pa.Table:
        # Imported on the executor: the Python assignors run there, one group per call.
        from pipelines.whatif.history import build_history
        from pipelines.whatif.rows import replay_group_rows

        rows = table.to_pylist()
        if not rows:
            return pa.Table.from_pylist([], schema=EPISODES_WITH_EXTRAS)
        counts = json.loads(rows[0]["_cluster_counts"]) if rows[0].get("_cluster_counts") else {}
        hist = build_history(rows, counts)
        out = replay_group_rows(hist, assignors)
        return pa.Table.from_pylist(out, schema=EPISODES_WITH_EXTRAS)

    return run


def _summary_fn(table: pa.Table) -> pa.Table:
    from pipelines.whatif.rows import summarize

    return pa.Table.from_pylist(summarize(table.to_pylist()), schema=WHATIF_SUMMARY)


def whatif_tables(inp: WhatifInputs, assignors: list[str]) -> tuple[DataFrame, DataFrame]:
    """(whatif_episodes, whatif_summary) for every group of the inputs."""
    from .protocols import protocol_of

    for a in assignors:
        protocol_of(a)  # unknown names fail here, on the driver, with the list of known ones
    rows = history_rows(inp)
    extras = rows.groupBy(*GROUP_KEYS).applyInArrow(_replay_fn(list(assignors)), from_arrow_schema(EPISODES_WITH_EXTRAS))
    extras = extras.cache()
    episodes = extras.select(*WHATIF_EPISODES.names)
    summary = extras.groupBy("cluster", "group_id", "incarnation", "group_kind").applyInArrow(
        _summary_fn, from_arrow_schema(WHATIF_SUMMARY))
    return episodes, summary


def update_whatif(lake, assignors: list[str] | None = None) -> dict[str, int]:
    """Replay every group of the lake and write `whatif_episodes` / `whatif_summary`, replacing
    the rows of each cluster present in the input. Returns the row counts written."""
    from .protocols import DEFAULT_ASSIGNORS

    inp = WhatifInputs.from_lake(lake)
    episodes, summary = whatif_tables(inp, list(assignors or DEFAULT_ASSIGNORS))
    written = {}
    clusters = [r.cluster for r in episodes.select("cluster").distinct().collect()]
    for name, df in (("whatif_episodes", episodes), ("whatif_summary", summary)):
        df = df.cache()
        written[name] = df.count()
        replace = [("cluster", "in", clusters)] if lake.exists(name) and clusters else None
        lake.write_df(name, df, mode="overwrite", partition_by=["cluster"], replace_where=replace)
        df.unpersist()
    return written
