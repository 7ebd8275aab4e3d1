"""The quality suites as Dagster asset checks: registered next to every table that has a
suite, and run by an in-process materialization of a real recording, where they pass.

The cost of the checks is measured from the run's own step events (check steps vs. asset
steps) and printed; it is a figure for the docs, not an assertion (the machine's load
varies too much for timed assertions).
"""
from __future__ import annotations

from dagster import AssetCheckKey, DagsterEventType, materialize

from assets.checks import CHECK_NAME
from assets.definitions import ALL_ASSETS, ALL_CHECKS, default_resources, defs
from assets.resources import LakeResource, SourcesResource
from quality import SUITES

RECORDING = "cooperative_rolling"


def _asset_tables():
    return {k.to_user_string() for a in ALL_ASSETS for k in a.keys}


def test_definitions_list_a_blocking_check_per_table_with_a_suite():
    repo = defs.get_repository_def()
    check_keys = set()
    for checks_def in ALL_CHECKS:
        for spec in checks_def.check_specs:
            assert spec.blocking, spec.key
            check_keys.add(spec.key)
    expected = {AssetCheckKey.from_user_string(f"{t}:{CHECK_NAME}") for t in _asset_tables() if t in SUITES}
    assert expected and check_keys == expected
    # Every layer the definitions materialize has its checks.
    tables = {k.asset_key.to_user_string() for k in check_keys}
    assert {"offsets_records", "group_generations", "member_assignments", "offset_commits",
            "coordinator_events", "ownership_intervals"} <= tables
    # The repository (what `dagster dev` loads) knows them too.
    assert expected <= set(repo.asset_graph.asset_check_keys)


def test_materialize_runs_the_checks_and_they_pass(tmp_path, recordings_dir):
    recording = recordings_dir / RECORDING
    resources = default_resources({})
    resources["lake"] = LakeResource(root=str(tmp_path / "lake"))
    resources["sources"] = SourcesResource(cluster=RECORDING, segment_paths=[str(recording / "offsets_segments")],
                                           log_paths=[str(recording / "server.log")])
    result = materialize([*ALL_ASSETS, *ALL_CHECKS], resources=resources, raise_on_error=False,
                         run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}})
    assert result.success

    evaluations = {}
    for e in result.get_asset_check_evaluations():
        evaluations[e.asset_key.to_user_string()] = e
    expected = {t for t in _asset_tables() if t in SUITES}
    assert set(evaluations) == expected
    failed = {t: e.description for t, e in evaluations.items() if not e.passed}
    assert failed == {}
    # Metadata: the suite, the data docs link, the time taken.
    gens = evaluations["group_generations"].metadata
    assert gens["suite"].value == "silver.group_generations"
    assert str(gens["data_docs"].value).startswith("file://") and str(gens["data_docs"].value).endswith("index.html")
    assert (tmp_path / "lake" / "_quality" / "data_docs" / "index.html").is_file()
    assert (tmp_path / "lake" / "quality_results" / "_delta_log").is_dir()

    # Cost: time in check steps vs. time in asset steps of this one run.
    check_steps = {c.node_def.name for c in ALL_CHECKS}
    check_ms = asset_ms = 0.0
    for event in result.all_events:
        if event.event_type == DagsterEventType.STEP_SUCCESS:
            ms = event.event_specific_data.duration_ms
            if event.step_key in check_steps:
                check_ms += ms
            else:
                asset_ms += ms
    assert check_ms > 0 and asset_ms > 0
    print(f"\nquality check cost on {RECORDING}: checks {check_ms / 1000:.1f} s, assets {asset_ms / 1000:.1f} s, "
          f"ratio {check_ms / asset_ms:.2f}")
