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

Two clocks meet here: a sample's time is the ingesting host's, a commit's is the record
time its coordinator wrote, and after a coordinator move another broker's. A commit is
placed in time no earlier than any commit of its group before it in the log (the running
maximum of their record times in log order): a later commit was written later, so when the
new coordinator's clock is behind the old one's, its commits still count after the old
term's instead of before them (the committed offset at a sample is the last one in log
order, as Kafka's). On one clock this changes nothing. A new coordinator whose clock is
ahead of the sampling host's can still place a commit after a sample it preceded: no
record says where the log stood when the sample was taken.

Cost: one row per (group, partition it committed on, sample of that partition), the
table's own size; commits and samples meet in one sort per (group, partition), never in a
join of every commit with every sample (plus one sort of each group's commits in log order).
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pipelines.spark import local_frame

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
        return local_frame(commits.sparkSession, [], _SCHEMA)
    c = commits.select(*KEY, "offset", "is_deletion", "record_ts", "effective_log_offset")
    # Its place in time: never before a commit of its group written earlier in the log.
    in_log_order = Window.partitionBy("cluster", "group_id").orderBy("effective_log_offset") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    c = c.withColumn("_placed", F.max("record_ts").over(in_log_order))
    # Every partition a group committed on, at every sample of that partition.
    at_samples = c.select(*KEY).distinct().join(
        samples.select("cluster", "topic", "partition", "sampled_at", "start_offset", "end_offset"),
        ["cluster", "topic", "partition"])
    events = c.select(
        *KEY, F.col("_placed").alias("_t"), F.lit(0).alias("_kind"), "effective_log_offset",
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


def with_lag_at_start(eps: DataFrame, lag: DataFrame) -> DataFrame:
    """`eps` (rebalance_episodes) with the group's lag when each rebalance started.

    `lag_at_start`: the sum over the group's partitions of each one's latest `consumer_lag`
    row sampled at or before `started_at` (a partition whose commit was deleted counts 0);
    `lag_sampled_at`: the latest of those samples, so a reader sees how old the figure is
    (samples come from live ingestions, one per run: every 15 minutes on the default
    schedule). Null when no sample precedes the start, or the start is unknown.

    One sort per group, not a join of episodes with samples: each sample row carries the
    change of its partition's lag since that partition's previous sample, so the running
    sum of the changes in time order is the group's lag after every sample, and an
    episode placed in that order reads it.
    """
    eps = eps.drop("lag_at_start", "lag_sampled_at")  # recomputed if present
    group = ["cluster", "group_id"]
    by_partition = Window.partitionBy(*KEY).orderBy("sampled_at")
    changes = lag.select(
        *group, F.col("sampled_at").alias("_t"), F.lit(0).alias("_kind"),
        (F.coalesce(F.col("lag"), F.lit(0)) - F.coalesce(F.lag("lag").over(by_partition), F.lit(0))).alias("_change"),
    )
    starts = eps.select("*", F.col("started_at").alias("_t"), F.lit(1).alias("_kind"),
                        F.lit(None).cast("long").alias("_change"))
    # A sample taken in the same microsecond as the start counts (at or before).
    so_far = Window.partitionBy(*group).orderBy(F.col("_t").asc_nulls_first(), "_kind") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    last_sample = F.max(F.when(F.col("_kind") == 0, F.col("_t"))).over(so_far)
    known = F.col("started_at").isNotNull() & last_sample.isNotNull()
    placed = starts.unionByName(changes, allowMissingColumns=True).select(
        "*", F.when(known, F.sum("_change").over(so_far)).alias("lag_at_start"),
        F.when(known, last_sample).alias("lag_sampled_at"))
    return placed.where(F.col("_kind") == 1).select(*eps.columns, "lag_at_start", "lag_sampled_at")
