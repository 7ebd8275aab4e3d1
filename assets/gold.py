"""Gold: rebalance history and findings, kept up to date from silver.

Thin: `pipelines.gold.runner.update_gold` reads the silver tables from the lake, recomputes
the groups with new silver rows (every group the first time) and replaces their rows.
The what-if replays are in assets/whatif.py.
"""
import dataclasses

from dagster import AssetSpec, Config, multi_asset
from pydantic import Field

from assets.metadata import table_result
from assets.resources import LakeResource, SparkResource
from pipelines.gold.runner import GOLD_TABLES  # one list, owned by the runner

GOLD_GROUP = "gold"
_SILVER = ("offset_commits", "group_generations", "member_assignments", "consumer_group_epochs",
           "consumer_group_members", "current_assignments", "target_assignments", "topic_ids",
           "coordinator_events", "partition_end_offsets")


class GoldConfig(Config):
    """Run config of `gold_tables`: the GoldParams (their defaults: docs/gold.md). Changing any of them
    makes the next run rebuild every gold table (they are part of gold's fingerprint)."""

    storm_min_rebalances: int = Field(5, description="storm: at least K logical rebalances ...")
    storm_window_minutes: float = Field(10.0, description="... inside W minutes")
    classic_heartbeat_interval_ms: int = Field(3000, description="default client heartbeat.interval.ms (clusters without cluster_settings)")
    consumer_session_timeout_ms: int = Field(45000, description="default group.consumer.session.timeout.ms (KIP-848)")
    consumer_heartbeat_interval_ms: int = Field(5000, description="default group.consumer.heartbeat.interval.ms (KIP-848)")
    off_cadence_ratio: float = Field(0.8, description="a last commit this much shorter than the usual gap is a final commit")
    stall_min_commits: int = Field(5, description="stall: the same offset committed at least this many times")
    stall_min_ms: int = Field(60_000, description="stall: over at least this long")
    stop_min_ms: int = Field(60_000, description="stop: commits ceased at least this long")
    skip_rate_factor: float = Field(5.0, description="skip window: a jump faster than this multiple of the peak rate")
    skip_min_records: int = Field(1000, description="skip window: and at least this many records")
    full_rebuild: bool = Field(False, description="recompute every group, not only the ones with new silver rows")

    def params(self):
        from pipelines.gold import GoldParams

        return GoldParams(**{f.name: getattr(self, f.name) for f in dataclasses.fields(GoldParams)})


@multi_asset(
    name="gold_tables",
    specs=[AssetSpec(t, group_name=GOLD_GROUP, deps=[*_SILVER, "offsets_records"]) for t in GOLD_TABLES],
    description="Rebalance episodes, ownership, duplicate/skip windows, idle consumers, storms, anomalies, coverage gaps.",
)
def gold_tables(config: GoldConfig, lake: LakeResource, spark: SparkResource):
    from pipelines.gold.runner import REQUIRED, update_gold

    target = lake.lake(spark.session)  # Spark starts on first use: a run with nothing new needs none
    if not all(target.exists(t) for t in REQUIRED):
        # Nothing decoded yet (an empty lake): no history to derive.
        for name in GOLD_TABLES:
            yield table_result(target, name, 0)
        return
    # Incremental: only the groups with new silver rows are recomputed and replaced.
    run = update_gold(target, config.params(), full=config.full_rebuild)
    for name in GOLD_TABLES:
        yield table_result(target, name, run.rows_written.get(name, 0), gold_run=run.mode,
                           groups_recomputed=run.groups)


GOLD_ASSETS = [gold_tables]
