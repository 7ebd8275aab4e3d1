"""Silver tables built from each recording agree with what Kafka and the consumers recorded.

Independent truths used here: Kafka's own decoding (`dump_offsets_decoder.txt`, parsed
without our codec's value decoder), the group state Kafka reported at the end
(`groups_final.json`), and the consumers' own ground truth (`consumers/*.jsonl`).
"""
from __future__ import annotations

import json
from collections import defaultdict

import pytest
from pyspark.sql import functions as F

from pipelines.codec.dumpfmt import parse_dump_offsets_decoder
from pipelines.silver import runner
from tests.conftest import RECORDINGS
from tests.recordings_lake import SCENARIOS, WIRE_SCENARIOS, build_silver, segments_lake, spark, wire_lake  # noqa: F401

# Compaction removed commits (and generations) these scenarios' consumers saw succeed.
COMPACTED = {"compressed_compacted", "compressed_lz4", "compressed_zstd"}


def _dump_groups(scenario: str) -> dict:
    """group → (partition, offset) of each GroupMetadata record → (generation, {member: set((topic, p))}),
    from Kafka's own decoding (a static member's replacement writes a generation twice)."""
    out: dict = defaultdict(dict)
    for pos, rec in parse_dump_offsets_decoder(RECORDINGS / scenario / "dump_offsets_decoder.txt").items():
        key = rec.get("key")
        if not key or int(key["type"]) != 2 or rec.get("value") is None:
            continue
        data = rec["value"]["data"]
        members = {}
        for m in data["members"]:
            asg = m["assignment"]
            parts = set()
            if isinstance(asg, dict):
                for tp in asg.get("assignedPartitions", []):
                    parts |= {(tp["topic"], p) for p in tp["partitions"]}
            members[m["memberId"]] = parts
        out[key["data"]["group"]][pos] = (data["generation"], members)
    return out


def _silver(lake, table: str, scenario: str):
    return lake.read(table).where(F.col("cluster") == scenario)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_generations_members_and_assignments_match_kafkas_decoding(segments_lake, scenario):
    expected = _dump_groups(scenario)
    rows = _silver(segments_lake, "member_assignments", scenario).select(
        "group_id", "coordinator_partition", "log_offset", "generation", "member_id", "topic", "partition"
    ).collect()
    got: dict = defaultdict(dict)
    for r in rows:
        gen, members = got[r.group_id].setdefault((r.coordinator_partition, r.log_offset), (r.generation, {}))
        parts = members.setdefault(r.member_id, set())
        if r.topic is not None:
            parts.add((r.topic, r.partition))
    gens = _silver(segments_lake, "group_generations", scenario).where("NOT is_deletion").select(
        "group_id", "coordinator_partition", "log_offset", "generation", "member_count"
    ).collect()
    got_gens = defaultdict(dict)
    for g in gens:
        got_gens[g.group_id][(g.coordinator_partition, g.log_offset)] = g.generation
    assert set(got_gens) == set(expected)
    for group, records in expected.items():
        assert got_gens[group] == {pos: gen for pos, (gen, _) in records.items()}, group
        for pos, (gen, members) in records.items():
            # Empty generations (members=[]) have no member rows.
            assert got[group].get(pos, (gen, {})) == (gen, members), (group, pos)


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - COMPACTED))
def test_every_successful_consumer_commit_is_in_offset_commits(segments_lake, scenario):
    have = {
        (r.group_id, r.topic, r.partition, r.offset)
        for r in _silver(segments_lake, "offset_commits", scenario).where("NOT is_deletion").select("group_id", "topic", "partition", "offset").collect()
    }
    missing, checked = [], 0
    for path in (RECORDINGS / scenario / "consumers").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            ev = json.loads(line)
            if ev.get("event") == "commit" and ev.get("result") == "ok":
                for o in ev.get("offsets") or []:
                    if o.get("error") is None and o.get("offset", -1) >= 0:
                        checked += 1
                        if (ev["group"], o["topic"], o["partition"], o["offset"]) not in have:
                            missing.append((ev["group"], o["topic"], o["partition"], o["offset"]))
    assert not missing, f"{len(missing)} of {checked} acknowledged commits missing, e.g. {missing[:5]}"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_final_committed_offsets_match_the_groups_kafka_reported(segments_lake, scenario, spark):
    final = json.loads((RECORDINGS / scenario / "groups_final.json").read_text())
    expected = {
        (group, t, p): o
        for group, offsets in (final.get("committed_offsets") or {}).items()
        for t, p, o in offsets
    }
    _silver(segments_lake, "offset_commits", scenario).createOrReplaceTempView("oc")
    latest = spark.sql(
        """
        SELECT group_id, topic, partition, max_by(offset, effective_log_offset) AS offset,
               max_by(is_deletion, effective_log_offset) AS deleted
        FROM oc GROUP BY group_id, topic, partition
        """
    ).collect()
    got = {(r.group_id, r.topic, r.partition): r.offset for r in latest if not r.deleted}
    for key, offset in expected.items():
        assert got.get(key) == offset, key


def test_transactional_commits_take_effect_at_commit_markers_and_aborts_are_dropped(segments_lake):
    rows = _silver(segments_lake, "offset_commits", "transactional_commits").where("group_id = 'g-txn'").collect()
    assert rows and all(r.effective_log_offset > r.log_offset for r in rows)
    committed, aborted = set(), set()
    for path in (RECORDINGS / "transactional_commits" / "consumers").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            ev = json.loads(line)
            if ev.get("event") in ("txn_commit", "txn_abort"):
                target = committed if ev["event"] == "txn_commit" else aborted
                for o in ev.get("offsets") or []:
                    target.add((o["topic"], o["partition"], o["offset"]))
    got = {(r.topic, r.partition, r.offset) for r in rows}
    assert got == committed
    assert not (got & (aborted - committed))
    assert not segments_lake.exists(runner.OPEN_TXN) or segments_lake.read(runner.OPEN_TXN).count() == 0


@pytest.mark.parametrize("table", ["group_generations", "member_assignments", "offset_commits", "current_assignments", "target_assignments"])
def test_segments_and_wire_give_the_same_silver_tables(segments_lake, wire_lake, table):
    cols = {
        "group_generations": ["cluster", "group_id", "incarnation", "generation", "protocol", "leader", "member_count", "log_offset"],
        "member_assignments": ["cluster", "group_id", "generation", "member_id", "client_id", "topic", "partition", "log_offset"],
        "offset_commits": ["cluster", "group_id", "topic", "partition", "offset", "is_deletion", "effective_log_offset"],
        "current_assignments": ["cluster", "group_id", "member_id", "member_epoch", "state", "topic_id", "partition", "log_offset"],
        "target_assignments": ["cluster", "group_id", "assignment_epoch", "member_id", "topic", "partition"],
    }[table]
    seg = segments_lake.read(table).where(F.col("cluster").isin(WIRE_SCENARIOS)).select(*cols)
    wire = wire_lake.read(table).select(*cols)
    a, b = sorted(map(tuple, seg.collect()), key=repr), sorted(map(tuple, wire.collect()), key=repr)
    assert a and a == b


def test_rerunning_silver_changes_nothing(segments_lake):
    lake = segments_lake
    tables = ("offset_commits", "group_generations", "member_assignments", "coordinator_events", "target_assignments")
    before = {t: sorted(map(tuple, lake.read(t).drop("ingest_version").collect()), key=repr) for t in tables}
    build_silver(lake)
    assert {t: sorted(map(tuple, lake.read(t).drop("ingest_version").collect()), key=repr) for t in tables} == before
    assert before["coordinator_events"]
