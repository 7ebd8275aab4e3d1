"""Silver: decoded tables, updated incrementally from bronze (pipelines.silver does the work).

`update_offsets_silver` decodes one bronze increment into all its tables at once (the
decode is shared), so those tables are one multi-asset; each reports its own rows.
"""

from dagster import AssetSpec, multi_asset

from assets.metadata import table_result
from assets.resources import LakeResource, SourcesResource, SparkResource
from pipelines.stages import BROKER_CLOCKS, EVENTS_SILVER, OFFSETS_SILVER, TARGET_ASSIGNMENTS, Stage, deps_of

SILVER_GROUP = "silver"


@multi_asset(
    name=OFFSETS_SILVER.name,
    # Two stages: the decode, and (into topic_ids) the topic names live ingestion sampled.
    specs=[AssetSpec(t, group_name=SILVER_GROUP, deps=list(deps_of(t)), description=d)
           for t, d in OFFSETS_SILVER.tables.items()],
    description="Decode the new offsets_records rows into commits, classic generations, KIP-848 tables and "
                "the records of other group kinds.",
)
def offsets_silver(lake: LakeResource, spark: SparkResource, sources: SourcesResource):
    from pipelines.silver.runner import update_offsets_silver, update_topic_names

    target = lake.lake(spark.session)  # Spark starts on first use: a run with nothing new needs none
    run = update_offsets_silver(target, kafka_version=sources.kafka_version)
    run.rows_written["topic_ids"] = run.rows_written.get("topic_ids", 0) + update_topic_names(target)
    for name in OFFSETS_SILVER.outputs:
        yield table_result(target, name, run.rows_written.get(name, 0), bronze_version=run.bronze_version)


@multi_asset(
    name=EVENTS_SILVER.name,
    specs=[AssetSpec(t, group_name=SILVER_GROUP, deps=list(deps_of(t)), description=d)
           for t, d in EVENTS_SILVER.tables.items()],
)
def events_silver(lake: LakeResource, spark: SparkResource):
    from pipelines.silver.runner import update_events_silver

    target = lake.lake(spark.session)  # Spark starts on first use: a run with nothing new needs none
    run = update_events_silver(target)
    yield table_result(target, "coordinator_events", run.rows_written.get("coordinator_events", 0),
                       bronze_version=run.bronze_version)


def _derived(stage: Stage, rebuild: str):
    """The asset of a silver table derived from other silver tables by
    `pipelines.silver.runner.<rebuild>` (which returns the rows written, 0 when its inputs
    did not change)."""
    (table,) = stage.outputs

    @multi_asset(
        name=stage.name,
        specs=[AssetSpec(table, group_name=SILVER_GROUP, deps=list(deps_of(table)), description=stage.tables[table])],
    )
    def rebuilt(lake: LakeResource, spark: SparkResource):
        from pipelines.silver import runner

        target = lake.lake(spark.session)  # Spark starts on first use: a run with nothing new needs none
        yield table_result(target, table, getattr(runner, rebuild)(target))

    return rebuilt


target_assignments_silver = _derived(TARGET_ASSIGNMENTS, "update_target_assignments")
broker_clocks_silver = _derived(BROKER_CLOCKS, "rebuild_broker_clocks")
