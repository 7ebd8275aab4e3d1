"""The simulator against the real Kafka 3.9 recordings: record types/versions, the order of
records around a rebalance, coordinator lines, decodability, determinism, ground truth."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from pipelines.codec import decode_record
from pipelines.logs import parse_text
from pipelines.segments import SegmentRecord, iter_paths
from simulator import ConfigError, SimConfig, partition_for, release, simulate

SHARED = Path(os.environ.get("REBALANCE_AUDIT_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
REC = SHARED / "recordings"

needs_recordings = pytest.mark.skipif(not REC.is_dir(), reason="../shared/recordings not available")


def records(root: Path, kafka_version: str | None = None) -> list[dict]:
    """Every record of a segment tree, decoded by the segment reader + codec; errors raise."""
    out = []
    for item in iter_paths([root]):
        assert isinstance(item, SegmentRecord), f"segment error: {item}"
        b = item.batch
        row = {"partition": b.partition, "offset": item.offset, "ts": item.timestamp, "magic": b.magic,
               "control": b.control, "transactional": b.transactional, "base": b.base_offset,
               "file": str(b.file), "type": None, "version": None, "group": None}
        if not b.control:
            d = decode_record(item.key, item.value, kafka_version=kafka_version)
            k = d["key"]
            row.update(type=k["type"], version=d["value"]["version"] if d["value"] else None,
                       group=k["data"].get("group") or k["data"].get("groupId"), data=d)
        out.append(row)
    return out


def log_events(paths) -> list[dict]:
    out = []
    for path in paths:
        for i, line in enumerate(Path(path).read_text().splitlines(), 1):
            out.append(parse_text(line, line=i))
    return out


def sim(tmp_path_factory, name: str, **kw) -> Path:
    out = tmp_path_factory.mktemp(name)
    base = dict(groups=6, minutes=4, seed=11, churn_per_minute=2.0, offsets_partitions=5)
    base.update(kw)
    simulate(SimConfig(out=str(out), **base))
    return out


@pytest.fixture(scope="module")
def scala39(tmp_path_factory):
    return sim(tmp_path_factory, "s39", kafka_version="3.9")


@pytest.fixture(scope="module")
def java39(tmp_path_factory):
    return sim(tmp_path_factory, "j39", kafka_version="3.9-new", kip848_fraction=0.5, transactional_fraction=0.3,
               brokers=2, replication_factor=2)


# ------------------------------------------------------------------------------ record versions

@needs_recordings
def test_scala_39_writes_the_record_versions_of_the_recording(scala39):
    real = {(r["type"], r["version"], r["magic"]) for r in records(REC / "scale_out_range" / "offsets_segments")}
    simulated = {(r["type"], r["version"], r["magic"]) for r in records(scala39)}
    assert simulated == real  # OffsetCommit v3 + GroupMetadata v3 in batch v2, nothing else


@needs_recordings
def test_new_coordinator_writes_generation_zero_record_like_the_recording(java39):
    def first_group_metadata(rows):
        first = {}
        for r in rows:
            if r["type"] == 2 and r["group"] not in first:
                first[r["group"]] = r["data"]["value"]["data"]
        return first

    real = first_group_metadata(records(REC / "new_coordinator_classic" / "offsets_segments"))
    simulated = first_group_metadata(records(java39))
    assert real and simulated
    for d in list(real.values()) + list(simulated.values()):
        assert (d["generation"], d["protocolType"], d["members"]) == (0, "", [])


@needs_recordings
def test_legacy_and_scala2_versions():
    assert (release("0.9").magic, release("0.9").offset_value_version, release("0.9").group_value_version) == (0, 1, 0)
    assert (release("2.2").group_value_version, release("2.5").group_value_version) == (2, 3)
    with pytest.raises(ConfigError):
        release("1.0")
    with pytest.raises(ConfigError):
        SimConfig(out="x", kafka_version="3.9", kip848_fraction=0.5).validate()


def test_magic0_release_decodes(tmp_path):
    simulate(SimConfig(out=str(tmp_path), groups=3, minutes=2, seed=2, kafka_version="0.9", offsets_partitions=3))
    rows = records(tmp_path)
    assert {(r["type"], r["version"], r["magic"]) for r in rows} == {(1, 1, 0), (2, 0, 0)}
    events = log_events(tmp_path.glob("broker-*/server.log"))
    assert not [e for e in events if e["event"] in ("unrecognized", "error")]


# ------------------------------------------------------------------------------ KIP-848 order

def type_batches(rows, group):
    """Types per batch of one group, in log order, with tombstones marked by a minus sign."""
    batches = defaultdict(list)
    order = []
    for r in rows:
        if r["group"] != group or r["type"] in (None, 1, 2):
            continue
        key = (r["file"], r["base"])
        if key not in batches:
            order.append(key)
        batches[key].append(r["type"] if r["version"] is not None else -r["type"])
    return [batches[k] for k in order]


@needs_recordings
def test_kip848_record_order_matches_recording(java39):
    real = type_batches(records(REC / "kip848_consumer_protocol" / "offsets_segments"), "g-848")
    groups = {json.loads(l)["group_id"] for l in (java39 / "truth" / "groups.jsonl").read_text().splitlines()
              if json.loads(l)["protocol"] == "consumer"}
    assert groups
    rows = records(java39)
    for g in groups:
        simulated = type_batches(rows, g)
        # the creating heartbeat: 5, 4, 3, 7, 6, 8 — as the recording's first join
        assert simulated[0] == real[0] == [5, 4, 3, 7, 6, 8]
        # a member removal: tombstones 8, 7, 5 then the epoch bump; the last one also empties 4
        removals = [b for b in simulated if b and b[0] == -8]
        real_removals = [b for b in real if b and b[0] == -8]
        assert removals and real_removals
        assert {tuple(b) for b in removals} <= {tuple(b) for b in real_removals}
        # later joins: 5, (4 when the group had emptied its topic metadata), 3, 7..., 6, 8
        for b in simulated[1:]:
            if b[0] == 5:
                head = b[1:3] if b[1] == 4 else b[1:2]
                assert head in ([3], [4, 3]) and b[-2:] == [6, 8] and set(b[1 + len(head):-2]) <= {7}


# ------------------------------------------------------------------------------ log lines

REBALANCE_EVENTS = {"rebalance_started", "group_stabilized", "assignment_received"}


@needs_recordings
@pytest.mark.parametrize("fixture,recording", [("scala39", "scale_out_range"), ("java39", "new_coordinator_classic")])
def test_every_line_parses_and_event_set_matches_recording(request, fixture, recording):
    root = request.getfixturevalue(fixture)
    events = log_events(sorted(root.glob("broker-*/server.log")))
    bad = [e for e in events if e["event"] in ("unrecognized", "error")]
    assert not bad, bad[:3]
    real = log_events([REC / recording / "server.log"])
    real_group_events = {e["event"] for e in real if e.get("group_id") == "g-scale"}
    sim_group_events = {e["event"] for e in events if e.get("group_id")}
    assert REBALANCE_EVENTS <= real_group_events
    assert real_group_events <= sim_group_events


def sequence_after_start(events, group):
    """For each rebalance_started of `group`, the next stabilized/assignment events in order."""
    seq, out = [], []
    for e in events:
        if e.get("group_id") != group or e["event"] not in REBALANCE_EVENTS:
            continue
        if e["event"] == "rebalance_started":
            if seq:
                out.append(tuple(seq))
            seq = []
        seq.append(e["event"])
    if seq:
        out.append(tuple(seq))
    return out


@needs_recordings
def test_rebalance_line_order_as_in_recording(scala39):
    real = sequence_after_start(log_events([REC / "scale_out_range" / "server.log"]), "g-scale")
    full = ("rebalance_started", "group_stabilized", "assignment_received")
    assert full in real
    events = log_events(sorted(scala39.glob("broker-*/server.log")))
    for g in {e["group_id"] for e in events if e.get("group_id")}:
        for s in sequence_after_start(events, g):
            # a started rebalance completes as in the recording, or is still open / ends empty
            assert s in (full, ("rebalance_started",)), (g, s)


@needs_recordings
def test_eager_commits_on_revoke_before_new_group_metadata(scala39):
    """Recording: librdkafka commits on revoke, between 'Preparing to rebalance' and the new
    GroupMetadata. The simulator writes them in the same place."""
    def commits_inside(rows, episodes):
        found = 0
        by_group = defaultdict(list)
        for r in rows:
            by_group[r["group"]].append(r)
        for ep in episodes:
            rs = by_group[ep["group"]]
            gm = [r for r in rs if r["type"] == 2 and r["data"]["value"]["data"]["generation"] == ep["to"]]
            if not gm:
                continue
            inside = [r for r in rs if r["type"] == 1 and ep["start"] <= r["ts"] and r["offset"] < gm[0]["offset"]
                      and r["offset"] > ep["after"]]
            found += bool(inside)
        return found

    real_rows = records(REC / "scale_out_range" / "offsets_segments")
    real_eps = []
    for e in log_events([REC / "scale_out_range" / "server.log"]):
        if e["event"] == "rebalance_started" and e["group_id"] == "g-scale" and e["generation"] >= 2:
            real_eps.append({"group": "g-scale", "start": e["ts"], "to": e["generation"] + 1, "after": -1})
    assert commits_inside(real_rows, real_eps) >= 1

    rows = records(scala39)
    groups = {json.loads(l)["group_id"]: json.loads(l) for l in (scala39 / "truth" / "groups.jsonl").read_text().splitlines()}
    eps = []
    for l in (scala39 / "truth" / "episodes.jsonl").read_text().splitlines():
        ep = json.loads(l)
        if groups[ep["group_id"]]["assignor"] != "cooperative-sticky" and ep["trigger"] == "leave" \
                and ep["from_generation"] >= 1 and ep["members_after"]:
            eps.append({"group": ep["group_id"], "start": ep["started_at"], "to": ep["to_generation"], "after": -1})
    assert eps
    assert commits_inside(rows, eps) == len(eps)


# ------------------------------------------------------------------------------ decode, truth

def test_every_record_decodes_with_transactions_replicas_and_compression(tmp_path, java39):
    rows = records(java39, kafka_version="3.9")
    assert any(r["control"] for r in rows) and any(r["transactional"] and not r["control"] for r in rows)
    assert {r["type"] for r in rows} >= {1, 2, 3, 4, 5, 6, 7, 8}
    # both replicas hold the same partitions' bytes
    for f in (java39 / "broker-1").glob("__consumer_offsets-*/*.log"):
        twin = java39 / "broker-2" / f.parent.name / f.name
        assert twin.read_bytes() == f.read_bytes()
    simulate(SimConfig(out=str(tmp_path), groups=3, minutes=2, seed=4, compression="gzip", segment_bytes=4096,
                       offsets_partitions=2))
    rows = records(tmp_path)
    assert rows and len(list(tmp_path.glob("broker-1/__consumer_offsets-*/*.log"))) > 2  # rolled


def test_truth_generations_match_records(scala39):
    rows = records(scala39)
    persisted = Counter((r["group"], r["data"]["value"]["data"]["generation"]) for r in rows if r["type"] == 2)
    truth = Counter()
    for l in (scala39 / "truth" / "generations.jsonl").read_text().splitlines():
        g = json.loads(l)
        truth[(g["group_id"], g["generation"])] += 1
    assert truth == persisted
    for l in (scala39 / "truth" / "reconsumed.jsonl").read_text().splitlines():
        r = json.loads(l)
        assert r["end_offset"] > r["start_offset"] >= 0 and r["cause"] in ("crash", "poll_timeout")


@needs_recordings
def test_coordinator_partition_matches_the_recordings():
    # README: g-scale and g-storm use __consumer_offsets-2, g-848 and g-static -0 (3 partitions).
    assert [partition_for(g, 3) for g in ("g-scale", "g-storm", "g-848", "g-static")] == [2, 2, 0, 0]


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes(tmp_path):
    cfg = dict(groups=4, minutes=3, seed=99, kafka_version="3.9-new", kip848_fraction=0.5, churn_per_minute=2,
               offsets_partitions=4, transactional_fraction=0.5)
    for name in ("a", "b"):
        simulate(SimConfig(out=str(tmp_path / name), **cfg))
    simulate(SimConfig(out=str(tmp_path / "c"), **{**cfg, "seed": 100}))
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert digest(tmp_path / "a") != digest(tmp_path / "c")


def test_continues_a_cluster_log(tmp_path):
    # What bench/bench_busy.py relies on: a second simulation written after the first's offsets
    # (per partition) and clock, so both ingest into one cluster with no overlap and no gap.
    cfg = dict(groups=3, minutes=2, seed=5, offsets_partitions=3)
    simulate(SimConfig(out=str(tmp_path / "first"), **cfg))
    first = records(tmp_path / "first")
    after = {p: max(r["offset"] for r in first if r["partition"] == p) + 1 for p in {r["partition"] for r in first}}
    simulate(SimConfig(out=str(tmp_path / "next"), **{**cfg, "seed": 6, "group_prefix": "next-group",
                                                      "start_ms": SimConfig.start_ms + 180_000,
                                                      "start_offsets": after}))
    following = records(tmp_path / "next")
    for p in {r["partition"] for r in following}:
        offsets = sorted(r["offset"] for r in following if r["partition"] == p)
        assert offsets[0] == after.get(p, 0)  # partitions the first never wrote start at 0
        assert Path(min(r["file"] for r in following if r["partition"] == p)).stem == f"{after.get(p, 0):020d}"
    assert min(r["ts"] for r in following) > max(r["ts"] for r in first)


def test_cli(tmp_path, capsys):
    from rebalance_audit.cli import UsageError
    from rebalance_audit.commands import simulate as cmd

    parser = argparse.ArgumentParser()
    cmd.register(parser.add_subparsers())
    args = parser.parse_args(["simulate", "--out", str(tmp_path / "o"), "--groups", "2", "--minutes", "1"])
    assert args.func(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["commits"] > 0 and (tmp_path / "o" / "broker-1" / "server.log").exists()
    with pytest.raises(UsageError):
        args.func(args)  # not empty any more
    bad = parser.parse_args(["simulate", "--out", str(tmp_path / "p"), "--kafka-version", "1.0"])
    with pytest.raises(UsageError):
        bad.func(bad)
