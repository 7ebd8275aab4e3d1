"""Who owned each partition when: assignment snapshots, ownership intervals, commit attribution.

Positions are log offsets in the group's `__consumer_offsets` partition: a group's
metadata, member assignments and offset commits all live in that one partition, so the
log order is the coordinator's own order of events (timestamps are only as good as the
broker clock; positions are exact).

Classic groups: every persisted GroupMetadata record is a snapshot of the whole
assignment; a partition's owner changes only at such a record. KIP-848 groups: each
member's CurrentMemberAssignment record (type 8) is that member's reconciled assignment;
a partition stays owned while it is assigned *or pending revocation* (the member still
consumes it until it acknowledges the revocation, kafka-internals §5.6).
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from . import settings
from .model import GoldInputs, GoldParams, converted, ms

GROUP_KEYS = ["cluster", "group_id", "incarnation"]
TP_KEYS = GROUP_KEYS + ["topic", "partition"]

INTERVAL_COLUMNS = [
    "cluster", "group_id", "incarnation", "protocol_kind", "protocol", "topic", "partition",
    "member_id", "group_instance_id", "client_id", "client_host", "session_timeout_ms", "rebalance_timeout_ms",
    "owner_kind", "coordinator_partition", "start_pos", "end_pos", "from_ts", "to_ts",
    "start_generation", "end_generation", "end_join_ts", "owner_left",
]


def assignment_snapshots(inputs: GoldInputs) -> DataFrame:
    """One row per persisted classic GroupMetadata record (tombstones excluded)."""
    g = inputs.group_generations.where(~F.col("is_deletion"))
    return g.select(
        "cluster", "group_id", "incarnation", "coordinator_partition",
        F.col("log_offset").alias("snap_pos"),
        ms("record_ts").alias("snap_ts"),
        # currentStateTimestamp: when the join phase completed (the new generation began).
        ms(F.coalesce("current_state_ts", "record_ts")).alias("join_ts"),
        "generation", "protocol", "protocol_type", "member_count",
    )


def _classic_intervals(inputs: GoldInputs, snaps: DataFrame) -> DataFrame:
    owned = inputs.member_assignments.where(F.col("topic").isNotNull())
    parts = owned.select(*TP_KEYS).distinct()
    grid = snaps.join(parts, GROUP_KEYS)
    owners = owned.select(
        *TP_KEYS, F.col("log_offset").alias("snap_pos"), "member_id", "group_instance_id", "client_id",
        "client_host", "session_timeout_ms", "rebalance_timeout_ms",
    )
    g = grid.join(owners, TP_KEYS + ["snap_pos"], "left")
    w = Window.partitionBy(*TP_KEYS).orderBy("snap_pos")
    g = g.withColumn(
        "_new", (F.coalesce(F.lag("member_id").over(w), F.lit("\u0000start")) != F.coalesce("member_id", F.lit(""))).cast("int")
    ).withColumn("_run", F.sum("_new").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    runs = g.groupBy(*TP_KEYS, "_run").agg(
        F.first("member_id", ignorenulls=True).alias("member_id"),
        F.first("group_instance_id", ignorenulls=True).alias("group_instance_id"),
        F.first("client_id", ignorenulls=True).alias("client_id"),
        F.first("client_host", ignorenulls=True).alias("client_host"),
        F.max("session_timeout_ms").alias("session_timeout_ms"),
        F.max("rebalance_timeout_ms").alias("rebalance_timeout_ms"),
        F.first("coordinator_partition").alias("coordinator_partition"),
        F.min_by("protocol", "snap_pos").alias("protocol"),
        F.min("snap_pos").alias("start_pos"),
        F.min("snap_ts").alias("from_ms"),
        F.min_by("generation", "snap_pos").alias("start_generation"),
    )
    # The run ends at the next run's first snapshot (another owner, or nobody).
    snap_info = snaps.select(*GROUP_KEYS, F.col("snap_pos").alias("end_pos"), F.col("snap_ts").alias("to_ms"),
                             F.col("join_ts").alias("end_join_ts"), F.col("generation").alias("end_generation"))
    wr = Window.partitionBy(*TP_KEYS).orderBy("start_pos")
    runs = runs.withColumn("end_pos", F.lead("start_pos").over(wr)).join(snap_info, GROUP_KEYS + ["end_pos"], "left")
    present = inputs.member_assignments.select(*GROUP_KEYS, F.col("log_offset").alias("end_pos"), "member_id").distinct() \
        .withColumn("_present", F.lit(True))
    runs = runs.join(present, GROUP_KEYS + ["end_pos", "member_id"], "left")
    runs = _ended_by_tombstones(inputs, runs)
    return runs.where(F.col("member_id").isNotNull()).select(
        *GROUP_KEYS, F.lit("classic").alias("protocol_kind"), "protocol", "topic", "partition",
        "member_id", "group_instance_id", "client_id", "client_host", "session_timeout_ms", "rebalance_timeout_ms",
        F.lit("member").alias("owner_kind"), "coordinator_partition", "start_pos", "end_pos",
        "from_ms", "to_ms", "start_generation", "end_generation", "end_join_ts",
        F.when(F.col("end_pos").isNull(), F.lit(None).cast("boolean")).otherwise(F.col("_present").isNull()).alias("owner_left"),
    )


def _ended_by_tombstones(inputs: GoldInputs, runs: DataFrame) -> DataFrame:
    """A classic owner ends at the first GroupMetadata tombstone after its start when that
    comes before its next snapshot (or it has none). A deletion ends the group, and its
    owner with it; a conversion to the consumer protocol (silver's `converted`) ends the
    classic records only: the member goes on in the consumer group's records, so it did not
    leave, and the group's next classic snapshot (after a conversion back) starts afresh."""
    g = inputs.group_generations
    tombs = g.where(F.col("is_deletion")).select(
        *GROUP_KEYS, F.col("log_offset").alias("_tomb_pos"), ms("record_ts").alias("_tomb_ms"),
        converted(g).alias("_converted"))
    first_after = runs.select(*TP_KEYS, "start_pos").join(tombs, GROUP_KEYS) \
        .where(F.col("_tomb_pos") > F.col("start_pos")) \
        .groupBy(*TP_KEYS, "start_pos").agg(F.min_by(F.struct("_tomb_pos", "_tomb_ms", "_converted"), "_tomb_pos").alias("_t"))
    runs = runs.join(first_after, TP_KEYS + ["start_pos"], "left")
    ended = F.col("_t").isNotNull() & (F.col("end_pos").isNull() | (F.col("_t._tomb_pos") < F.col("end_pos")))
    return runs.withColumn("end_pos", F.when(ended, F.col("_t._tomb_pos")).otherwise(F.col("end_pos"))) \
        .withColumn("to_ms", F.when(ended, F.col("_t._tomb_ms")).otherwise(F.col("to_ms"))) \
        .withColumn("end_join_ts", F.when(ended, F.lit(None)).otherwise(F.col("end_join_ts"))) \
        .withColumn("end_generation", F.when(ended, F.lit(None)).otherwise(F.col("end_generation"))) \
        .withColumn("_present", F.when(ended, F.when(F.col("_t._converted"), F.lit(True))).otherwise(F.col("_present"))) \
        .drop("_t")


def topic_names(inputs: GoldInputs) -> DataFrame | None:
    if inputs.topic_ids is None:
        return None
    return inputs.topic_ids.select("cluster", "topic_id", "topic").dropDuplicates(["cluster", "topic_id"])


def member_records(inputs: GoldInputs) -> DataFrame:
    """KIP-848: one row per CurrentMemberAssignment record (type 8), with the member's next record."""
    ca = inputs.current_assignments
    assert ca is not None  # callers ask only when the lake holds KIP-848 groups
    recs = ca.groupBy("cluster", "group_id", "member_id", "coordinator_partition", "log_offset").agg(
        F.first("record_ts").alias("record_ts"), F.first("is_deletion").alias("is_deletion"),
        F.first("member_epoch").alias("member_epoch"), F.first("state").alias("state"),
        F.first("state_name").alias("state_name"),
        F.sum(F.when(F.col("partition").isNotNull() & ~F.coalesce("pending_revocation", F.lit(False)), 1).otherwise(0)).alias("n_assigned"),
        F.sum(F.when(F.coalesce("pending_revocation", F.lit(False)), 1).otherwise(0)).alias("n_pending"),
    )
    w = Window.partitionBy("cluster", "group_id", "member_id").orderBy("log_offset")
    return recs.withColumn("next_pos", F.lead("log_offset").over(w)).withColumn(
        "next_ts", F.lead(ms("record_ts")).over(w)
    ).withColumn("next_is_deletion", F.lead("is_deletion").over(w))


def _member_metadata(inputs: GoldInputs) -> DataFrame:
    assert inputs.consumer_group_members is not None  # written with current_assignments
    m = inputs.consumer_group_members.where(~F.col("is_deletion"))
    return m.groupBy("cluster", "group_id", "member_id").agg(
        F.max_by("instance_id", "log_offset").alias("group_instance_id"),
        F.max_by("client_id", "log_offset").alias("client_id"),
        F.max_by("client_host", "log_offset").alias("client_host"),
        F.max_by("rebalance_timeout_ms", "log_offset").alias("rebalance_timeout_ms"),
    )


def _consumer_intervals(inputs: GoldInputs, params: GoldParams) -> DataFrame | None:
    if inputs.current_assignments is None:
        return None
    recs = member_records(inputs)
    ca = inputs.current_assignments.where(F.col("partition").isNotNull() & ~F.col("is_deletion"))
    names = topic_names(inputs)
    if names is not None:
        ca = ca.join(names, ["cluster", "topic_id"], "left")
    else:
        ca = ca.withColumn("topic", F.lit(None).cast("string"))
    ca = ca.withColumn("topic", F.coalesce("topic", "topic_id"))
    h = ca.select("cluster", "group_id", "member_id", "topic", "partition", "log_offset", "coordinator_partition", "member_epoch") \
        .join(recs.select("cluster", "group_id", "member_id", "log_offset", "next_pos", "next_ts", "next_is_deletion", "record_ts"),
              ["cluster", "group_id", "member_id", "log_offset"])
    k = ["cluster", "group_id", "member_id", "topic", "partition"]
    w = Window.partitionBy(*k).orderBy("log_offset")
    h = h.withColumn("_new", F.when(F.lag("next_pos").over(w) == F.col("log_offset"), 0).otherwise(1)) \
        .withColumn("_run", F.sum("_new").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    runs = h.groupBy(*k, "_run").agg(
        F.first("coordinator_partition").alias("coordinator_partition"),
        F.min("log_offset").alias("start_pos"),
        F.min(ms("record_ts")).alias("from_ms"),
        F.max_by("next_pos", "log_offset").alias("end_pos"),
        F.max_by("next_ts", "log_offset").alias("to_ms"),
        F.max_by("next_is_deletion", "log_offset").alias("end_is_deletion"),
        F.min("member_epoch").alias("start_generation"),
    )
    meta = _member_metadata(inputs)
    epochs_end = inputs.current_assignments.select("cluster", "group_id", "member_id", F.col("log_offset").alias("end_pos"),
                                                  F.col("member_epoch").alias("end_generation")).dropDuplicates(
        ["cluster", "group_id", "member_id", "end_pos"])
    runs = runs.join(meta, ["cluster", "group_id", "member_id"], "left").join(
        epochs_end, ["cluster", "group_id", "member_id", "end_pos"], "left")
    # A consumer-protocol session is the broker's setting, per cluster.
    runs = settings.attach(runs, inputs.cluster_settings, params)
    return runs.select(
        "cluster", "group_id", F.lit(0).alias("incarnation"), F.lit("consumer").alias("protocol_kind"),
        F.lit(None).cast("string").alias("protocol"), "topic", "partition", "member_id", "group_instance_id",
        "client_id", "client_host", F.col("consumer_session_timeout_ms").cast("int").alias("session_timeout_ms"),
        F.col("rebalance_timeout_ms").cast("int"), F.lit("member").alias("owner_kind"), "coordinator_partition",
        "start_pos", "end_pos", "from_ms", "to_ms", "start_generation", "end_generation",
        F.col("to_ms").alias("end_join_ts"),
        F.when(F.col("end_pos").isNull(), F.lit(None).cast("boolean")).otherwise(F.coalesce("end_is_deletion", F.lit(False))).alias("owner_left"),
    )


def _standalone_intervals(inputs: GoldInputs) -> DataFrame:
    """Groups with commits but no membership records: assign-only consumers (no group protocol)."""
    c = inputs.offset_commits.where(~F.col("is_deletion"))
    grouped = inputs.group_generations.select("cluster", "group_id")
    if inputs.consumer_group_epochs is not None:
        grouped = grouped.unionByName(inputs.consumer_group_epochs.select("cluster", "group_id"))
    if inputs.current_assignments is not None:
        grouped = grouped.unionByName(inputs.current_assignments.select("cluster", "group_id"))
    c = c.join(grouped.distinct(), ["cluster", "group_id"], "left_anti")
    return c.groupBy("cluster", "group_id", "topic", "partition").agg(
        F.first("coordinator_partition").alias("coordinator_partition"),
        F.min("effective_log_offset").alias("start_pos"),
        F.min(ms("record_ts")).alias("from_ms"),
        F.max(ms("record_ts")).alias("last_ms"),
    ).select(
        "cluster", "group_id", F.lit(0).alias("incarnation"), F.lit("standalone").alias("protocol_kind"),
        F.lit(None).cast("string").alias("protocol"), "topic", "partition", F.lit(None).cast("string").alias("member_id"),
        *[F.lit(None).cast("string").alias(n) for n in ("group_instance_id", "client_id", "client_host")],
        F.lit(None).cast("int").alias("session_timeout_ms"), F.lit(None).cast("int").alias("rebalance_timeout_ms"),
        F.lit("standalone").alias("owner_kind"), "coordinator_partition", "start_pos",
        F.lit(None).cast("long").alias("end_pos"), "from_ms", F.col("last_ms").alias("to_ms"),
        F.lit(None).cast("int").alias("start_generation"), F.lit(None).cast("int").alias("end_generation"),
        F.lit(None).cast("long").alias("end_join_ts"), F.lit(None).cast("boolean").alias("owner_left"),
    )


def build_ownership_intervals(inputs: GoldInputs, snaps: DataFrame | None = None, params: GoldParams | None = None) -> DataFrame:
    """ownership_intervals: one (group, topic, partition) owned by one member from one time to another.

    `start_pos`/`end_pos` are the log positions of the records that gave and took the
    partition (end null: still owned at the end of the input); `from_ts`/`to_ts` their
    timestamps. `owner_left` says whether the owner had left the group when it lost it.
    """
    snaps = snaps if snaps is not None else assignment_snapshots(inputs)
    parts = [_classic_intervals(inputs, snaps), _standalone_intervals(inputs)]
    cons = _consumer_intervals(inputs, params or GoldParams())
    if cons is not None:
        parts.append(cons)
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out.withColumn("from_ts", F.timestamp_millis("from_ms")).withColumn("to_ts", F.timestamp_millis("to_ms")) \
        .select(*INTERVAL_COLUMNS, "from_ms", "to_ms")


# One partition's commits in the order the coordinator wrote them (an offsets topic partition
# change, coordinator_partition, is a different history and never compared).
COMMIT_PARTITION = ["cluster", "group_id", "topic", "partition", "coordinator_partition"]


def with_neighbours(attributed: DataFrame, previous: dict[str, str], following: dict[str, str] | None = None) -> DataFrame:
    """`attributed` with the previous (`previous`: column → new name) and next (`following`)
    commit's columns of the same partition, in log order."""
    w = Window.partitionBy(*COMMIT_PARTITION).orderBy("effective_log_offset")
    for col, name in previous.items():
        attributed = attributed.withColumn(name, F.lag(col).over(w))
    for col, name in (following or {}).items():
        attributed = attributed.withColumn(name, F.lead(col).over(w))
    return attributed


def rewound(prev_offset: str = "_prev_off", prev_incarnation: str = "_prev_inc") -> Column:
    """The one rewind rule: a commit lower than the partition's previous one in the same
    incarnation of the group (a deleted and re-created group starts again from anywhere)."""
    same_incarnation = F.coalesce("incarnation", F.lit(-1)) == F.coalesce(prev_incarnation, F.lit(-1))
    return (F.col("offset") < F.col(prev_offset)) & same_incarnation


def build_commit_attribution(inputs: GoldInputs, intervals: DataFrame) -> DataFrame:
    """Every effective commit with the member it belongs to.

    A commit belongs to the owner whose interval contains its position; commits written
    after the owner lost the partition and before the next owner got it (eager consumers
    commit as they revoke; cooperative ones after the first of the two generations) still
    belong to that previous owner.
    """
    members = intervals.where(F.col("owner_kind") == "member")
    tp = ["cluster", "group_id", "topic", "partition", "coordinator_partition"]
    w = Window.partitionBy(*tp).orderBy("start_pos")
    spans = members.withColumn("_attr_end", F.lead("start_pos").over(w)).select(
        *tp, "incarnation", "member_id", "group_instance_id", "client_id", "client_host", "protocol_kind",
        "start_pos", "end_pos", "_attr_end",
    )
    c = inputs.offset_commits.where(~F.col("is_deletion")).select(
        *tp, "offset", "leader_epoch", "metadata", "commit_ts", "record_ts", "log_offset", "effective_log_offset",
        "transactional", "source",
    )
    cond = [c[k] == spans[k] for k in tp] + [
        c["effective_log_offset"] >= spans["start_pos"],
        spans["_attr_end"].isNull() | (c["effective_log_offset"] < spans["_attr_end"]),
    ]
    j = c.join(spans, cond, "left").select(
        *[c[k] for k in tp], "offset", "leader_epoch", "metadata", "commit_ts", "record_ts", "log_offset",
        "effective_log_offset", "transactional", "source", "incarnation", "member_id", "group_instance_id",
        "client_id", "client_host", "protocol_kind", spans["end_pos"], spans["start_pos"].alias("interval_start_pos"),
    )
    standalone = intervals.where(F.col("owner_kind") == "standalone").select("cluster", "group_id").distinct() \
        .withColumn("_standalone", F.lit(True))
    j = j.join(standalone, ["cluster", "group_id"], "left")
    return j.withColumn(
        "attribution",
        F.when(F.col("member_id").isNotNull() & (F.col("end_pos").isNull() | (F.col("effective_log_offset") < F.col("end_pos"))), "owner")
        .when(F.col("member_id").isNotNull(), "previous_owner_during_rebalance")
        .when(F.col("_standalone"), "standalone")
        .otherwise("unknown_owner"),
    ).withColumn("commit_ms", ms("record_ts")).drop("_standalone", "end_pos")
