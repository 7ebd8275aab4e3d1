"""commit_anomalies (rewind, stall, stop) and skip_windows.

* rewind: a commit lower than the one before it on the same partition (same incarnation).
* stall: the same offset committed again and again (at least `stall_min_commits` times over
  `stall_min_ms`) while other partitions of the same topic in the group moved on — the
  consumer is alive but not progressing on this one.
* stop: commits on a partition ceased for longer than `stop_min_ms` (and ten commit
  intervals) while the partition was still owned by a member of the group.
* skip window: a commit that jumps further than the partition could have been processed in
  the time since the previous one (`skip_rate_factor` × the group's peak rate on it, and at
  least `skip_min_records`), or past a sampled log-end offset: offsets at risk of never
  being processed.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .model import GoldInputs, GoldParams
from .ownership import COMMIT_PARTITION, build_commit_attribution, rewound, with_neighbours

TP = COMMIT_PARTITION
COLUMNS = ["cluster", "group_id", "topic", "partition", "kind", "started_at", "ended_at", "span_ms", "offset_from", "offset_to",
           "commits", "member_id"]


def build_commit_anomalies(inputs: GoldInputs, intervals: DataFrame, params: GoldParams, attributed: DataFrame | None = None) -> DataFrame:
    a = with_neighbours(attributed if attributed is not None else build_commit_attribution(inputs, intervals),
                        {"offset": "_prev_off", "commit_ms": "_prev_ms", "incarnation": "_prev_inc"})
    rewinds = a.where(rewound()).select(
        *TP, F.lit("rewind").alias("kind"), F.col("_prev_ms").alias("s"), F.col("commit_ms").alias("e"),
        F.col("_prev_off").alias("offset_from"), F.col("offset").alias("offset_to"), F.lit(2).cast("long").alias("commits"), "member_id")
    # Stalls: runs of equal offsets.
    w = Window.partitionBy(*TP).orderBy("effective_log_offset")
    r = a.withColumn("_new", F.when(F.col("offset").eqNullSafe(F.col("_prev_off")), 0).otherwise(1)) \
        .withColumn("_run", F.sum("_new").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    runs = r.groupBy(*TP, "_run").agg(F.min("commit_ms").alias("s"), F.max("commit_ms").alias("e"), F.count("*").alias("commits"),
                                     F.first("offset").alias("offset_from"),
                                     # A run can span owners: the one whose commit started it.
                                     F.min_by("member_id", "effective_log_offset").alias("member_id"))
    runs = runs.where((F.col("commits") >= params.stall_min_commits) & (F.col("e") - F.col("s") >= params.stall_min_ms))
    # ... while the group progressed on another partition of the topic in the same span.
    moving = a.where(F.col("offset") > F.col("_prev_off")).select("cluster", "group_id", "topic", F.col("partition").alias("_op"),
                                                                   F.col("commit_ms").alias("_ms"))
    stalls = runs.join(moving, ["cluster", "group_id", "topic"]).where(
        (F.col("_op") != F.col("partition")) & (F.col("_ms") > F.col("s")) & (F.col("_ms") <= F.col("e"))) \
        .select(*TP, "s", "e", "commits", "offset_from", "member_id").distinct() \
        .select(*TP, F.lit("stall").alias("kind"), "s", "e", "offset_from", F.col("offset_from").alias("offset_to"), "commits", "member_id")
    # Stops: a long silence inside one owner's interval.
    cad = a.withColumn("_gap", F.col("commit_ms") - F.col("_prev_ms")).groupBy(*TP).agg(F.percentile_approx("_gap", 0.5).alias("_cad"))
    last = a.where(F.col("member_id").isNotNull()).groupBy(*TP, "member_id", "interval_start_pos").agg(
        F.max("commit_ms").alias("s"), F.max_by("offset", "effective_log_offset").alias("offset_from"))
    iv = intervals.select(*TP, "member_id", F.col("start_pos").alias("interval_start_pos"), "to_ms")
    data_end = a.groupBy("cluster", "coordinator_partition").agg(F.max("commit_ms").alias("_end"))
    stops = last.join(iv, TP + ["member_id", "interval_start_pos"]).join(cad, TP, "left").join(data_end, ["cluster", "coordinator_partition"]) \
        .withColumn("e", F.coalesce("to_ms", "_end")) \
        .where((F.col("e") - F.col("s") > F.greatest(F.lit(params.stop_min_ms), 10 * F.coalesce("_cad", F.lit(0))))) \
        .select(*TP, F.lit("stop").alias("kind"), "s", "e", "offset_from", F.col("offset_from").alias("offset_to"),
                F.lit(None).cast("long").alias("commits"), "member_id")
    out = rewinds.unionByName(stalls).unionByName(stops)
    return out.select("cluster", "group_id", "topic", "partition", "kind", F.timestamp_millis("s").alias("started_at"),
                      F.timestamp_millis("e").alias("ended_at"), (F.col("e") - F.col("s")).alias("span_ms"),
                      "offset_from", "offset_to", "commits", "member_id")


def build_skip_windows(inputs: GoldInputs, attributed: DataFrame, params: GoldParams) -> DataFrame:
    a = with_neighbours(attributed, {"offset": "_prev_off", "commit_ms": "_prev_ms"})
    w = Window.partitionBy(*TP)
    a = a.withColumn("_gap", F.col("commit_ms") - F.col("_prev_ms")).withColumn("_d", F.col("offset") - F.col("_prev_off"))
    a = a.withColumn("_peak", F.max(F.when((F.col("_gap") >= 500) & (F.col("_d") >= 0), F.col("_d") / F.col("_gap"))).over(w))
    jump = a.where(F.col("_prev_off").isNotNull() & (F.col("_d") > params.skip_min_records)
                   & (F.col("_d") > params.skip_rate_factor * F.col("_peak") * F.greatest(F.col("_gap"), F.lit(1))))
    out = jump.select("cluster", "group_id", "topic", "partition", "member_id", F.col("record_ts").alias("commit_ts"),
                      F.col("_prev_off").alias("start_offset"), F.col("offset").alias("end_offset"),
                      F.col("_d").alias("records"), F.lit("commit_jump").alias("cause"))
    if inputs.partition_end_offsets is not None:
        e = inputs.partition_end_offsets.select("cluster", "topic", "partition", F.col("end_offset").alias("_eo"),
                                                F.unix_millis("sampled_at").alias("_es"))
        # Each commit against the first sample taken after it: a log end only grows until a
        # topic is deleted and recreated, and comparing with every later sample would flag
        # every earlier commit again at each sample after a recreation (rows without bound).
        first = Window.partitionBy(*TP, "effective_log_offset").orderBy("_es")
        ahead = a.join(e, ["cluster", "topic", "partition"]).where(F.col("_es") >= F.col("commit_ms")) \
            .withColumn("_n", F.row_number().over(first)).where((F.col("_n") == 1) & (F.col("offset") > F.col("_eo")))
        out = out.unionByName(ahead.select("cluster", "group_id", "topic", "partition", "member_id", F.col("record_ts").alias("commit_ts"),
                                           F.col("_eo").alias("start_offset"), F.col("offset").alias("end_offset"),
                                           (F.col("offset") - F.col("_eo")).alias("records"), F.lit("committed_past_log_end").alias("cause")))
    return out
