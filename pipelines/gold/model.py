"""Inputs and tunable parameters of the gold jobs."""
from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


@dataclass
class GoldInputs:
    """Silver tables (pipelines/silver/schemas.py). KIP-848 tables and events may be None or empty."""

    offset_commits: DataFrame
    group_generations: DataFrame
    member_assignments: DataFrame
    consumer_group_epochs: DataFrame | None = None
    consumer_group_members: DataFrame | None = None
    current_assignments: DataFrame | None = None
    target_assignments: DataFrame | None = None
    topic_ids: DataFrame | None = None
    # (cluster, partition, offset, control, source, aborted, key_group) of every bronze record:
    # where the input has holes, and what live ingestion read back of aborted transactions.
    bronze_positions: DataFrame | None = None
    coordinator_events: DataFrame | None = None
    # live mode: (cluster, topic, partition, end_offset, sampled_at)
    partition_end_offsets: DataFrame | None = None
    # (cluster, classic_heartbeat_interval_ms, consumer_session_timeout_ms, consumer_heartbeat_interval_ms):
    # settings the records do not hold, per cluster (see settings.py); missing → GoldParams' defaults.
    cluster_settings: DataFrame | None = None
    # (cluster, broker, clock_offset_ms, ...): silver `broker_clocks`; read_inputs has already
    # moved every time onto the cluster's clock with it (clocks.py).
    broker_clocks: DataFrame | None = None


def _param(default, description: str):
    """A GoldParams field: its default and what it means, read by the Dagster run config
    (assets/gold.py) and the docs, so the setting is defined once."""
    return field(default=default, metadata={"description": description})


@dataclass
class GoldParams:
    storm_min_rebalances: int = _param(5, "storm: at least K logical rebalances ...")
    storm_window_minutes: float = _param(10.0, "... inside W minutes")
    # Defaults of the per-cluster settings (GoldInputs.cluster_settings) for clusters without a row.
    classic_heartbeat_interval_ms: int = _param(
        3000, "default client heartbeat.interval.ms (clusters without cluster_settings; not in any record, "
              "Java and librdkafka default 3 s)")
    consumer_session_timeout_ms: int = _param(45000, "default group.consumer.session.timeout.ms (KIP-848 broker setting)")
    consumer_heartbeat_interval_ms: int = _param(5000, "default group.consumer.heartbeat.interval.ms (KIP-848 broker setting)")
    off_cadence_ratio: float = _param(
        0.8, "a last commit this much shorter than the owner's usual commit gap is a final (close/revoke) commit")
    stall_min_commits: int = _param(5, "stall: the same offset committed at least this many times")
    stall_min_ms: int = _param(60_000, "stall: over at least this long")
    stop_min_ms: int = _param(60_000, "stop: commits ceased at least this long")
    skip_rate_factor: float = _param(5.0, "skip window: a commit advancing faster than this multiple of the partition's peak rate")
    skip_min_records: int = _param(1000, "skip window: and by at least this many records")


def converted(generations) -> Column:
    """Silver's `group_generations.converted` (a tombstone of a conversion to the consumer
    protocol, not a deletion), false in lakes written before the column."""
    return F.coalesce(F.col("converted"), F.lit(False)) if "converted" in generations.columns else F.lit(False)


def ms(col: str | Column) -> Column:
    """A timestamp column → epoch milliseconds (long)."""
    c = F.col(col) if isinstance(col, str) else col
    return F.unix_millis(c)


def ts(col: str | Column) -> Column:
    """Epoch milliseconds → timestamp."""
    c = F.col(col) if isinstance(col, str) else col
    return F.timestamp_millis(c.cast("long"))

