"""Every asset materializes in-process over a lake fed with a real recording, and a second
materialization changes nothing (same rows, same contents) and runs no Spark job: every
position is current, every check's table unchanged since it passed, the report's inputs
unchanged."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from assets.definitions import ALL_ASSETS, default_resources
from assets.inprocess import MaterializeError, materialize_all
from assets.resources import LakeResource, SourcesResource

RECORDING = "crash_autocommit"
# Assets that are not Delta tables (the HTML report): no table URI, rows or version.
NOT_TABLES = {"sre_report"}
SILVER_WITH_ROWS = ("offset_commits", "group_generations", "member_assignments", "coordinator_events")


def _resources(lake_root, recording):
    res = default_resources({})
    res["lake"] = LakeResource(root=str(lake_root))
    res["sources"] = SourcesResource(
        segment_paths=[str(recording / "offsets_segments")], log_paths=[str(recording / "server.log")]
    )
    return res


def _snapshot(lake_root, names):
    """Every table's rows, sorted, as Python values (order-free comparison)."""
    out = {}
    for name in names:
        path = lake_root / name
        if not (path / "_delta_log").is_dir():
            out[name] = None
            continue
        t = DeltaTable(str(path)).to_pyarrow_table()
        rows = [json.dumps(r, sort_keys=True, default=repr) for r in t.to_pylist()]
        out[name] = sorted(rows)
    return out


@pytest.fixture(scope="module")
def materialized(tmp_path_factory, recordings_dir):
    lake_root = tmp_path_factory.mktemp("assets-lake") / "lake"
    recording = recordings_dir / RECORDING
    resources = _resources(lake_root, recording)
    jobs1, first = _spark_jobs(lambda: materialize_all(resources), "materialize-first")
    snap1 = _snapshot(lake_root, [o.asset for o in first])
    results1 = DeltaTable(str(lake_root / "quality_results")).version()
    jobs2, second = _spark_jobs(lambda: materialize_all(resources), "materialize-second")
    snap2 = _snapshot(lake_root, [o.asset for o in second])
    results2 = DeltaTable(str(lake_root / "quality_results")).version()
    materialized_jobs.update(first=jobs1, second=jobs2, results_versions=(results1, results2))
    return lake_root, recording, first, snap1, second, snap2


materialized_jobs: dict[str, list] = {}


def _spark_jobs(fn, group: str):
    from pipelines.spark import get_spark
    from tests.spark_fixture import spark_jobs

    return spark_jobs(get_spark(), group, fn)


def test_a_run_with_nothing_new_runs_no_spark_job(materialized):
    _, _, first, _, second, _ = materialized
    # The first run's jobs are seen (so the count below can fail), the second run has none.
    assert materialized_jobs["first"]
    assert materialized_jobs["second"] == []
    assert {c.checked.split(" since")[0] for c in first.checks} <= {"full", "empty", "absent"}
    assert {c.checked.split(" since")[0] for c in second.checks} <= {"unchanged", "empty", "absent"}
    assert any(c.checked.startswith("unchanged since version") for c in second.checks)
    # Its checks said nothing the history does not hold already: quality_results is as it was.
    before, after = materialized_jobs["results_versions"]
    assert after == before


def test_every_asset_materializes(materialized):
    _, _, first, _, second, _ = materialized
    expected = set()
    for a in ALL_ASSETS:
        expected.update(k.to_user_string() for k in a.keys)
    assert {o.asset for o in first} == expected
    assert {o.asset for o in second} == expected
    for o in first:
        if o.asset in NOT_TABLES:
            continue
        assert o.uri and o.uri.endswith("/" + o.asset)


def test_bronze_holds_the_recording(materialized):
    lake_root, recording, first, _, _, _ = materialized
    by = {o.asset: o for o in first}
    # The recording's own decoding (one JSON line per record) counts what the segments hold.
    with open(recording / "offsets_records.jsonl") as f:
        n_records = sum(1 for line in f if line.strip())
    assert by["offsets_records"].rows_total == n_records
    assert by["offsets_records"].rows_written == n_records
    assert by["coordinator_log_lines"].rows_total > 0


def test_silver_tables_have_rows(materialized):
    lake_root, recording, first, _, _, _ = materialized
    by = {o.asset: o for o in first}
    for name in SILVER_WITH_ROWS:
        assert by[name].rows_total > 0, name
        assert by[name].rows_written == by[name].rows_total, name
    # Gold is derived: the recording's history has episodes and ownership.
    for name in ("rebalance_episodes", "ownership_intervals", "commit_attribution"):
        assert by[name].rows_total > 0, name
    # Every group the broker listed at the end of the recording has generations in silver.
    listed = json.loads((recording / "groups_final.json").read_text())["listed"]
    groups = {g["group_id"] for g in listed}
    assert groups
    gens = DeltaTable(str(lake_root / "group_generations")).to_pyarrow_table(columns=["group_id"])
    assert groups <= set(gens.column("group_id").to_pylist())


def test_rematerializing_changes_nothing(materialized):
    _, _, first, snap1, second, snap2 = materialized
    by1 = {o.asset: o for o in first}
    for o in second:
        if o.asset in NOT_TABLES:
            continue
        # Incremental tables add nothing; gold tables (replaced whole) report no "new rows".
        assert o.rows_written in (0, None), o.asset
        assert o.rows_total == by1[o.asset].rows_total, o.asset
    assert snap1 == snap2


def test_metadata_reports_delta_versions(materialized):
    # The second run's figures describe the lake as it is now.
    lake_root, _, _, _, second, _ = materialized
    for o in second:
        if o.asset in NOT_TABLES:
            continue
        if (lake_root / o.asset / "_delta_log").is_dir():
            dt = DeltaTable(str(lake_root / o.asset))
            assert o.delta_version == dt.version(), o.asset
            assert o.rows_total == dt.to_pyarrow_dataset().count_rows(), o.asset
            assert o.columns == pa.schema(dt.schema().to_arrow()).names, o.asset  # the columns Dagster's UI lists
        else:
            assert o.delta_version is None and o.rows_total == 0


def test_quality_checks_run_with_the_assets_and_pass(materialized):
    from assets.checks import CHECK_NAME
    from assets.definitions import ALL_CHECKS
    from quality import SUITES

    _, _, first, _, second, _ = materialized
    tables = {o.asset for o in first}
    expected = {f"{t}:{CHECK_NAME}" for t in tables if t in SUITES}
    for run in (first, second):
        assert {c.name for c in run.checks} == expected
        assert [c.name for c in run.checks if not c.passed] == []
        assert run.not_materialized == []
        # Every check step ran and took time; the figures a run prints come from them.
        steps = {c.node_def.name for c in ALL_CHECKS}
        assert steps <= set(run.step_seconds) and run.check_seconds > 0 and run.asset_seconds > 0
        # Metadata: the suite that ran, and a link to the data docs.
        gens = next(c for c in run.checks if c.asset == "group_generations")
        assert gens.suite == "silver.group_generations"
        assert gens.data_docs.startswith("file://") and gens.data_docs.endswith("index.html")
    lake_root = materialized[0]
    assert (lake_root / "_quality" / "data_docs" / "index.html").is_file()
    # One row per run, table, expectation and cluster in the quality history: the first run's.
    # The second checked the same versions and added nothing.
    runs = {r["run_id"] for r in DeltaTable(str(lake_root / "quality_results")).to_pyarrow_table(columns=["run_id"]).to_pylist()}
    assert len(runs) == 1
    # Cost: a figure for the docs, not an assertion (the machine's load varies too much).
    print(f"\nquality check cost on {RECORDING}: checks {first.check_seconds:.1f} s, assets {first.asset_seconds:.1f} s, "
          f"ratio {first.check_seconds / first.asset_seconds:.2f}")


def test_missing_source_path_fails_with_the_asset_named(tmp_path):
    res = default_resources({})
    res["lake"] = LakeResource(root=str(tmp_path / "lake"))
    res["sources"] = SourcesResource(segment_paths=[str(tmp_path / "no-such-folder")])
    with pytest.raises(MaterializeError, match="bronze_ingest"):
        materialize_all(res)
