"""Silver: decoded tables, updated incrementally from bronze (pipelines.silver does the work).

`update_offsets_silver` decodes one bronze increment into all its tables at once (the
decode is shared), so those tables are one multi-asset; each reports its own rows.
"""

from dagster import AssetSpec, multi_asset

from assets.metadata import table_result
from assets.resources import LakeResource, SourcesResource, SparkResource

SILVER_GROUP = "silver"

OFFSETS_SILVER_TABLES = (
    "offset_commits",
    "group_generations",
    "member_assignments",
    # KIP-848 (consumer protocol) groups
    "consumer_group_epochs",
    "consumer_group_members",
    "target_assignment_epochs",
    "target_assignment_member_deltas",
    "current_assignments",
    "topic_ids",
    # share and streams groups, kept whole
    "other_group_records",
)


@multi_asset(
    name="offsets_silver",
    # topic_ids also takes the names live ingestion sampled (from Kafka 4.1 no record has them).
    specs=[AssetSpec(t, group_name=SILVER_GROUP,
                     deps=["offsets_records", "topic_metadata"] if t == "topic_ids" else ["offsets_records"])
           for t in OFFSETS_SILVER_TABLES],
    description="Decode the new offsets_records rows into commits, classic generations, KIP-848 tables and "
                "the records of other group kinds.",
)
def offsets_silver(lake: LakeResource, spark: SparkResource, sources: SourcesResource):
    from pipelines.silver.runner import update_offsets_silver, update_topic_names

    target = lake.lake(spark.session)  # Spark starts on first use: a run with nothing new needs none
    run = update_offsets_silver(target, kafka_version=sources.kafka_version)
    run.rows_written["topic_ids"] = run.rows_written.get("topic_ids", 0) + update_topic_names(target)
    for name in OFFSETS_SILVER_TABLES:
        yield table_result(target, name, run.rows_written.get(name, 0), bronze_version=run.bronze_version)


@multi_asset(
    name="events_silver",
    specs=[AssetSpec("coordinator_events", group_name=SILVER_GROUP, deps=["coordinator_log_lines"],
                     description="One typed group-coordinator event parsed from a server.log line.")],
)
def events_silver(lake: LakeResource, spark: SparkResource):
    from pipelines.silver.runner import update_events_silver

    target = lake.lake(spark.session)  # Spark starts on first use: a run with nothing new needs none
    run = update_events_silver(target)
    yield table_result(target, "coordinator_events", run.rows_written.get("coordinator_events", 0),
                       bronze_version=run.bronze_version)


@multi_asset(
    name="target_assignments_silver",
    specs=[AssetSpec("target_assignments", group_name=SILVER_GROUP,
                     deps=["target_assignment_epochs", "target_assignment_member_deltas", "topic_ids"],
                     description="Each KIP-848 group's full target assignment per epoch (rebuilt whole).")],
)
def target_assignments_silver(lake: LakeResource, spark: SparkResource):
    from pipelines.silver.runner import rebuild_target_assignments

    target = lake.lake(spark.session)  # Spark starts on first use: a run with nothing new needs none
    rows = rebuild_target_assignments(target)
    yield table_result(target, "target_assignments", rows)
