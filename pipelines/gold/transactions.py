"""Transactional commits read live, told by where their markers were.

An app that commits its offsets through its producer (`sendOffsetsToTransaction`, the
consume-transform-produce loop of exactly-once processing) writes them in a transactional
batch of `__consumer_offsets`, and the transaction's COMMIT marker follows as soon as the
app commits it. Segment files hold the batch's flag and the marker (silver reads both).
A live reader gets neither: librdkafka hands over records without their batch's flags and
never delivers a control record, so the commits read like a plain consumer's, and gold
would open duplicate windows that cannot happen (what such an app re-processes was in an
aborted or fenced transaction, and never took effect).

The marker still takes an offset, which the live reader skips: a transactional group's
commit batch is followed by exactly one missing offset (its marker), then the next record;
a plain group's by the next record. So a group whose live-read commit batches are, at least
`MIN_SHARE` of them (over `MIN_BATCHES` or more whose next offsets were read), followed by
exactly one missing offset is taken as committing transactionally, and its live commits get
`transactional` true in `commit_attribution`. A record of another group written between a
batch and its marker (a busy coordinator partition) hides that marker; a marker of another
group's transaction right after a plain batch shows one, and compaction leaves holes of any
size (history read live from the start of a compacted log): hence a share, not every batch.

A group with a record of an aborted transaction read live (live ingestion reads those back,
bronze `aborted`) commits through a producer for certain: it is taken as transactional
whatever the share, which tells the app apart on a busy coordinator partition too.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .model import GoldInputs

LIVE_SOURCE = "kafka"  # bronze `source` of live ingestion (pipelines/ingest/kafka.py)
MIN_BATCHES = 3
MIN_SHARE = 0.5
_GROUP = ["cluster", "group_id"]


def key_group(bronze: DataFrame) -> Column:
    """The group a bronze record's key names, for offset commits and group metadata (types
    0-2: int16 type, then the group as an int16 length and its UTF-8 bytes); null on other
    records."""
    length = F.conv(F.hex(F.substring("key", 3, 2)), 16, 10).cast("int")
    group = F.decode(F.substring(F.col("key"), F.lit(5), length), "UTF-8")
    rtype = F.conv(F.hex(F.substring("key", 1, 2)), 16, 10).cast("int")
    return F.when((F.length("key") >= 4) & rtype.between(0, 2), group)


def aborted(bronze: DataFrame) -> Column:
    """Whether a bronze record belongs to an aborted transaction read live (false for bronze
    older than the column: nothing was read back then)."""
    return F.coalesce(F.col("aborted"), F.lit(False)) if "aborted" in bronze.columns else F.lit(False)


def _live_plain_commits(inputs: GoldInputs) -> DataFrame:
    """The commits read live, which carry no transactional flag."""
    return inputs.offset_commits.where(~F.col("is_deletion") & (F.col("source") == LIVE_SOURCE)
                                       & ~F.coalesce("transactional", F.lit(False)))


def inferred_groups(inputs: GoldInputs) -> DataFrame | None:
    """(cluster, group_id) of the groups whose live-read commits are transactional by the
    rules above; None without bronze positions."""
    if inputs.bronze_positions is None:
        return None
    live = _live_plain_commits(inputs)
    # One commit request is one batch: its records share the partition and the append time.
    batches = live.groupBy(*_GROUP, "coordinator_partition", "record_ts").agg(F.max("log_offset").alias("_end"))
    nexts = batches.withColumn("offset", F.explode(F.array(F.col("_end") + 1, F.col("_end") + 2)))
    pos = inputs.bronze_positions
    if "source" in pos.columns:
        pos = pos.where(F.col("source") == LIVE_SOURCE)
    pos = pos.select("cluster", F.col("partition").alias("coordinator_partition"), "offset")
    # The batches whose next two offsets were read in part (the last batch read of a
    # partition says nothing), with which of them were.
    known = nexts.join(pos, ["cluster", "coordinator_partition", "offset"]).groupBy(
        *_GROUP, "coordinator_partition", "record_ts", "_end").agg(
        F.max((F.col("offset") == F.col("_end") + 1).cast("int")).alias("_next"),
        F.max((F.col("offset") == F.col("_end") + 2).cast("int")).alias("_after"))
    marked = F.sum(F.when((F.col("_next") == 0) & (F.col("_after") == 1), 1).otherwise(0))
    share = known.groupBy(*_GROUP).agg(F.count("*").alias("_batches"), marked.alias("_marked"))
    by_markers = share.where((F.col("_batches") >= MIN_BATCHES) & (F.col("_marked") >= MIN_SHARE * F.col("_batches"))) \
        .select(*_GROUP)
    return by_markers.unionByName(aborted_groups(inputs.bronze_positions)).distinct()


def aborted_groups(positions: DataFrame) -> DataFrame:
    """(cluster, group_id) of the groups with a record of an aborted transaction read live."""
    return positions.where(F.col("aborted") & F.col("key_group").isNotNull()) \
        .select("cluster", F.col("key_group").alias("group_id")).distinct()


def with_inferred(inputs: GoldInputs, attributed: DataFrame) -> DataFrame:
    """`attributed` (commit_attribution) with the live commits of inferred groups flagged
    transactional."""
    groups = inferred_groups(inputs)
    if groups is None:
        return attributed
    flagged = attributed.join(groups.withColumn("_txn", F.lit(True)), _GROUP, "left")
    txn = F.coalesce("transactional", F.lit(False)) | (F.coalesce("_txn", F.lit(False)) & (F.col("source") == LIVE_SOURCE))
    return flagged.withColumn("transactional", txn).select(*attributed.columns)


def without_marker_runs(positions: DataFrame, holes: DataFrame) -> DataFrame:
    """`holes` (cluster, partition, hole_from, hole_to) of live-read partitions, less the
    runs of transaction markers among them.

    Live ingestion reads back what read_committed skips (aborted records, bronze
    `aborted`), so what is still missing is markers or compaction. Transactions of several
    producers that end together leave their markers side by side: an app of two instances
    committing at the same moment writes two records, then two markers. Each marker ends a
    transaction that wrote at least one record since the partition's previous missing
    offset; so a run of k missing offsets preceded, since the previous missing offset, by k
    or more records of transactional groups is taken as markers. Transactional here means
    a group with an aborted transaction in the partition's bronze (the evidence is in the
    partition itself, so an incremental run that rereads the partition judges as a full
    one; `incremental._hole_groups`). A transactional app that never aborted, whose
    instances commit at the same moment, still leaves runs read as compaction; compaction
    of an aborting app's commits right after them reads as markers.
    `positions`: bronze positions with `_prev`, the previous offset present."""
    parts = holes.select("cluster", "partition").distinct()
    p = positions.join(parts, ["cluster", "partition"], "left_semi")
    txn_groups = aborted_groups(p).withColumnRenamed("group_id", "key_group").withColumn("_txn_group", F.lit(1))
    p = p.join(txn_groups, ["cluster", "key_group"], "left")
    p = p.withColumn("_t", F.when(F.col("_txn_group").isNotNull(), 1).otherwise(0))
    w = Window.partitionBy("cluster", "partition").orderBy("offset")
    # Records of transactional groups before each row (the row excluded), counted from the
    # partition's start; at each missing run, less the count at the previous one.
    p = p.withColumn("_before", F.sum("_t").over(w) - F.col("_t"))
    gaps = p.where(F.col("offset") - F.col("_prev") > 1)
    gaps = gaps.withColumn("_since", F.col("_before") - F.coalesce(F.lag("_before").over(w), F.lit(0)))
    markers = gaps.where(F.col("_since") >= F.col("offset") - F.col("_prev") - 1).select(
        "cluster", "partition", (F.col("_prev") + 1).alias("hole_from"), F.col("offset").alias("hole_to"))
    return holes.join(markers, ["cluster", "partition", "hole_from", "hole_to"], "left_anti")
