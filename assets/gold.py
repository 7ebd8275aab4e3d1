"""Gold: rebalance history and findings, recomputed from silver each run.

`pipelines.gold.build_all` holds all the logic; this asset only hands it the lake's silver
tables and writes back what it returns, each table replaced whole (gold is a function of
silver, so an overwrite is always consistent with it).

The reading of inputs and writing of outputs below is I/O glue that belongs in a
lake-facing gold runner (like `pipelines.silver.runner`); when one exists, this asset
should call it instead.
"""
from dagster import AssetSpec, multi_asset

from assets.metadata import table_result
from assets.resources import LakeResource, SparkResource

GOLD_GROUP = "gold"

GOLD_TABLES = (
    "ownership_intervals",
    "commit_attribution",
    "rebalance_episodes",
    "duplicate_windows",
    "skip_windows",
    "commit_anomalies",
    "idle_consumers",
    "rebalance_storms",
    "coverage_gaps",
)

# GoldInputs field → lake table. The first three are required; the rest are used when present.
_REQUIRED = ("offset_commits", "group_generations", "member_assignments")
_OPTIONAL = ("consumer_group_epochs", "consumer_group_members", "current_assignments", "target_assignments",
             "topic_ids", "coordinator_events", "partition_end_offsets")
_DEPS = [*_REQUIRED, *_OPTIONAL, "offsets_records"]


@multi_asset(
    name="gold_tables",
    specs=[AssetSpec(t, group_name=GOLD_GROUP, deps=_DEPS) for t in GOLD_TABLES],
    description="Rebalance episodes, ownership, duplicate/skip windows, idle consumers, storms, anomalies, coverage gaps.",
)
def gold_tables(lake: LakeResource, spark: SparkResource):
    from pipelines.gold import GoldInputs, build_all

    target = lake.lake(spark.session())
    if not all(target.exists(t) for t in _REQUIRED):
        # Nothing decoded yet (an empty lake): no history to derive.
        for name in GOLD_TABLES:
            yield table_result(target, name, 0)
        return
    inputs = GoldInputs(
        **{t: target.read(t) for t in _REQUIRED},
        **{t: target.read(t) for t in _OPTIONAL if target.exists(t)},
        bronze_positions=(target.read("offsets_records").select("cluster", "partition", "offset", "control")
                          if target.exists("offsets_records") else None),
    )
    for name, df in build_all(inputs).items():
        target.write_df(name, df, mode="overwrite", partition_by=["cluster"])
        yield table_result(target, name, None, write_mode="overwrite")


GOLD_ASSETS = [gold_tables]
