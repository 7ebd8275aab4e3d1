"""What-if replay on the real recordings: the group's own assignor reproduces its history.

One lake holds every recording (cluster = scenario name), built the way users build it
(ingest segments + server.log, silver runner), and `update_whatif` writes the what-if tables
once for all of them through Spark. The real assignments are checked against Kafka's own
decoding of the recordings (`dump_offsets_decoder.txt`), not against our silver tables.
"""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from pipelines.codec.dumpfmt import parse_dump_offsets_decoder
from pipelines.whatif.history import build_history
from pipelines.whatif.replay import actual, replay
from pipelines.whatif.spark_job import WhatifInputs, update_whatif
from tests.conftest import RECORDINGS
from tests.recordings_lake import SCENARIOS, segments_lake, spark  # noqa: F401
from tests.whatif_history_oracle import history_rows

ASSIGNORS = ["range", "cooperative-sticky", "uniform", "central-handoff"]

# Divergences of the replay with the group's own assignor, and why:
# * cooperative_rolling: the members are librdkafka, whose cooperative-sticky is its own C
#   port of the original (general) sticky algorithm; Kafka 3.9's Java assignor takes the
#   constrained path for equal subscriptions and breaks ties differently. At generation 2
#   (c1 owns all 8 partitions, c2 and c3 join) librdkafka lets c1 keep stream-5..7, Java keeps
#   stream-0..2. Every later generation differs in *which* partitions, never in how many per
#   member, how many move or are revoked, or in the rounds the handover takes.
# Every other group (librdkafka range / roundrobin, Java sticky, KIP-848 uniform on the
# broker) is reproduced partition for partition in every generation.
COOPERATIVE_LIBRDKAFKA = {("cooperative_rolling", "g-coop")}


@pytest.fixture(scope="module")
def lake(segments_lake):  # noqa: F811
    """The shared recordings lake (every recording a cluster, silver built) plus the what-if tables."""
    segments_lake.written = update_whatif(segments_lake, assignors=ASSIGNORS)
    return segments_lake


@pytest.fixture(scope="module")
def summary(lake):
    return lake.read_arrow("whatif_summary").to_pylist()


@pytest.fixture(scope="module")
def episodes(lake):
    return lake.read_arrow("whatif_episodes").to_pylist()


@pytest.fixture(scope="module")
def histories(lake):
    """(cluster, group) → GroupHistory, built on the driver from the same history rows."""
    rows = defaultdict(list)
    for r in history_rows(WhatifInputs.from_lake(lake)).collect():
        d = r.asDict()
        rows[(d["cluster"], d["group_id"], d["incarnation"], d["kind"])].append(d)
    out = {}
    for key, rs in rows.items():
        out[(key[0], key[1])] = build_history(rs, json.loads(rs[0]["_cluster_counts"] or "{}"))
    return out


def _kafka_generations(scenario: str) -> dict:
    """group → generation → {member: set((topic, p))}, from Kafka's DumpLogSegments output (log order)."""
    out: dict = defaultdict(dict)
    for rec in parse_dump_offsets_decoder(RECORDINGS / scenario / "dump_offsets_decoder.txt").values():
        key = rec.get("key")
        if not key or int(key["type"]) != 2 or rec.get("value") is None:
            continue
        data = rec["value"]["data"]
        members = {}
        for m in data["members"]:
            parts = set()
            if isinstance(m["assignment"], dict):
                for tp in m["assignment"].get("assignedPartitions", []):
                    parts |= {(tp["topic"], p) for p in tp["partitions"]}
            members[m["memberId"]] = parts
        # A generation written twice (a static member replaced) keeps its first record: that
        # one is the rebalance's assignment; the rewrite only renames a member.
        out[key["data"]["group"]].setdefault(data["generation"], members)
    return out


def _parts(assignment_json: str) -> dict:
    return {m: {(tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1])) for tp in parts}
            for m, parts in json.loads(assignment_json).items()}


def test_every_recording_and_assignor_is_in_the_tables(lake, summary):
    clusters = {r["cluster"] for r in summary}
    assert clusters == set(SCENARIOS)
    for (cluster, group), rows in _by_group(summary).items():
        names = {r["assignor"] for r in rows}
        assert set(ASSIGNORS) | {"actual"} <= names, (cluster, group)
    assert lake.written["whatif_summary"] == len(summary)


def _by_group(rows):
    out = defaultdict(list)
    for r in rows:
        out[(r["cluster"], r["group_id"])].append(r)
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_own_assignor_reproduces_kafkas_assignments(scenario, summary, episodes):
    kafka = _kafka_generations(scenario)
    checked = 0
    for r in summary:
        if r["cluster"] != scenario or r["real_assignor"] is None or r["assignor"] != r["real_assignor"]:
            continue
        divergences = json.loads(r["divergence_list"])
        if (scenario, r["group_id"]) in COOPERATIVE_LIBRDKAFKA:
            assert {d["kind"] for d in divergences} == {"assignment"}
            assert min(d["generation"] for d in divergences) == 2
            continue
        assert divergences == [], (r["group_id"], divergences[:3])
        # Independently: each replayed generation equals what Kafka persisted for it.
        for e in episodes:
            if e["cluster"] == scenario and e["group_id"] == r["group_id"] and e["assignor"] == r["assignor"] \
                    and r["group_kind"] == "classic":
                assert _parts(e["assignment"]) == kafka[r["group_id"]][e["generation"]], (r["group_id"], e["generation"])
                checked += 1
    if any(g in kafka and kafka[g] for g in {r["group_id"] for r in summary if r["cluster"] == scenario and r["group_kind"] == "classic" and r["real_assignor"] not in (None, "cooperative-sticky")}):
        assert checked > 0


def test_librdkafka_cooperative_sticky_differs_only_in_which_partitions(histories):
    hist = histories[("cooperative_rolling", "g-coop")]
    real = actual(hist)
    for follow_real in (False, True):
        rep = replay(hist, "cooperative-sticky", follow_real=follow_real)
        assert [(r.generation, r.phase) for r in rep.rounds] == [(r.generation, r.phase) for r in real.rounds]
        for a, b in zip(rep.rounds, real.rounds):
            assert sorted(map(len, a.assignment.values())) == sorted(map(len, b.assignment.values())), a.generation
            assert (a.moved, a.revoked, a.idle_members) == (b.moved, b.revoked, b.idle_members), a.generation
    first = replay(hist, "cooperative-sticky").rounds[1]
    c1 = next(m for m in first.assignment if m.startswith("c1-"))
    assert first.generation == 2
    assert sorted(first.assignment[c1]) == [("stream", 0), ("stream", 1), ("stream", 2)]
    assert sorted(next(m.assigned for m in hist.steps[1].members if m.member_id == c1)) == \
        [("stream", 5), ("stream", 6), ("stream", 7)]


def test_kip848_group_replays_per_member_reconciliation(summary, episodes, histories):
    hist = histories[("kip848_consumer_protocol", "g-848")]
    assert hist.kind == "consumer" and hist.real_assignor == "uniform"
    own = [e for e in episodes if e["group_id"] == "g-848" and e["assignor"] == "uniform"]
    assert own and all(e["phase"] == "reconcile" and e["protocol"] == "consumer" for e in own)
    # One round per target epoch: no second generation for a handover.
    assert [e["generation"] for e in sorted(own, key=lambda e: e["round"])] == [s.generation for s in hist.steps]
    assert all(e["matches_actual"] for e in own)
    # Reconciliation revokes only what moves; eager range revokes everything members own.
    s = {r["assignor"]: r for r in summary if r["group_id"] == "g-848"}
    assert s["uniform"]["revoked"] <= s["uniform"]["moved"] < s["range"]["revoked"]


def test_eager_replay_revokes_everything_cooperative_only_what_moves(summary):
    s = {r["assignor"]: r for r in summary if r["cluster"] == "storm_flapping" and r["group_id"] == "g-storm"}
    assert s["range"]["revoked"] == s["actual"]["revoked"]
    assert s["cooperative-sticky"]["revoked"] < s["range"]["revoked"]
    assert s["cooperative-sticky"]["stw_partition_seconds"] < s["range"]["stw_partition_seconds"]
    # Every flapper join moved partitions of all stable members under range (README, scenario 5).
    assert s["range"]["moved"] > s["cooperative-sticky"]["moved"]


def test_durations_come_from_the_coordinator_log_where_present(episodes):
    rows = [e for e in episodes if e["cluster"] == "scale_out_range" and e["group_id"] == "g-scale" and e["assignor"] == "actual"]
    assert rows and all(e["duration_source"] == "coordinator_events" and e["duration_ms"] >= 0 for e in rows)


def test_cli_prints_the_comparison_for_one_group(lake, capsys):
    from rebalance_audit.cli import main

    rc = main(["whatif", "--lake", lake.root, "--cluster", "scale_out_range", "--group", "g-scale",
               "--assignors", "range,cooperative-sticky", "--format", "json"])
    assert rc == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    rows = {r["assignor"]: r for r in lines if r["record"] == "summary"}
    assert set(rows) == {"actual", "range", "cooperative-sticky"}
    assert all(r["group_id"] == "g-scale" and r["cluster"] == "scale_out_range" for r in rows.values())
    assert rows["range"]["divergences"] == 0 and rows["range"]["moved"] == rows["range"]["actual_moved"]
    assert rows["cooperative-sticky"]["revoked"] < rows["range"]["revoked"]


def test_cli_unknown_group_is_a_one_line_failure(lake, capsys):
    from rebalance_audit.cli import main

    assert main(["whatif", "--lake", lake.root, "--group", "no-such-group", "--assignors", "range"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-group" in err[0]


def test_rerun_replaces_each_clusters_rows(lake, summary):
    # Runs last in this module: it rewrites the tables the fixtures above read.
    before = {(r["cluster"], r["group_id"], r["assignor"]) for r in summary}
    written = update_whatif(lake, assignors=["roundrobin"])
    after = lake.read_arrow("whatif_summary").to_pylist()
    keys = [(r["cluster"], r["group_id"], r["incarnation"], r["assignor"]) for r in after]
    assert len(keys) == len(set(keys)) == written["whatif_summary"]
    assert {r["cluster"] for r in after} == {c for c, _, _ in before}
    assert "central-handoff" not in {r["assignor"] for r in after}
    assert {"actual", "roundrobin"} <= {r["assignor"] for r in after}
