"""The Dagster definitions load (as `dagster dev` loads them) and carry the schedule and
sensor; the sensor's cursor tracks real files."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dagster import AssetKey, DagsterInstance, EnvVar, RunRequest, SkipReason, build_sensor_context

from assets.automation import changed_files, new_source_files, source_listing
from assets.definitions import defs, default_resources
from assets.resources import KafkaResource, SourcesResource

REPO = Path(__file__).resolve().parents[1]

BRONZE = {"offsets_records", "coordinator_log_lines", "quarantine", "partition_end_offsets"}
SILVER = {"offset_commits", "group_generations", "member_assignments", "coordinator_events",
          "consumer_group_epochs", "consumer_group_members", "target_assignment_epochs",
          "target_assignment_member_deltas", "current_assignments", "topic_ids", "target_assignments"}


def test_definitions_list_every_table():
    keys = {s.key.to_user_string() for s in defs.resolve_all_asset_specs()}
    assert BRONZE | SILVER <= keys


def test_silver_depends_on_bronze():
    graph = defs.resolve_asset_graph()
    assert AssetKey("offsets_records") in graph.get(AssetKey("group_generations")).parent_keys
    assert AssetKey("coordinator_log_lines") in graph.get(AssetKey("coordinator_events")).parent_keys


def test_every_dependency_is_an_asset_and_derived_tables_follow_what_they_read():
    graph = defs.resolve_asset_graph()
    keys = set(graph.get_all_asset_keys())
    for key in keys:
        assert graph.get(key).parent_keys <= keys, key  # no dependency on a table nobody declares
    # gold is downstream of every silver table it reads, what-if of gold's episodes
    gold_parents = {k.to_user_string() for k in graph.get(AssetKey("duplicate_windows")).parent_keys}
    assert {"offset_commits", "group_generations", "member_assignments", "coordinator_events",
            "target_assignments", "offsets_records"} <= gold_parents
    whatif_parents = {k.to_user_string() for k in graph.get(AssetKey("whatif_summary")).parent_keys}
    assert {"rebalance_episodes", "group_generations", "target_assignments"} <= whatif_parents


def test_schedule_and_sensor_present():
    schedule = defs.resolve_schedule_def("refresh_every_15_minutes")
    assert schedule.cron_schedule == "*/15 * * * *"
    assert schedule.job_name == "refresh_lake"
    sensor = defs.resolve_sensor_def("new_source_files")
    assert sensor.job_name == "refresh_lake"


def test_workspace_module_loads_in_a_fresh_interpreter():
    # What `dagster dev` does with workspace.yaml: import assets.definitions from the repo root.
    code = "from assets.definitions import defs; print(len(list(defs.resolve_all_asset_specs())))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.strip().splitlines()[-1]) >= len(BRONZE | SILVER)


def test_secret_comes_from_the_environment_and_stays_out_of_config(monkeypatch):
    monkeypatch.setenv("REBALANCE_AUDIT_KAFKA_SASL_PASSWORD", "s3cr3t-value")
    monkeypatch.setenv("REBALANCE_AUDIT_BOOTSTRAP_SERVERS", "127.0.0.1:9")
    kafka = default_resources()["kafka"]
    # Before initialisation the resource holds the variable's name, not its value: that is
    # what Dagster stores with the run and shows in the UI.
    assert isinstance(kafka.sasl_password, EnvVar)
    assert kafka.sasl_password.env_var_name == "REBALANCE_AUDIT_KAFKA_SASL_PASSWORD"
    assert "s3cr3t-value" not in repr(kafka)
    resolved = kafka.process_config_and_initialize()
    assert resolved.client_config()["sasl.password"] == "s3cr3t-value"
    assert resolved.client_config()["bootstrap.servers"] == "127.0.0.1:9"


def test_kafka_disabled_without_bootstrap_servers():
    assert not KafkaResource().enabled
    assert KafkaResource(bootstrap_servers="h:9092").enabled


def test_sensor_runs_on_new_and_changed_files(tmp_path):
    seg = tmp_path / "segments"
    seg.mkdir()
    sources = SourcesResource(segment_paths=[str(seg)])
    with DagsterInstance.ephemeral() as instance:
        ctx = build_sensor_context(instance=instance, resources={"sources": sources})
        assert isinstance(new_source_files(ctx), SkipReason)  # empty folder: nothing to do

        (seg / "00000000000000000000.log").write_bytes(b"x" * 10)
        ctx = build_sensor_context(instance=instance, resources={"sources": sources}, cursor=ctx.cursor)
        first = new_source_files(ctx)
        assert isinstance(first, RunRequest)
        cursor = ctx.cursor
        assert str(seg / "00000000000000000000.log") in json.loads(cursor)

        ctx = build_sensor_context(instance=instance, resources={"sources": sources}, cursor=cursor)
        assert isinstance(new_source_files(ctx), SkipReason)  # unchanged

        with open(seg / "00000000000000000000.log", "ab") as f:  # the active segment grows
            f.write(b"y")
        ctx = build_sensor_context(instance=instance, resources={"sources": sources}, cursor=cursor)
        second = new_source_files(ctx)
        assert isinstance(second, RunRequest)
        assert second.run_key != first.run_key


def test_sensor_skips_without_configured_paths():
    with DagsterInstance.ephemeral() as instance:
        ctx = build_sensor_context(instance=instance, resources={"sources": SourcesResource()})
        assert isinstance(new_source_files(ctx), SkipReason)


def test_listing_marks_missing_paths(tmp_path):
    missing = tmp_path / "later"
    before = source_listing([str(missing)])
    assert before == {str(missing): [-1, -1]}
    missing.mkdir()
    (missing / "server.log").write_text("line\n")
    after = source_listing([str(missing)])
    assert changed_files(before, after) == [str(missing / "server.log")]
    st = os.stat(missing / "server.log")
    assert after[str(missing / "server.log")] == [st.st_size, st.st_mtime_ns]


def test_schedule_and_sensor_skip_while_a_refresh_is_in_flight(tmp_path):
    from dagster import DagsterRun, DagsterRunStatus, build_schedule_context, instance_for_test

    from assets.automation import every_15_minutes

    seg = tmp_path / "segments"
    seg.mkdir()
    (seg / "00000000000000000000.log").write_bytes(b"x")
    sources = SourcesResource(segment_paths=[str(seg)])
    with instance_for_test() as instance:  # a schedule's context needs an instance it can reopen
        assert isinstance(every_15_minutes(build_schedule_context(instance=instance)), RunRequest)
        running = instance.add_run(DagsterRun(job_name="refresh_lake", run_id="a" * 36, status=DagsterRunStatus.STARTED))

        skipped = every_15_minutes(build_schedule_context(instance=instance))
        assert isinstance(skipped, SkipReason) and running.run_id in skipped.skip_message
        ctx = build_sensor_context(instance=instance, resources={"sources": sources})
        skipped = new_source_files(ctx)
        assert isinstance(skipped, SkipReason) and running.run_id in skipped.skip_message
        assert not ctx.cursor  # the new file is still new at the next evaluation

        instance.report_run_failed(running)
        assert isinstance(every_15_minutes(build_schedule_context(instance=instance)), RunRequest)
        assert isinstance(new_source_files(build_sensor_context(instance=instance, resources={"sources": sources})),
                          RunRequest)


def test_every_run_executes_in_one_process_so_one_spark_session_serves_it():
    from dagster import AssetKey

    for name in ("refresh_lake", "maintain_lake"):
        assert defs.resolve_job_def(name).executor_def.name == "in_process", name
    # An ad hoc materialization from the UI runs the implicit asset job: the same executor.
    assert defs.resolve_implicit_job_def_def_for_assets([AssetKey("duplicate_windows")]).executor_def.name == "in_process"


def test_the_instance_of_dagster_dev_runs_one_run_at_a_time(tmp_path):
    """`dagster dev` started in the repository root (no DAGSTER_HOME) reads its dagster.yaml:
    its run queue starts one run at a time."""
    from dagster._core.instance.ref import InstanceRef

    repo = Path(__file__).resolve().parents[1]
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path), config_dir=str(repo))) as instance:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 1
