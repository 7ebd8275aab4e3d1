"""Silver tables built from each recording agree with what Kafka and the consumers recorded.

Independent truths used here: Kafka's own decoding (`dump_offsets_decoder.txt`, parsed
without our codec's value decoder), the group state Kafka reported at the end
(`groups_final.json`), and the consumers' own ground truth (`consumers/*.jsonl`).
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.codec.dumpfmt import parse_dump_offsets_decoder
from pipelines.ingest.logs import ingest_logs
from pipelines.ingest.schemas import OFFSETS_RECORDS, ensure
from pipelines.ingest.segments import ingest_segments
from pipelines.lake import Lake
from pipelines.silver import runner
from tests.conftest import RECORDINGS

SCENARIOS = sorted(p.name for p in RECORDINGS.iterdir() if (p / "offsets_segments").is_dir()) if RECORDINGS.is_dir() else []
# Compaction removed commits (and generations) these scenarios' consumers saw succeed.
COMPACTED = {"compressed_compacted", "compressed_lz4", "compressed_zstd"}


@pytest.fixture(scope="module")
def spark():
    from pipelines.spark import get_spark

    return get_spark("local[2]")


def _build(lake_dir: Path, scenario: str, source: str, spark) -> Lake:
    lake = Lake(lake_dir, spark=spark)
    rec = RECORDINGS / scenario
    if source == "segments":
        ingest_segments(lake, [str(rec / "offsets_segments")])
    else:
        _load_wire(lake, rec / "offsets_records.jsonl")
    ingest_logs(lake, [str(rec / "server.log")])
    runner.update_offsets_silver(lake)
    runner.update_events_silver(lake)
    runner.rebuild_target_assignments(lake)
    return lake


def _load_wire(lake: Lake, path: Path) -> None:
    """Bronze from the records as librdkafka delivered them (no batch facts)."""
    rows = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        rows.append(
            {
                "cluster": "default",
                "partition": r["partition"],
                "offset": r["offset"],
                "timestamp": r["timestamp_ms"],
                "key": bytes.fromhex(r["key_hex"]),
                "value": None if r["value_hex"] is None else bytes.fromhex(r["value_hex"]),
                "source": "kafka",
            }
        )
    ensure(lake, OFFSETS_RECORDS)
    table = pa.Table.from_pylist(rows)
    lake.insert_if_absent(OFFSETS_RECORDS.name, table, key=list(OFFSETS_RECORDS.key), range_column="offset")


@pytest.fixture(scope="module")
def lakes(tmp_path_factory, spark):
    built: dict[tuple[str, str], Lake] = {}

    def get(scenario: str, source: str = "segments") -> Lake:
        if (scenario, source) not in built:
            built[(scenario, source)] = _build(tmp_path_factory.mktemp(f"{scenario}-{source}"), scenario, source, spark)
        return built[(scenario, source)]

    return get


def _dump_groups(scenario: str) -> dict:
    """group → generation → {member: set((topic, p))} from Kafka's own decoding."""
    out: dict = defaultdict(dict)
    for rec in parse_dump_offsets_decoder(RECORDINGS / scenario / "dump_offsets_decoder.txt").values():
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
        out[key["data"]["group"]][data["generation"]] = members
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_generations_members_and_assignments_match_kafkas_decoding(lakes, scenario):
    lake = lakes(scenario)
    expected = _dump_groups(scenario)
    rows = lake.read("member_assignments").select("group_id", "generation", "member_id", "topic", "partition").collect()
    got: dict = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        parts = got[r.group_id][r.generation].setdefault(r.member_id, set())
        if r.topic is not None:
            parts.add((r.topic, r.partition))
    gens = lake.read("group_generations").where("NOT is_deletion").select("group_id", "generation", "member_count").collect()
    got_gens = defaultdict(set)
    for g in gens:
        got_gens[g.group_id].add(g.generation)
    assert set(got_gens) == set(expected) or not expected
    for group, by_gen in expected.items():
        assert got_gens[group] == set(by_gen), group
        for gen, members in by_gen.items():
            assert {m: p for m, p in got[group][gen].items()} == members or (not members and not got[group].get(gen)), (group, gen)


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - COMPACTED))
def test_every_successful_consumer_commit_is_in_offset_commits(lakes, scenario):
    lake = lakes(scenario)
    have = {
        (r.group_id, r.topic, r.partition, r.offset)
        for r in lake.read("offset_commits").where("NOT is_deletion").select("group_id", "topic", "partition", "offset").collect()
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
def test_final_committed_offsets_match_the_groups_kafka_reported(lakes, scenario, spark):
    final = json.loads((RECORDINGS / scenario / "groups_final.json").read_text())
    expected = {
        (group, t, p): o
        for group, offsets in (final.get("committed_offsets") or {}).items()
        for t, p, o in offsets
    }
    lake = lakes(scenario)
    lake.read("offset_commits").createOrReplaceTempView("oc")
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


def test_transactional_commits_take_effect_at_commit_markers_and_aborts_are_dropped(lakes):
    lake = lakes("transactional_commits")
    rows = lake.read("offset_commits").where("group_id = 'g-txn'").collect()
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
    assert not lake.exists(runner.OPEN_TXN) or lake.read(runner.OPEN_TXN).count() == 0


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - {"transactional_commits"}))
def test_segments_and_wire_give_the_same_silver_tables(lakes, scenario):
    # transactional_commits is left out: its wire copy was read with read_uncommitted, so it
    # holds the aborted commits a live read_committed ingestion never receives.
    cols = {
        "group_generations": ["group_id", "incarnation", "generation", "protocol", "leader", "member_count", "log_offset"],
        "member_assignments": ["group_id", "generation", "member_id", "client_id", "topic", "partition", "log_offset"],
        "offset_commits": ["group_id", "topic", "partition", "offset", "is_deletion", "effective_log_offset"],
        "current_assignments": ["group_id", "member_id", "member_epoch", "state", "topic_id", "partition", "log_offset"],
    }
    seg, wire = lakes(scenario, "segments"), lakes(scenario, "wire")
    for table, names in cols.items():
        if not seg.exists(table):
            assert not wire.exists(table)
            continue
        a = sorted(tuple(r) for r in seg.read(table).select(*names).collect())
        b = sorted(tuple(r) for r in wire.read(table).select(*names).collect())
        assert a == b, table


def test_rerunning_silver_changes_nothing(lakes):
    lake = lakes("crash_autocommit")
    before = {t: lake.read(t).count() for t in ("offset_commits", "group_generations", "member_assignments", "coordinator_events")}
    runner.update_offsets_silver(lake)
    runner.update_events_silver(lake)
    assert {t: lake.read(t).count() for t in before} == before
    assert before["coordinator_events"] > 0
