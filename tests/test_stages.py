"""Each stage declares its inputs once (pipelines/stages.py): the lists the plans, the assets
and the docs used to keep apart are read from the declarations, and equal what they were
(so existing lakes' positions and the Dagster lineage are unchanged). No Spark."""
from __future__ import annotations

import dataclasses

from dagster import AssetKey

from pipelines import stages

# Frozen copies of the lists as they were before the declarations: positions keys and
# plans must not move (an existing lake needs no migration).
GOLD_TRACKED = ("offset_commits", "group_generations", "member_assignments", "consumer_group_epochs",
                "consumer_group_members", "current_assignments", "target_assignment_epochs",
                "target_assignment_member_deltas", "coordinator_events", "topic_ids", "partition_end_offsets",
                "offsets_records")
GOLD_ASSET_INPUTS = ("offset_commits", "group_generations", "member_assignments", "consumer_group_epochs",
                     "consumer_group_members", "current_assignments", "target_assignments", "topic_ids",
                     "coordinator_events", "partition_end_offsets", "offsets_records")
GOLD_TABLES = ("ownership_intervals", "commit_attribution", "rebalance_episodes", "duplicate_windows", "skip_windows",
               "commit_anomalies", "idle_consumers", "rebalance_storms", "coverage_gaps", "consumer_lag",
               "group_summary")
WHATIF_WATCHED = ("group_generations", "member_assignments", "offset_commits", "coordinator_events",
                  "consumer_group_members", "current_assignments", "target_assignment_epochs",
                  "target_assignment_member_deltas", "topic_ids", "rebalance_episodes")
WHATIF_READS = ("group_generations", "member_assignments", "offset_commits", "coordinator_events",
                "rebalance_episodes", "target_assignments", "consumer_group_members", "current_assignments",
                "topic_ids")
TARGET_INPUTS = ("target_assignment_epochs", "target_assignment_member_deltas", "topic_ids")
DECODED_TABLES = ("offset_commits", "group_generations", "member_assignments", "consumer_group_epochs",
                  "consumer_group_members", "target_assignment_epochs", "target_assignment_member_deltas",
                  "current_assignments", "topic_ids", "other_group_records")
REPORT_SILVER = ("group_generations", "offset_commits", "consumer_group_epochs")
REPORT_GOLD = ("rebalance_episodes", "ownership_intervals", "duplicate_windows", "skip_windows", "idle_consumers",
               "rebalance_storms", "commit_anomalies", "coverage_gaps", "consumer_lag", "group_summary",
               "commit_attribution")


def test_expanded_lists_equal_the_old_ones():
    # Same order too: a plan names the first input that moved back or appeared.
    assert stages.GOLD.watched() == GOLD_TRACKED
    # cluster_settings (an asset of bronze_ingest) and broker_clocks (silver's measure of the
    # brokers' clocks) are in gold's lineage, tracked as settings.
    assert stages.GOLD.deps() == stages.GOLD.reads
    assert set(stages.GOLD.deps()) == set(GOLD_ASSET_INPUTS) | {"cluster_settings", "broker_clocks"}
    assert stages.GOLD.outputs == GOLD_TABLES
    assert stages.WHATIF.watched() == WHATIF_WATCHED
    assert set(stages.WHATIF.reads) == set(WHATIF_READS)
    assert stages.TARGET_ASSIGNMENTS.watched() == TARGET_INPUTS
    assert stages.OFFSETS_SILVER.outputs == DECODED_TABLES


def test_code_reads_the_declarations():
    from dashboards import data
    from pipelines.gold import incremental as gold_plan
    from pipelines.gold import runner as gold_runner
    from pipelines.gold import settings as gold_settings
    from pipelines.silver import clocks as silver_clocks
    from pipelines.silver import decode_job
    from pipelines.silver import runner as silver_runner
    from pipelines.whatif import incremental as whatif_plan
    from pipelines.whatif.spark_job import WhatifInputs

    assert gold_plan.TRACKED == GOLD_TRACKED
    assert (gold_plan.WRITER, gold_plan.PREFIX) == ("gold", "gold:")
    assert gold_runner.GOLD_TABLES == GOLD_TABLES
    assert gold_runner.INPUT_FIELDS == tuple(t for t in stages.GOLD.reads if t != "offsets_records")
    assert stages.GOLD.settings == (gold_settings.TABLE, silver_clocks.TABLE)
    assert whatif_plan.WATCHED == WHATIF_WATCHED
    assert whatif_plan.OUTPUTS == ("whatif_episodes", "whatif_summary")
    assert (whatif_plan.WRITER, whatif_plan.APP, whatif_plan.ASSIGNORS_APP) == ("whatif", "whatif:", "whatif:assignors")
    assert set(stages.WHATIF.reads) == {f.name for f in dataclasses.fields(WhatifInputs)}
    assert tuple(decode_job.DECODED_TABLES) == stages.OFFSETS_SILVER.outputs  # one schema per table
    assert (silver_runner.BRONZE_OFFSETS, silver_runner.BRONZE_LOG_LINES, silver_runner.BRONZE_TOPICS) == \
        ("offsets_records", "coordinator_log_lines", "topic_metadata")
    assert (data.SILVER, data.GOLD, data.WHATIF) == (REPORT_SILVER, REPORT_GOLD, ("whatif_summary",))


def test_roles_are_subsets_of_the_declarations():
    from pipelines.gold import incremental as gold_plan
    from pipelines.gold import runner as gold_runner

    assert set(gold_plan.GROUP_INPUTS) <= set(stages.GOLD.watched())
    assert set(gold_runner.REQUIRED) <= set(gold_runner.INPUT_FIELDS)
    assert set(gold_runner.GROUP_KEYED) <= set(gold_runner.INPUT_FIELDS)
    assert gold_plan.BRONZE_OFFSETS in stages.GOLD.reads


def test_writers_and_position_keys_are_the_ones_lakes_hold():
    assert stages.OFFSETS_SILVER.writer == "silver:offsets_records"
    assert stages.OFFSETS_SILVER.position_keys() == ("silver:offsets_records",)
    assert stages.EVENTS_SILVER.position_keys() == ("silver:coordinator_log_lines",)
    assert stages.EVENTS_SILVER.writer == "silver:coordinator_log_lines"
    assert stages.TARGET_ASSIGNMENTS.writer == "silver:target_assignments"
    assert stages.TARGET_ASSIGNMENTS.position_keys() == tuple("silver:" + t for t in TARGET_INPUTS)
    assert stages.TOPIC_NAMES.writer == "" and stages.REPORT.writer == ""
    assert set(stages.WHATIF.position_keys()) == {"whatif:" + t for t in WHATIF_WATCHED} | {"whatif:assignors"}
    # gold:broker_clocks came later: a lake whose gold lacks it had no clock offsets applied.
    assert set(stages.GOLD.position_keys()) == {"gold:" + t for t in GOLD_TRACKED} | {
        "gold:params", "gold:cluster_settings", "gold:broker_clocks", "gold:format"}
    assert stages.BROKER_CLOCKS.position_keys() == ("silver:coordinator_events",)


def test_gold_plan_commits_exactly_the_declared_keys(tmp_path):
    """On a real lake holding every table gold reads (empty, version 0) and no gold table yet."""
    import pyarrow as pa

    from pipelines.gold import incremental as gold_plan
    from pipelines.gold.model import GoldParams
    from pipelines.lake import Lake

    lake = Lake(tmp_path / "lake")
    for t in {*stages.GOLD.reads, *stages.GOLD.watched()}:
        lake.create(t, pa.schema([pa.field("cluster", pa.string())]))
    p = gold_plan.plan(lake, stages.GOLD.outputs, GoldParams(), None)
    assert (p.mode, p.reason) == ("full", "no gold table ownership_intervals yet")
    assert set(p.positions) == set(stages.GOLD.position_keys())
    assert list(p.versions) == list(GOLD_TRACKED)
    assert p.positions["gold:format"] == gold_plan.FORMAT and p.positions["gold:cluster_settings"] == 0


def test_dagster_dependencies_are_the_declarations():
    from assets.definitions import defs

    graph = defs.resolve_asset_graph()
    written = {t for s in stages.STAGES for t in s.outputs}
    for table in written:
        parents = {k.to_user_string() for k in graph.get(AssetKey(table)).parent_keys}
        assert parents == set(stages.deps_of(table)), table
    # A table two stages write depends on both stages' inputs.
    assert set(stages.deps_of("topic_ids")) == {"offsets_records", "topic_metadata"}
    assert set(stages.deps_of("target_assignments")) == set(TARGET_INPUTS)
    # Each stage but the topic names (part of the offsets_silver step) is the step of that name.
    for s in stages.STAGES:
        if s is stages.TOPIC_NAMES:
            continue
        for t, description in s.tables.items():
            node = graph.get(AssetKey(t))
            assert node.assets_def.node_def.name == s.name, t
            # The asset says what one row is, as declared beside the table.
            assert description and node.assets_def.specs_by_key[AssetKey(t)].description == description, t


def test_docs_table_is_the_generated_one():
    doc = stages.DOC.read_text(encoding="utf-8")
    assert stages.with_table(doc) == doc, "run `python -m pipelines.stages --write`"


def test_a_table_rebuilt_whole_lends_its_readers_the_versions_it_was_built_from(tmp_path):
    """Gold (or what-if) run before `target_assignments` is rebuilt read the old table: their
    positions must say the epochs and deltas they saw are the old ones, so that the rebuild's
    rows are still new to their next run. A real delta-rs lake, no Spark."""
    import pyarrow as pa

    from pipelines.lake import Lake
    from pipelines.lake.positions import Positions

    lake = Lake(tmp_path / "lake")
    schema = pa.schema([pa.field("cluster", pa.string())])
    for t in {*stages.GOLD.reads, *TARGET_INPUTS} - {"target_assignments"}:
        lake.create(t, schema)
    row = pa.table({"cluster": ["c"]})
    epochs, deltas = TARGET_INPUTS[:2]
    # Before the first rebuild, gold reads no target_assignments: it records no version of
    # their inputs, and their appearance later is a change.
    assert epochs not in stages.GOLD.versions(lake) and deltas not in stages.GOLD.versions(lake)
    assert stages.GOLD.versions(lake)["topic_ids"] == lake.version("topic_ids")

    writer = stages.TARGET_ASSIGNMENTS
    lake.create("target_assignments", schema)
    lake.append("target_assignments", row, positions=Positions(writer.writer, writer.positions(writer.versions(lake))))
    built = {epochs: lake.version(epochs), deltas: lake.version(deltas)}
    lake.append(epochs, row)  # new epochs, not rebuilt yet
    for stage in (stages.GOLD, stages.WHATIF):
        seen = stage.versions(lake)
        assert (seen[epochs], seen[deltas]) == (built[epochs], built[deltas]) and lake.version(epochs) > built[epochs]
    lake.append("target_assignments", row, positions=Positions(writer.writer, writer.positions(writer.versions(lake))))
    assert stages.GOLD.versions(lake)[epochs] == lake.version(epochs)


def test_changes_is_one_rule_for_every_incremental_stage(tmp_path):
    """`Stage.changes` on a real delta-rs lake (no Spark): appended rows are files to read,
    a compaction is nothing, and an input that appeared, vanished, went back or lost rows
    cannot be followed, unless the stage says it can replay the removed files."""
    import shutil

    import pyarrow as pa

    from pipelines.lake import Lake

    lake = Lake(tmp_path / "lake")
    schema = pa.schema([pa.field("cluster", pa.string()), pa.field("group_id", pa.string())])
    stage = stages.WHATIF
    inputs = stage.watched()[:3]
    for t in inputs:
        lake.create(t, schema, partition_by=["cluster"])
        lake.append(t, pa.table({"cluster": ["c"], "group_id": ["g"]}, schema=schema))
    consumed = stage.versions(lake)
    assert set(consumed) == set(inputs)
    assert stage.consumed(stage.positions(consumed)) == consumed

    unchanged = stage.changes(lake, consumed)
    assert unchanged.nothing and not unchanged.rebuild

    grown = inputs[0]
    lake.append(grown, pa.table({"cluster": ["c"], "group_id": ["h"]}, schema=schema))
    lake.append(grown, pa.table({"cluster": ["c"], "group_id": ["i"]}, schema=schema))
    lake.append(inputs[1], pa.table({"cluster": ["c"], "group_id": ["k"]}, schema=schema))
    consumed[inputs[1]] = lake.version(inputs[1])
    lake.table(inputs[1]).optimize.compact()  # rows rewritten (dataChange false), none added or removed
    assert lake.version(inputs[1]) > consumed[inputs[1]]
    found = stage.changes(lake, consumed)
    assert not found.rebuild and set(found.files) == {grown}
    added, removed = found.files[grown]
    assert len(added) == 2 and not removed

    rewritten = inputs[2]
    lake.overwrite_where(rewritten, pa.table({"cluster": ["c"], "group_id": ["j"]}, schema=schema), "true")
    found = stage.changes(lake, consumed)
    assert found.rebuild == f"{rewritten} was rewritten since version {consumed[rewritten]} (not only appended to)"
    assert found.files == {} and not found.nothing
    replayable = stage.changes(lake, consumed, follows_rewrite=lambda t, removed: t == rewritten and len(removed) == 1)
    assert not replayable.rebuild and set(replayable.files) == {grown, rewritten}

    now = stage.versions(lake)
    assert stage.changes(lake, {t: v for t, v in consumed.items() if t != grown}).rebuild == f"input {grown} appeared since"
    assert stage.changes(lake, {**now, grown: now[grown] + 5}).rebuild.startswith(f"{grown} went back to version")
    shutil.rmtree(tmp_path / "lake" / inputs[1])
    assert stage.changes(lake, now).rebuild == f"input {inputs[1]} is gone"
