"""consumer_lag: how far each group's committed position trailed the log end, per partition,
at every sample of the log-end offsets.

What `kafka-consumer-groups --describe` prints as LAG, kept as history: each live ingestion
samples every partition the groups commit on (bronze `partition_end_offsets`, with the time
of the sample), and the group's committed offset at that moment is its last commit on the
partition written before the sample. lag = end offset - committed offset, in records.

A commit later deleted (an offset tombstone: `kafka-consumer-groups --delete-offsets`, or
the group deleted) leaves no committed offset: from then on the row says so with a null
committed offset and lag, as Kafka's tool prints "-". A group is in the table from its first
commit on a partition; samples before it are not rows (it had no position there yet).
Offline input (segment files, no live sample) has no log-end offsets, so no rows: the table
exists and is empty.

Cost: one row per (group, partition it committed on, sample of that partition), the
table's own size; commits and samples meet in one sort per (group, partition), never in a
join of every commit with every sample.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .model import GoldInputs

KEY = ["cluster", "group_id", "topic", "partition"]
COLUMNS = ["cluster", "group_id", "topic", "partition", "sampled_at", "log_start_offset", "end_offset",
           "committed_offset", "committed_at", "lag"]
_SCHEMA = ("cluster string, group_id string, topic string, partition int, sampled_at timestamp, log_start_offset long, "
           "end_offset long, committed_offset long, committed_at timestamp, lag long")


def build_consumer_lag(inputs: GoldInputs) -> DataFrame:
    commits = inputs.offset_commits
    samples = inputs.partition_end_offsets
    if samples is None:
        return commits.sparkSession.createDataFrame([], _SCHEMA)
    c = commits.select(*KEY, "offset", "is_deletion", "record_ts", "effective_log_offset")
    # Every partition a group committed on, at every sample of that partition.
    at_samples = c.select(*KEY).distinct().join(
        samples.select("cluster", "topic", "partition", "sampled_at", "start_offset", "end_offset"),
        ["cluster", "topic", "partition"])
    events = c.select(
        *KEY, F.col("record_ts").alias("_t"), F.lit(0).alias("_kind"), "effective_log_offset",
        F.struct(F.when(~F.col("is_deletion"), F.col("offset")).alias("offset"),
                 F.col("record_ts").alias("at")).alias("_commit"),
        F.lit(None).cast("timestamp").alias("sampled_at"), F.lit(None).cast("long").alias("start_offset"),
        F.lit(None).cast("long").alias("end_offset"),
    ).unionByName(at_samples.select(
        *KEY, F.col("sampled_at").alias("_t"), F.lit(1).alias("_kind"),
        F.lit(None).cast("long").alias("effective_log_offset"),
        F.lit(None).cast("struct<offset:bigint,at:timestamp>").alias("_commit"),
        "sampled_at", "start_offset", "end_offset",
    ))
    # In time order, a commit written in the same millisecond as a sample counts before it.
    w = Window.partitionBy(*KEY).orderBy("_t", "_kind", "effective_log_offset") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    last = events.withColumn("_in_force", F.last("_commit", ignorenulls=True).over(w))
    rows = last.where((F.col("_kind") == 1) & F.col("_in_force").isNotNull())
    committed = F.col("_in_force.offset")
    return rows.select(
        *KEY, "sampled_at", F.col("start_offset").alias("log_start_offset"), "end_offset",
        committed.alias("committed_offset"), F.col("_in_force.at").alias("committed_at"),
        (F.col("end_offset") - committed).alias("lag"),
    )
