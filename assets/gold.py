"""Gold and what-if: rebalance history, findings and assignor replays, rebuilt from silver.

Thin: `pipelines.gold.runner.update_gold` and `pipelines.whatif.spark_job.update_whatif` read
the silver tables from the lake, derive their tables and write them back (each cluster's rows
replaced whole: they are functions of silver, so an overwrite is always consistent with it).
"""
from dagster import AssetSpec, multi_asset

from assets.metadata import table_result
from assets.resources import LakeResource, SparkResource
from pipelines.gold.runner import GOLD_TABLES  # one list, owned by the runner

GOLD_GROUP = "gold"
WHATIF_GROUP = "whatif"

WHATIF_TABLES = ("whatif_episodes", "whatif_summary")

_SILVER = ("offset_commits", "group_generations", "member_assignments", "consumer_group_epochs",
           "consumer_group_members", "current_assignments", "target_assignments", "topic_ids",
           "coordinator_events", "partition_end_offsets")


@multi_asset(
    name="gold_tables",
    specs=[AssetSpec(t, group_name=GOLD_GROUP, deps=[*_SILVER, "offsets_records"]) for t in GOLD_TABLES],
    description="Rebalance episodes, ownership, duplicate/skip windows, idle consumers, storms, anomalies, coverage gaps.",
)
def gold_tables(lake: LakeResource, spark: SparkResource):
    from pipelines.gold.runner import REQUIRED, update_gold

    target = lake.lake(spark.session())
    if not all(target.exists(t) for t in REQUIRED):
        # Nothing decoded yet (an empty lake): no history to derive.
        for name in GOLD_TABLES:
            yield table_result(target, name, 0)
        return
    run = update_gold(target)
    for name in GOLD_TABLES:
        # Replaced whole each run: "rows written" would count the same rows again.
        yield table_result(target, name, None, write_mode="overwrite")


@multi_asset(
    name="whatif_tables",
    specs=[AssetSpec(t, group_name=WHATIF_GROUP, deps=[*_SILVER, "rebalance_episodes"]) for t in WHATIF_TABLES],
    description="Each group's real history replayed under every assignor, next to what happened.",
)
def whatif_tables(lake: LakeResource, spark: SparkResource):
    from pipelines.whatif.spark_job import update_whatif

    target = lake.lake(spark.session())
    if not target.exists("member_assignments") and not target.exists("current_assignments"):
        for name in WHATIF_TABLES:
            yield table_result(target, name, 0)
        return
    written = update_whatif(target)
    for name in WHATIF_TABLES:
        yield table_result(target, name, None, write_mode="overwrite")


GOLD_ASSETS = [gold_tables, whatif_tables]
