"""Incremental gold equals a rebuild from scratch, and the lake does not depend on the order
its records arrive in.

A lake gets real recordings in two increments: first the earlier half of each recording's
`__consumer_offsets` records (per partition, as librdkafka read them), then the rest plus
a coordinator log. Gold runs after each; the second run recomputes only the touched
groups. Every gold table is then compared, as a sorted row set, with a forced full rebuild
of the same silver. A third run with nothing new commits nothing.

A second lake gets the same records the other way round: the later halves first, then the
earlier ones, as a backfill of old segments after live ingestion (or another broker's older
segments) brings them. The compacted recording deletes a group (a tombstone in the later
half) that has a generation in the earlier half: numbered in arrival order, that generation
would belong to the incarnation after the deletion. Every table of both lakes is compared.
"""
from __future__ import annotations

import re

import pytest
from spark_fixture import spark  # noqa: F401

from assets.maintenance import maintain_job
from assets.resources import LakeResource, SparkResource
from pipelines.gold import GoldParams, runner
from pipelines.gold import incremental as gold_plan
from pipelines.ingest.logs import ingest_logs
from pipelines.lake import Lake
from pipelines.lake.compare import table_rows
from pipelines.silver import runner as silver
from tests.conftest import RECORDINGS
from tests.recordings_lake import halves, wire_rows
from tests.recordings_lake import load_rows as ingest

pytestmark = pytest.mark.spark

# Classic eager + crash (with its server.log in the second part), cooperative, KIP-848,
# a storm, a group deleted and recreated; idle_overprovisioned is complete in the first part (must stay untouched).
SPLIT = ("crash_autocommit", "cooperative_rolling", "kip848_consumer_protocol", "storm_flapping",
         "compressed_compacted")
WHOLE_FIRST = ("idle_overprovisioned",)
# A cluster the lake first sees in the second increment (gold takes a shortcut for it).
WHOLE_SECOND = ("poll_timeout",)
# Storm parameters at the recordings' minute-long scale (see docs/gold.md).
PARAMS = GoldParams(storm_min_rebalances=10, storm_window_minutes=1.0)


def build_silver(lake: Lake) -> None:
    silver.update_offsets_silver(lake)
    silver.update_events_silver(lake)
    silver.update_target_assignments(lake)


def snapshot(lake: Lake) -> dict[str, list[str]]:
    return {t: sorted(map(repr, (sorted(r.items()) for r in lake.read_arrow(t).to_pylist()))) for t in runner.GOLD_TABLES}


def increments() -> tuple[list[dict], list[dict]]:
    first, second = [], []
    for s in SPLIT:
        a, b = halves(wire_rows(s))
        first += a
        second += b
    for s in WHOLE_FIRST:
        first += wire_rows(s)
    for s in WHOLE_SECOND:
        second += wire_rows(s)
    return first, second


def ingest_all_logs(lake: Lake) -> None:
    for s in (*WHOLE_FIRST, "crash_autocommit", *WHOLE_SECOND):
        ingest_logs(lake, [str(RECORDINGS / s / "server.log")], cluster=s)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, spark):  # noqa: F811
    lake = Lake(tmp_path_factory.mktemp("gold-incremental"), spark=spark)
    first, second = increments()
    ingest(lake, first)
    # Coordinator events exist from the start (a new input table forces a full rebuild).
    ingest_logs(lake, [str(RECORDINGS / s / "server.log") for s in WHOLE_FIRST], cluster=WHOLE_FIRST[0])
    build_silver(lake)
    run1 = runner.update_gold(lake, PARAMS)
    versions1 = {t: lake.version(t) for t in runner.GOLD_TABLES}
    untouched = {t: [r for r in lake.read_arrow(t).to_pylist() if r["cluster"] in WHOLE_FIRST] for t in runner.GOLD_TABLES}

    ingest(lake, second)
    ingest_logs(lake, [str(RECORDINGS / "crash_autocommit" / "server.log")], cluster="crash_autocommit")
    for s in WHOLE_SECOND:
        ingest_logs(lake, [str(RECORDINGS / s / "server.log")], cluster=s)
    build_silver(lake)
    _, fresh = gold_plan._cluster_changes(lake, gold_plan.plan(lake, runner.GOLD_TABLES, PARAMS, None))
    run2 = runner.update_gold(lake, PARAMS)
    incremental = snapshot(lake)
    versions2 = {t: lake.version(t) for t in runner.GOLD_TABLES}

    run3 = runner.update_gold(lake, PARAMS)
    versions3 = {t: lake.version(t) for t in runner.GOLD_TABLES}

    full = runner.update_gold(lake, PARAMS, full=True)
    rebuilt = snapshot(lake)
    return {"lake": lake, "run1": run1, "run2": run2, "run3": run3, "full": full, "incremental": incremental,
            "rebuilt": rebuilt, "versions": (versions1, versions2, versions3), "untouched": untouched,
            "fresh": fresh}


def test_first_run_is_full_and_second_incremental(runs):
    assert runs["run1"].mode == "full"
    assert runs["run2"].mode == "incremental", runs["run2"].reason
    # Only the groups of the split recordings were recomputed, not idle_overprovisioned's.
    lake = runs["lake"]
    groups = {(r["cluster"], r["group_id"]) for t in ("offset_commits", "group_generations", "consumer_group_epochs")
              for r in lake.read_arrow(t, columns=["cluster", "group_id"]).to_pylist()}
    split = {g for g in groups if g[0] in SPLIT + WHOLE_SECOND}
    assert len(split) < len(groups)
    assert 0 < runs["run2"].groups <= len(split)
    v1, v2, _ = runs["versions"]
    assert all(v2[t] == v1[t] + 1 for t in runner.GOLD_TABLES)  # one commit per table


def test_a_cluster_new_to_the_lake_is_told_apart_from_the_log(runs):
    # Its groups come from its new rows alone; the other clusters keep every cross-group rule.
    assert runs["fresh"] == set(WHOLE_SECOND)
    assert {r["cluster"] for r in runs["lake"].read_arrow("ownership_intervals", columns=["cluster"]).to_pylist()} \
        >= set(WHOLE_SECOND)


def test_incremental_equals_full_rebuild(runs):
    for t in runner.GOLD_TABLES:
        assert runs["incremental"][t] == runs["rebuilt"][t], t
    # Not vacuous: the second part added findings (the crash's duplicate window, the storm, ...).
    assert runs["rebuilt"]["duplicate_windows"] and runs["rebuilt"]["rebalance_storms"]


def test_untouched_cluster_rows_are_unchanged(runs):
    lake = runs["lake"]
    for t in runner.GOLD_TABLES:
        now = [r for r in lake.read_arrow(t).to_pylist() if r["cluster"] in WHOLE_FIRST]
        assert sorted(map(repr, now)) == sorted(map(repr, runs["untouched"][t])), t


def test_positions_are_recorded_and_a_run_without_new_input_commits_nothing(runs):
    lake = runs["lake"]
    _, v2, v3 = runs["versions"]
    assert runs["run3"].mode == "none"
    assert v3 == v2
    for t in runner.GOLD_TABLES:
        pos = lake.positions(t, "gold")
        assert pos["gold:offset_commits"] == lake.version("offset_commits")
        assert pos["gold:coordinator_events"] == lake.version("coordinator_events")
        assert "gold:params" in pos and "gold:cluster_settings" in pos


def test_rows_written_come_from_the_commits(runs):
    lake = runs["lake"]
    full = runs["full"]
    assert full.mode == "full"
    for t in runner.GOLD_TABLES:
        assert full.rows_written[t] == lake.read_arrow(t, columns=[]).num_rows, t


def test_weekly_maintenance_changes_no_row_and_leaves_the_next_run_nothing_to_do(runs):
    # Dagster's maintain_lake job: OPTIMIZE and VACUUM (delta-spark) on the tables gold reads
    # and writes (all of them would take minutes more on 2 cores; the ledger's pruning after
    # a whole-lake run: test_lake_ops).
    lake = runs["lake"]
    before = snapshot(lake)
    chosen = [t for t in (*gold_plan.TRACKED, *runner.GOLD_TABLES) if lake.exists(t)]
    files = {t: len(lake.table(t).file_uris()) for t in chosen}
    versions = {t: lake.version(t) for t in chosen}
    result = maintain_job.execute_in_process(
        run_config={"ops": {"maintain_tables": {"config": {"tables": chosen}}}},
        resources={"lake": LakeResource(root=lake.root), "spark": SparkResource()})
    assert result.success
    after = {t: len(lake.table(t).file_uris()) for t in chosen}
    assert all(after[t] <= files[t] for t in files) and sum(after.values()) < sum(files.values()), (files, after)
    compacted = {t for t in chosen if lake.version(t) > versions[t]}
    assert "offsets_records" in compacted and set(runner.GOLD_TABLES) & compacted, compacted
    # Silver and gold find nothing new: the compactions are no change to them.
    silver_versions = {t: lake.version(t) for t in (*gold_plan.GROUP_INPUTS, "target_assignments") if lake.exists(t)}
    build_silver(lake)
    assert {t: lake.version(t) for t in silver_versions} == silver_versions
    again = runner.update_gold(lake, PARAMS)
    assert again.mode == "none", again.reason
    assert snapshot(lake) == before


def test_a_gold_of_another_format_is_rebuilt_whole(runs, monkeypatch):
    # A lake written before gold's columns changed (e.g. before episodes had unconsumed_ms):
    # an incremental run would fill the new columns only for the groups with new input.
    lake = runs["lake"]
    assert gold_plan.plan(lake, runner.GOLD_TABLES, PARAMS, None).mode == "none"
    monkeypatch.setattr(gold_plan, "FORMAT", gold_plan.FORMAT + 1)
    p = gold_plan.plan(lake, runner.GOLD_TABLES, PARAMS, None)
    assert p.mode == "full" and "format" in p.reason, p.reason
    assert p.positions[gold_plan.FORMAT_ID] == gold_plan.FORMAT


def test_changed_params_rebuild_everything(runs):
    lake = runs["lake"]
    other = GoldParams(storm_min_rebalances=3, storm_window_minutes=1.0)
    run = runner.update_gold(lake, other)
    assert run.mode == "full" and "parameters" in run.reason
    # The new parameters took effect everywhere: a lower storm threshold flags more.
    after = snapshot(lake)
    assert len(after["rebalance_storms"]) > len(runs["rebuilt"]["rebalance_storms"])
    # Storms change, and their count in group_summary; nothing else.
    storms = ("rebalance_storms", "group_summary")
    assert {t: v for t, v in after.items() if t not in storms} == \
        {t: v for t, v in runs["rebuilt"].items() if t not in storms}
    assert _without(after["group_summary"], "storms") == _without(runs["rebuilt"]["group_summary"], "storms")


def _without(rows: list[str], column: str) -> list[str]:
    """`snapshot` rows (reprs of sorted (column, value) pairs) without one column."""
    pair = re.compile(r"\('" + re.escape(column) + r"', [^()]*\)(, )?")
    return sorted(pair.sub("", r) for r in rows)


# When a row arrived, by nature different between two lakes fed in different orders.
ARRIVAL = {"ingested_at", "ingest_version", "source_file"}


@pytest.fixture(scope="module")
def backfilled(runs, tmp_path_factory, spark):  # noqa: F811
    lake = Lake(tmp_path_factory.mktemp("backfilled"), spark=spark)
    first, second = increments()
    ingest(lake, second)
    ingest_all_logs(lake)
    build_silver(lake)
    runner.update_gold(lake, PARAMS)
    ingest(lake, first)
    build_silver(lake)
    runner.update_gold(lake, PARAMS)
    return lake


def test_a_backfill_renumbers_the_incarnations_it_comes_before(backfilled):
    gens = [r for r in backfilled.read_arrow("group_generations").to_pylist()
            if (r["cluster"], r["group_id"]) == ("compressed_compacted", "g-cmp-b")]
    deleted_at = min(r["log_offset"] for r in gens if r["is_deletion"])
    early = {r["incarnation"] for r in gens if r["log_offset"] < deleted_at}
    assert early == {0}, sorted((r["log_offset"], r["incarnation"]) for r in gens)


def test_every_table_is_the_same_whatever_order_the_records_arrive_in(runs, backfilled):
    lake = runs["lake"]
    assert sorted(lake.tables()) == sorted(backfilled.tables())
    assert {t: v for t, v in snapshot(backfilled).items()} == runs["rebuilt"]
    for name in set(lake.tables()) - set(runner.GOLD_TABLES):
        assert table_rows(lake, name, ARRIVAL) == table_rows(backfilled, name, ARRIVAL), name
