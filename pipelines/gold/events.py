"""Coordinator events (silver `coordinator_events`) as the gold jobs need them."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .model import GoldInputs


def events(inputs: GoldInputs) -> DataFrame | None:
    ev = inputs.coordinator_events
    if ev is None:
        return None
    if "cluster" not in ev.columns:
        ev = ev.withColumn("cluster", F.lit("default"))
    return ev.where(F.col("group_id").isNotNull() & F.col("ts").isNotNull())


def member_exits(inputs: GoldInputs) -> DataFrame | None:
    """Per (group, member): when and how the coordinator removed it (first such line)."""
    ev = events(inputs)
    if ev is None:
        return None
    exits = ev.where(F.col("event").isin("member_failed", "member_fenced", "member_left", "pending_member_left")
                     & F.col("member_id").isNotNull())
    starts = ev.where((F.col("event") == "rebalance_started") & F.col("member_id").isNotNull()
                      & F.col("trigger").isin("crash", "poll_timeout", "leave"))
    both = exits.select("cluster", "group_id", "member_id", "ts", "event", "trigger", "client_reason", "reason") \
        .unionByName(starts.select("cluster", "group_id", "member_id", "ts", "event", "trigger", "client_reason", "reason"))
    both = both.withColumn(
        "exit_kind",
        F.when(F.col("trigger") == "poll_timeout", "poll_timeout")
        .when(F.col("event").isin("member_failed", "member_fenced") | (F.col("trigger") == "crash"), "crash")
        .otherwise("leave"),
    )
    return both.groupBy("cluster", "group_id", "member_id").agg(
        F.min("ts").alias("exit_ts"),
        F.min_by("exit_kind", "ts").alias("exit_kind"),
    )


def rebalance_starts(inputs: GoldInputs) -> DataFrame | None:
    """Classic "Preparing to rebalance" lines: one per (group, old generation)."""
    ev = events(inputs)
    if ev is None:
        return None
    return ev.where(F.col("event") == "rebalance_started").select(
        "cluster", "group_id", F.col("generation").alias("old_generation"), F.col("ts").alias("start_ts"),
        "trigger", F.col("member_id").alias("trigger_member"), "reason", "client_reason", "file", "line",
    )
