"""idle_consumers: a member idle (no partitions) through one generation, and why.

Classic: a member of a consumer group (protocol type `consumer`; Connect workers and other
classic-protocol groups assign no partitions) with an empty assignment in a persisted
generation, until the group's next record. KIP-848: a member whose reconciled assignment (type 8) holds nothing, until
its next record; `generation` is then its member epoch. Causes: more members than
partitions; a subscription whose topics have no partitions; a cooperative handover in
progress (partitions still being revoked elsewhere: transient); a KIP-848 member waiting
for partitions others have yet to release, or for the target assignment Kafka 4.x computes
a moment after bumping the group epoch (transient); otherwise the assignor's imbalance.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .model import GoldInputs, ms
from .ownership import GROUP_KEYS, member_records

COLUMNS = ["cluster", "group_id", "incarnation", "member_id", "group_instance_id", "client_id", "generation",
           "from_ts", "to_ts", "duration_ms", "cause", "transient"]


def _classic(inputs: GoldInputs, snaps: DataFrame) -> DataFrame:
    w = Window.partitionBy(*GROUP_KEYS).orderBy("snap_pos")
    s = snaps.withColumn("next_ts", F.lead("snap_ts").over(w))
    ma = inputs.member_assignments
    owned = ma.where(F.col("topic").isNotNull())
    # Partitions the group has ever been assigned, per topic: the partition count as the records know it.
    topic_parts = owned.groupBy(*GROUP_KEYS, "topic").agg(F.countDistinct("partition").alias("n"))
    per_snap = owned.groupBy(*GROUP_KEYS, "log_offset").agg(F.count("*").alias("n_owned"))
    idle = ma.where(F.col("topic").isNull() & F.col("decode_error").isNull())
    subs = idle.select(*GROUP_KEYS, "log_offset", "member_id", F.explode_outer("subscribed_topics").alias("topic")) \
        .join(topic_parts, GROUP_KEYS + ["topic"], "left").groupBy(*GROUP_KEYS, "log_offset", "member_id") \
        .agg(F.sum(F.coalesce("n", F.lit(0))).alias("sub_parts"))
    total = topic_parts.groupBy(*GROUP_KEYS).agg(F.sum("n").alias("group_parts"))
    x = idle.join(subs, GROUP_KEYS + ["log_offset", "member_id"], "left") \
        .join(per_snap, GROUP_KEYS + ["log_offset"], "left").join(total, GROUP_KEYS, "left") \
        .join(s.select(*GROUP_KEYS, F.col("snap_pos").alias("log_offset"), "snap_ts", "next_ts", "member_count",
                       "protocol_type"), GROUP_KEYS + ["log_offset"])
    # Only consumers own partitions. Connect workers (protocol type "connect") and other
    # users of the classic protocol hand out connectors, tasks or nothing at all: a member
    # without partitions there is not idle.
    x = x.where(F.col("protocol_type") == "consumer")
    coop = F.coalesce(F.col("protocol"), F.lit("")).contains("cooperative")
    cause = (F.when(F.coalesce("sub_parts", F.lit(0)) == 0, "subscription_without_partitions")
             .when(coop & (F.coalesce("n_owned", F.lit(0)) < F.col("group_parts")), "cooperative_handover_in_progress")
             .when(F.col("member_count") > F.col("group_parts"), "more_members_than_partitions")
             .otherwise("assignor_imbalance"))
    return x.select(
        *GROUP_KEYS, "member_id", "group_instance_id", "client_id", "generation",
        F.col("snap_ts").alias("from_ms"), F.col("next_ts").alias("to_ms"), cause.alias("cause"),
    )


def _consumer(inputs: GoldInputs) -> DataFrame | None:
    if inputs.current_assignments is None or inputs.consumer_group_members is None:
        return None  # no KIP-848 group in the lake (silver writes both tables together)
    r = member_records(inputs).where(~F.col("is_deletion") & (F.col("n_assigned") == 0))
    parts = inputs.current_assignments.where(F.col("partition").isNotNull()).select("cluster", "group_id", "topic_id", "partition") \
        .distinct().groupBy("cluster", "group_id").agg(F.count("*").alias("group_parts"))
    members = inputs.current_assignments.where(~F.col("is_deletion")).groupBy("cluster", "group_id").agg(
        F.countDistinct("member_id").alias("n_members"))
    # A member's last record is its tombstone (no client id) once it left: the values are
    # those of its last live record.
    meta = inputs.consumer_group_members.where(~F.col("is_deletion")).groupBy("cluster", "group_id", "member_id").agg(
        F.max_by("instance_id", "log_offset").alias("group_instance_id"), F.max_by("client_id", "log_offset").alias("client_id"))
    x = r.join(parts, ["cluster", "group_id"], "left").join(members, ["cluster", "group_id"], "left") \
        .join(meta, ["cluster", "group_id", "member_id"], "left")
    x = _with_target_pending(inputs, x)
    cause = (F.when(F.col("state") == 2, "kip848_pending_revocation")
             .when(F.col("state") == 1, "kip848_pending_revocation")
             .when(F.col("_target_pending"), "kip848_target_assignment_pending")
             .when(F.coalesce("group_parts", F.lit(0)) == 0, "subscription_without_partitions")
             .when(F.col("n_members") > F.col("group_parts"), "more_members_than_partitions")
             .otherwise("assignor_imbalance"))
    return x.select("cluster", "group_id", F.lit(0).alias("incarnation"), "member_id", "group_instance_id", "client_id",
                    F.col("member_epoch").alias("generation"), ms("record_ts").alias("from_ms"),
                    F.col("next_ts").alias("to_ms"), cause.alias("cause"))


# Causes that end on their own once the rebalance under way completes.
TRANSIENT_CAUSES = ("cooperative_handover_in_progress", "kip848_pending_revocation", "kip848_target_assignment_pending")


def _with_target_pending(inputs: GoldInputs, x: DataFrame) -> DataFrame:
    """`_target_pending`: at the member's record, the group epoch was ahead of the newest
    target assignment. Kafka 4.x computes a group's new target a moment after bumping its
    epoch (off the request path); a member that joins in between is STABLE at the old
    target's epoch with nothing assigned until the new target arrives."""
    keys = ["cluster", "group_id", "coordinator_partition", "log_offset"]
    rows = x.select(*keys).distinct()
    out = rows
    if inputs.consumer_group_epochs is not None:
        e = inputs.consumer_group_epochs.where(~F.col("is_deletion")).select(
            "cluster", "group_id", F.col("log_offset").alias("_at"), "epoch")
        out = out.join(rows.join(e, ["cluster", "group_id"]).where(F.col("_at") <= F.col("log_offset"))
                       .groupBy(*keys).agg(F.max_by("epoch", "_at").alias("_group_epoch")), keys, "left")
    else:
        out = out.withColumn("_group_epoch", F.lit(None).cast("int"))
    if inputs.target_assignments is not None:
        t = inputs.target_assignments.select("cluster", "group_id", F.col("epoch_offset").alias("_at"),
                                             "assignment_epoch").distinct()
        out = out.join(rows.join(t, ["cluster", "group_id"]).where(F.col("_at") <= F.col("log_offset"))
                       .groupBy(*keys).agg(F.max_by("assignment_epoch", "_at").alias("_target_epoch")), keys, "left")
    else:
        out = out.withColumn("_target_epoch", F.lit(None).cast("int"))
    pending = F.coalesce(F.col("_group_epoch") > F.coalesce(F.col("_target_epoch"), F.lit(0)), F.lit(False))
    return x.join(out.select(*keys, pending.alias("_target_pending")), keys, "left")


def build_idle_consumers(inputs: GoldInputs, snaps: DataFrame) -> DataFrame:
    out = _classic(inputs, snaps)
    cons = _consumer(inputs)
    if cons is not None:
        out = out.unionByName(cons)
    # A member idle across several records of one generation (a re-written generation,
    # repeated KIP-848 records) is one row.
    out = out.groupBy(*GROUP_KEYS, "member_id", "generation").agg(
        F.first("group_instance_id", ignorenulls=True).alias("group_instance_id"),
        F.first("client_id", ignorenulls=True).alias("client_id"),
        F.min("from_ms").alias("from_ms"),
        F.when(F.count("to_ms") == F.count("*"), F.max("to_ms")).alias("to_ms"),
        F.min_by("cause", "from_ms").alias("cause"),
    )
    return out.select(
        *GROUP_KEYS, "member_id", "group_instance_id", "client_id", "generation",
        F.timestamp_millis("from_ms").alias("from_ts"), F.timestamp_millis("to_ms").alias("to_ts"),
        (F.col("to_ms") - F.col("from_ms")).alias("duration_ms"), "cause",
        F.col("cause").isin(*TRANSIENT_CAUSES).alias("transient"),
    )
