"""Incremental what-if: a lake built in two increments ends with the same what-if tables as a
from-scratch build of the same recordings, and the second run replays only what changed.

The from-scratch build is the shared recordings lake (every recording a cluster); a cluster's
what-if rows depend only on that cluster's silver rows, so the increments lake (a few of the
recordings) is compared with the shared lake's rows of the same clusters.
"""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from pipelines.ingest.logs import ingest_logs
from pipelines.ingest.segments import ingest_segments
from pipelines.lake import Lake
from pipelines.whatif.assemble import group_histories
from pipelines.whatif.incremental import (
    APP,
    ASSIGNORS_APP,
    COUNTS,
    OUTPUTS,
    _subscribers,
    stored_positions,
    update,
)
from pipelines.whatif.spark_job import (
    WhatifInputs,
    _cluster_maps,
    collect_counts,
    raw_rows,
    topic_count_rows,
    update_whatif,
)
from simulator import SimConfig, simulate
from tests.conftest import RECORDINGS
from tests.recordings_lake import build_silver, halves, load_rows, segments_lake, spark, wire_rows  # noqa: F401
from tests.spark_fixture import spark_jobs
from tests.whatif_history_oracle import history_rows

# A list no other test module uses: the shared lake's what-if tables are rebuilt from scratch for it.
ASSIGNORS = ["sticky", "cooperative-sticky", "uniform"]
FIRST = ["scale_out_range", "storm_flapping"]     # segments and server.log in increment 1
LATE_LOG = "static_membership"                      # segments in increment 1, server.log in increment 2
SECOND = ["kip848_consumer_protocol"]              # everything in increment 2
CLUSTERS = FIRST + [LATE_LOG] + SECOND


def _ingest(lake: Lake, scenario: str, segments: bool = True, log: bool = True) -> None:
    rec = RECORDINGS / scenario
    if segments:
        ingest_segments(lake, [str(rec / "offsets_segments")], cluster=scenario)
    if log:
        ingest_logs(lake, [str(rec / "server.log")], cluster=scenario)


def _rows(lake: Lake, name: str, clusters) -> list[str]:
    rows = [r for r in lake.read_arrow(name).to_pylist() if r["cluster"] in clusters]
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


@pytest.fixture(scope="module")
def increments(tmp_path_factory, spark):  # noqa: F811
    lake = Lake(tmp_path_factory.mktemp("whatif-increments"), spark=spark)
    for s in FIRST:
        _ingest(lake, s)
    _ingest(lake, LATE_LOG, log=False)
    build_silver(lake)
    first = update_whatif(lake, assignors=ASSIGNORS)
    versions = {t: lake.version(t) for t in (*OUTPUTS, COUNTS)}
    _ingest(lake, LATE_LOG, segments=False)
    for s in SECOND:
        _ingest(lake, s)
    build_silver(lake)
    second = update_whatif(lake, assignors=ASSIGNORS)
    return lake, first, second, versions


@pytest.fixture(scope="module")
def scratch(segments_lake):  # noqa: F811
    update_whatif(segments_lake, assignors=ASSIGNORS)
    return segments_lake


@pytest.mark.parametrize("table", OUTPUTS)
def test_two_increments_equal_a_build_from_scratch(increments, scratch, table):
    lake = increments[0]
    got, want = _rows(lake, table, CLUSTERS), _rows(scratch, table, CLUSTERS)
    assert {json.loads(r)["cluster"] for r in got} == set(CLUSTERS)
    assert got == want


def test_second_run_rewrites_only_the_changed_groups(increments):
    lake, first, second, versions = increments
    # The clusters that gained nothing: no data file of theirs was rewritten.
    for table in OUTPUTS:
        added = lake.files_added_since(table, versions[table])
        assert added, table
        assert not [f for f in added if any(f"cluster={c}/" in f for c in FIRST)], table
    summary = lake.read_arrow("whatif_summary").to_pylist()
    replayed = [r for r in summary if r["cluster"] in SECOND + [LATE_LOG]]
    assert second["whatif_summary"] == len(replayed) < len(summary)
    assert first["whatif_summary"] == len([r for r in summary if r["cluster"] in FIRST + [LATE_LOG]])
    # The late server.log gave the static-membership group coordinator-log durations.
    episodes = lake.read_arrow("whatif_episodes").to_pylist()
    assert any(e["cluster"] == LATE_LOG and e["duration_source"] == "coordinator_events" for e in episodes)


def test_positions_are_stored_with_the_rows_and_nothing_new_commits_nothing(increments):
    lake = increments[0]
    positions = stored_positions(lake)
    assert positions[APP + "group_generations"] == lake.version("group_generations")
    assert positions[APP + "coordinator_events"] == lake.version("coordinator_events")
    assert ASSIGNORS_APP in positions
    before = {t: lake.version(t) for t in (*OUTPUTS, COUNTS)}
    assert update_whatif(lake, assignors=ASSIGNORS) == {t: 0 for t in OUTPUTS}
    assert {t: lake.version(t) for t in (*OUTPUTS, COUNTS)} == before


def test_python_assembly_equals_the_spark_join_formulation(segments_lake):  # noqa: F811
    """The per-group assembly (one shuffle) builds the same history rows as the Spark joins."""
    inp = WhatifInputs.from_lake(segments_lake)
    old = defaultdict(list)
    for r in history_rows(inp).collect():
        d = r.asDict()
        old[(d["cluster"], d["group_id"], d["incarnation"], d["kind"])].append(d)
    maps = _cluster_maps(collect_counts(topic_count_rows(inp.member_assignments, inp.offset_commits,
                                                         inp.target_assignments, inp.topic_ids)))
    raw = defaultdict(list)
    for r in raw_rows(inp).collect():
        d = r.asDict()
        raw[(d["cluster"], d["group_id"])].append(d)
    new: dict[tuple, list] = defaultdict(list)
    for (c, g), rows in raw.items():
        for (inc, kind, _segment), hr in group_histories(c, g, rows, has_events=True, has_current=True,
                                                         topic_counts=maps.get(c, ({}, None))[1]).items():
            new[(c, g, inc, kind)] += hr  # the Spark formulation does not split protocol segments
    assert set(new) == set(old) and len(old) > 10
    cols = ["generation", "position", "ts_ms", "protocol", "member_id", "instance_id", "client_id", "topics", "topic",
            "partition", "duration_ms", "duration_source"]
    for key in old:
        def norm(rows):
            return sorted({json.dumps([r[c] for c in cols]) for r in rows})
        assert norm(new[key]) == norm(old[key]), key
        # Commit statistics: the same up to the order Spark's average added them in.
        for col in ("commit_interval_ms", "records_per_partition_s"):
            a, b = old[key][0][col], new[key][0][col]
            assert (a is None) == (b is None) and (a is None or abs(a - b) <= 1e-9 * max(1.0, abs(a))), (key, col)
        # Fallback partition counts: the cluster-wide JSON of the Spark formulation.
        assert json.loads(old[key][0]["_cluster_counts"] or "{}") == maps.get(key[0], ({}, None))[0]


def test_asset_reports_rows_written_and_the_run_mode(increments, tmp_path):
    from dagster import materialize

    from assets.resources import LakeResource, SparkResource
    from assets.whatif import WHATIF_ASSETS, WHATIF_TABLES

    lake = increments[0]

    def run(root, ok=True, **config):
        result = materialize(WHATIF_ASSETS, resources={"lake": LakeResource(root=str(root)), "spark": SparkResource()},
                             run_config={"ops": {"whatif_tables": {"config": config}}}, raise_on_error=False)
        assert result.success == ok
        return {m.asset_key.path[-1]: m.metadata for m in result.asset_materializations_for_node("whatif_tables")}

    meta = run(lake.root, assignors=ASSIGNORS)  # nothing new since the increments
    assert set(meta) == set(WHATIF_TABLES)
    assert all(m["rows_written"].value == 0 and m["whatif_run"].text == "none" for m in meta.values())
    assert meta["whatif_summary"]["rows_total"].value == lake.read_arrow("whatif_summary").num_rows
    empty = run(tmp_path / "empty-lake")
    assert all(m["rows_written"].value == 0 and m["rows_total"].value == 0 for m in empty.values())
    before = {t: lake.version(t) for t in WHATIF_TABLES}
    run(lake.root, ok=False, assignors=["no-such-assignor"])
    assert {t: lake.version(t) for t in WHATIF_TABLES} == before


def test_a_compaction_replays_nothing_and_starts_no_spark_job(increments, spark):  # noqa: F811
    """A cluster ingested live in two parts leaves its commits in two files of one partition;
    `maintain`'s OPTIMIZE merges them: the input's version moves and no row does. The next
    replay finds that in the Delta log, runs no Spark job and commits nothing. (Last in the
    module: it adds a cluster to the increments lake.)"""
    lake = increments[0]
    for part in halves(wire_rows("crash_autocommit")):
        load_rows(lake, part)
        build_silver(lake)
    update_whatif(lake, assignors=ASSIGNORS)
    before = {t: lake.version(t) for t in (*OUTPUTS, COUNTS)}
    compacted = lake.version("offset_commits")
    metrics = lake.optimize("offset_commits")
    assert metrics["numFilesRemoved"] >= 2 and lake.version("offset_commits") > compacted
    jobs, run = spark_jobs(spark, "whatif-after-compaction", lambda: update(lake, ASSIGNORS))
    assert (run.mode, jobs) == ("none", [])
    assert {t: lake.version(t) for t in (*OUTPUTS, COUNTS)} == before


def test_subscribers_of_a_topic_are_the_groups_that_read_its_count(segments_lake):  # noqa: F811
    # Classic subscriptions (member_assignments) and KIP-848 ones (consumer_group_members),
    # per cluster: a topic of the same name in another cluster is another topic.
    inp = WhatifInputs.from_lake(segments_lake)
    assert _subscribers(inp, {"scale_out_range": {"orders"}}) == {
        ("scale_out_range", "g-scale"), ("scale_out_range", "g-scale-neighbor")}
    assert _subscribers(inp, {"multi_topic_sticky": {"mt-b", "no-such-topic"}}) == {("multi_topic_sticky", "g-multi")}
    assert ("kip848_consumer_protocol", "g-848") in _subscribers(inp, {"kip848_consumer_protocol": {"kip848"}})
    assert _subscribers(inp, {"storm_flapping": {"orders"}}) == set()
    assert _subscribers(inp, {}) == set()


def _next_offsets(lake: Lake, cluster: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in lake.read_arrow("offsets_records", columns=["cluster", "partition", "offset"]).to_pylist():
        if r["cluster"] == cluster:
            out[r["partition"]] = max(out.get(r["partition"], 0), r["offset"] + 1)
    return out


def test_new_groups_on_new_topics_replay_only_themselves(tmp_path, spark, monkeypatch):  # noqa: F811
    """A busy cluster's increment: new groups reading new topics (bench/bench_busy.py at a
    small size). The new topics' counts change the cluster's counts, but only the groups
    that subscribe to them read them: the cluster's other groups are not replayed, the
    other cluster's files are not read, and the tables equal a build of everything at once."""
    cfg = dict(minutes=2, offsets_partitions=3, kafka_version="3.9")
    simulate(SimConfig(out=str(tmp_path / "first"), groups=4, seed=11, group_prefix="old-group", **cfg))
    lake = Lake(tmp_path / "increments", spark=spark)
    ingest_segments(lake, [str(tmp_path / "first")], cluster="busy")
    ingest_segments(lake, [str(RECORDINGS / "storm_flapping" / "offsets_segments")], cluster="quiet")
    build_silver(lake)
    assert update(lake, ASSIGNORS).mode == "full"
    simulate(SimConfig(out=str(tmp_path / "next"), groups=2, seed=12, group_prefix="new-group",
                       start_ms=SimConfig.start_ms + 180_000, start_offsets=_next_offsets(lake, "busy"), **cfg))
    ingest_segments(lake, [str(tmp_path / "next")], cluster="busy")
    build_silver(lake)
    read = []
    from_lake = WhatifInputs.from_lake.__func__  # type: ignore[attr-defined]

    def recorded(cls, lake, clusters=None):
        inp = from_lake(cls, lake, clusters)
        read.extend(inp.offset_commits.inputFiles() + inp.member_assignments.inputFiles())
        return inp

    monkeypatch.setattr(WhatifInputs, "from_lake", classmethod(recorded))
    run = update(lake, ASSIGNORS)
    assert read and all("cluster=busy" in f for f in read)
    summary = [r for r in lake.read_arrow("whatif_summary").to_pylist() if r["cluster"] == "busy"]
    new = {r["group_id"] for r in summary if r["group_id"].startswith("new-group")}
    assert len(new) == 2 and len({r["group_id"] for r in summary}) == 6
    assert (run.mode, run.clusters_replayed_whole, run.groups) == ("incremental", [], len(new))
    assert run.rows_written["whatif_summary"] == len([r for r in summary if r["group_id"] in new])

    scratch = Lake(tmp_path / "scratch", spark=spark)
    ingest_segments(scratch, [str(tmp_path / "first"), str(tmp_path / "next")], cluster="busy")
    build_silver(scratch)
    update(scratch, ASSIGNORS)
    for table in OUTPUTS:
        assert _rows(lake, table, ["busy"]) == _rows(scratch, table, ["busy"]), table
