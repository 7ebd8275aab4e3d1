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
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .model import GoldInputs

LIVE_SOURCE = "kafka"  # bronze `source` of live ingestion (pipelines/ingest/kafka.py)
MIN_BATCHES = 3
MIN_SHARE = 0.5
_GROUP = ["cluster", "group_id"]


def inferred_groups(inputs: GoldInputs, attributed: DataFrame) -> DataFrame | None:
    """(cluster, group_id) of the groups whose live-read commits are transactional by the
    rule above; None without bronze positions."""
    if inputs.bronze_positions is None:
        return None
    live = attributed.where((F.col("source") == LIVE_SOURCE) & ~F.coalesce("transactional", F.lit(False)))
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
    return share.where((F.col("_batches") >= MIN_BATCHES) & (F.col("_marked") >= MIN_SHARE * F.col("_batches"))) \
        .select(*_GROUP)


def with_inferred(inputs: GoldInputs, attributed: DataFrame) -> DataFrame:
    """`attributed` (commit_attribution) with the live commits of inferred groups flagged
    transactional."""
    groups = inferred_groups(inputs, attributed)
    if groups is None:
        return attributed
    flagged = attributed.join(groups.withColumn("_txn", F.lit(True)), _GROUP, "left")
    txn = F.coalesce("transactional", F.lit(False)) | (F.coalesce("_txn", F.lit(False)) & (F.col("source") == LIVE_SOURCE))
    return flagged.withColumn("transactional", txn).select(*attributed.columns)
