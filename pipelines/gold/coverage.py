"""coverage_gaps: spans of a group's history the input no longer holds.

* `compacted_range`: log offsets missing from a `__consumer_offsets` partition (the cleaner
  removed them, or retention deleted whole segments before the input starts); reported for
  every group with records in that partition. Single missing offsets are not holes: they are
  transaction markers, which a consumer never receives. Live ingestion reads back the
  records of aborted transactions, which read_committed skips (bronze `aborted`), so their
  ranges are no holes either; nor are runs of markers side by side
  (`transactions.without_marker_runs`).
* `generation_history_starts_late`: a group's first persisted generation is above 1 and
  records before it are missing.
* `offsets_deleted`: an offset tombstone (expiry, DeleteGroups, OffsetDelete).
* `group_deleted`: a group tombstone; the next records start a new incarnation. (A
  conversion to the consumer protocol, which tombstones the classic record, is none.)
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pipelines.spark import local_frame

from . import pin, transactions
from .model import GoldInputs, converted, ms

COLUMNS = ["cluster", "group_id", "topic", "partition", "kind", "from_ts", "to_ts", "log_from", "log_to", "detail"]


def missing_offsets(inputs: GoldInputs) -> DataFrame | None:
    """Missing log offsets per coordinator partition: (cluster, coordinator_partition,
    hole_from, hole_to exclusive); None without bronze positions. Episodes and coverage gaps
    both read it: `build_all` computes it once.

    One ordered pass over the positions finds every run of missing offsets and pins them
    (few rows; the result is a projection of that pin, or pinned itself); only the
    partitions read live with runs of two or more are read again, to tell runs of
    transaction markers from compaction (`transactions.without_marker_runs`).
    A lake read from segment files pays for one sort of its positions, not one per use."""
    if inputs.bronze_positions is None:
        return None
    b = inputs.bronze_positions
    w = Window.partitionBy("cluster", "partition").orderBy("offset")
    # Read live (read_committed), a single missing offset can be a transaction marker the
    # consumer never sees: not a hole. Segment files hold the markers too, so there any
    # missing offset is one (compaction often removes a single record: an old
    # GroupMetadata between two kept ones, whose generation would otherwise read as a
    # rebalance that never completed).
    live = F.coalesce((F.col("source") == "kafka") | F.lag(F.col("source") == "kafka").over(w), F.lit(True)) \
        if "source" in b.columns else F.lit(True)
    gaps = b.select("cluster", "partition", "offset", F.lag("offset").over(w).alias("_prev"), live.alias("_live")) \
        .where(F.coalesce(F.col("offset") - F.col("_prev"), F.col("offset") + 1) > 1)
    gaps = pin(gaps.select("cluster", "partition", F.coalesce(F.col("_prev") + 1, F.lit(0).cast("long")).alias("hole_from"),
                           F.col("offset").alias("hole_to"), F.col("_prev").isNull().alias("_first"), "_live"))
    cols = ["cluster", "partition", "hole_from", "hole_to"]
    mid = gaps.where(~F.col("_first") & (F.col("hole_to") - F.col("hole_from") >= F.when(F.col("_live"), 2).otherwise(1)))
    # Before a partition's first record: a hole whatever the source.
    holes = gaps.where(F.col("_first")).select(*cols).unionByName(mid.where(~F.col("_live")).select(*cols))
    live_holes = mid.where(F.col("_live")).select(*cols)
    # Live, several markers can stand side by side (transactions.py): judged on the
    # positions of the partitions that have such runs (a few, known once the gaps are).
    parts = [(r["cluster"], r["partition"]) for r in live_holes.select("cluster", "partition").distinct().collect()]
    if parts:
        keys = local_frame(b.sparkSession, parts, "cluster string, partition int")
        p = b.join(F.broadcast(keys), ["cluster", "partition"], "left_semi") \
            .withColumn("_prev", F.lag("offset").over(w))
        # Pinned too: the marker test's plan re-reads those partitions' positions.
        holes = pin(holes.unionByName(transactions.without_marker_runs(p, live_holes)))
    return holes.select("cluster", F.col("partition").alias("coordinator_partition"), "hole_from", "hole_to")


def build_coverage_gaps(inputs: GoldInputs, holes: DataFrame | None) -> DataFrame:
    """`holes`: `missing_offsets` of the same inputs."""
    parts = []
    pos = inputs.offset_commits.select("cluster", "group_id", "coordinator_partition", "log_offset", "record_ts") \
        .unionByName(inputs.group_generations.select("cluster", "group_id", "coordinator_partition", "log_offset", "record_ts"))
    if holes is not None:
        groups = pos.select("cluster", "group_id", "coordinator_partition").distinct()
        # Timestamps of the holes' edges come from the nearest records we do have.
        edge = pos.groupBy("cluster", "coordinator_partition", "log_offset").agg(F.max(ms("record_ts")).alias("t"))
        h = holes.join(groups, ["cluster", "coordinator_partition"])
        before = h.join(edge, ["cluster", "coordinator_partition"]).where(F.col("log_offset") < F.col("hole_from")) \
            .groupBy("cluster", "coordinator_partition", "group_id", "hole_from", "hole_to").agg(F.max_by("t", "log_offset").alias("t0"))
        after = h.join(edge, ["cluster", "coordinator_partition"]).where(F.col("log_offset") >= F.col("hole_to")) \
            .groupBy("cluster", "coordinator_partition", "group_id", "hole_from", "hole_to").agg(F.min_by("t", "log_offset").alias("t1"))
        hh = h.join(before, ["cluster", "coordinator_partition", "group_id", "hole_from", "hole_to"], "left") \
            .join(after, ["cluster", "coordinator_partition", "group_id", "hole_from", "hole_to"], "left")
        parts.append(hh.select("cluster", "group_id", F.lit(None).cast("string").alias("topic"), F.lit(None).cast("int").alias("partition"),
                               F.lit("compacted_range").alias("kind"), F.col("t0").alias("from_ms"), F.col("t1").alias("to_ms"),
                               F.col("hole_from").alias("log_from"), F.col("hole_to").alias("log_to"),
                               F.concat(F.lit("__consumer_offsets-"), F.col("coordinator_partition").cast("string"),
                                        F.lit(" offsets missing")).alias("detail")))
        g = inputs.group_generations.where(~F.col("is_deletion"))
        w = Window.partitionBy("cluster", "group_id", "incarnation").orderBy("log_offset")
        first = g.withColumn("_r", F.row_number().over(w)).where((F.col("_r") == 1) & (F.col("generation") > 1))
        late = first.join(holes, ["cluster", "coordinator_partition"]).where(F.col("hole_from") < F.col("log_offset")) \
            .select("cluster", "group_id", "generation", "record_ts", "log_offset").distinct()
        parts.append(late.select("cluster", "group_id", F.lit(None).cast("string").alias("topic"), F.lit(None).cast("int").alias("partition"),
                                 F.lit("generation_history_starts_late").alias("kind"), F.lit(None).cast("long").alias("from_ms"),
                                 ms("record_ts").alias("to_ms"), F.lit(None).cast("long").alias("log_from"), F.col("log_offset").alias("log_to"),
                                 F.concat(F.lit("generations before "), F.col("generation").cast("string"), F.lit(" are not in the input")).alias("detail")))
    tomb = inputs.offset_commits.where(F.col("is_deletion"))
    parts.append(tomb.select("cluster", "group_id", "topic", "partition", F.lit("offsets_deleted").alias("kind"),
                             ms("record_ts").alias("from_ms"), F.lit(None).cast("long").alias("to_ms"), F.col("log_offset").alias("log_from"),
                             F.lit(None).cast("long").alias("log_to"), F.lit("offset tombstone").alias("detail")))
    g = inputs.group_generations
    # A conversion to the consumer protocol tombstones the classic record of a group that lives on.
    gt = g.where(F.col("is_deletion") & ~converted(g))
    parts.append(gt.select("cluster", "group_id", F.lit(None).cast("string").alias("topic"), F.lit(None).cast("int").alias("partition"),
                           F.lit("group_deleted").alias("kind"), ms("record_ts").alias("from_ms"), F.lit(None).cast("long").alias("to_ms"),
                           F.col("log_offset").alias("log_from"), F.lit(None).cast("long").alias("log_to"),
                           F.lit("group tombstone").alias("detail")))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out.select("cluster", "group_id", "topic", "partition", "kind", F.timestamp_millis("from_ms").alias("from_ts"),
                      F.timestamp_millis("to_ms").alias("to_ts"), "log_from", "log_to", "detail")
