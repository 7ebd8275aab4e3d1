"""Inputs and tunable parameters of the gold jobs."""
from __future__ import annotations

from dataclasses import dataclass

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
    # (cluster, partition, offset, control) of every bronze record: where the input has holes.
    bronze_positions: DataFrame | None = None
    coordinator_events: DataFrame | None = None
    # live mode: (cluster, topic, partition, end_offset, sampled_at)
    partition_end_offsets: DataFrame | None = None
    # (cluster, classic_heartbeat_interval_ms, consumer_session_timeout_ms, consumer_heartbeat_interval_ms):
    # settings the records do not hold, per cluster (see settings.py); missing → GoldParams' defaults.
    cluster_settings: DataFrame | None = None

    def pinned(self, pin) -> "GoldInputs":
        """A copy with every given DataFrame passed through `pin` (e.g. materialized once)."""
        return GoldInputs(**{k: (None if v is None else pin(v)) for k, v in vars(self).items()})


@dataclass
class GoldParams:
    # Storms: at least K logical rebalances inside W minutes.
    storm_min_rebalances: int = 5
    storm_window_minutes: float = 10.0
    # Defaults of the per-cluster settings (GoldInputs.cluster_settings) for clusters without a row.
    # Client heartbeat interval (not stored in the records; Java and librdkafka default 3 s).
    classic_heartbeat_interval_ms: int = 3000
    # KIP-848 broker settings (group.consumer.*; Kafka defaults).
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    # A last commit this much shorter than the owner's usual commit gap is a final (close/revoke) commit.
    off_cadence_ratio: float = 0.8
    # Commit anomalies.
    stall_min_commits: int = 5
    stall_min_ms: int = 60_000
    stop_min_ms: int = 60_000
    # Skip windows: a commit that advances faster than this multiple of the partition's peak rate.
    skip_rate_factor: float = 5.0
    skip_min_records: int = 1000


def ms(col: str | Column) -> Column:
    """A timestamp column → epoch milliseconds (long)."""
    c = F.col(col) if isinstance(col, str) else col
    return F.unix_millis(c)


def ts(col: str | Column) -> Column:
    """Epoch milliseconds → timestamp."""
    c = F.col(col) if isinstance(col, str) else col
    return F.timestamp_millis(c.cast("long"))

