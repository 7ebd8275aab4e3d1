"""Offline ingestion of every recording: the segments of Kafka 3.9 brokers and their
server.log, into bronze, idempotently; replicas stored once; corrupt input quarantined."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

from conftest import RECORDINGS, REPO
from pipelines.ingest.logs import ingest_logs
from pipelines.ingest.segments import ingest_segments
from pipelines.lake import Lake
from pipelines.logs import iter_log_entries
from pipelines.segments import SegmentRecord, iter_segment_records

SCENARIOS = sorted(p.name for p in RECORDINGS.iterdir() if (p / "offsets_segments").is_dir()) if RECORDINGS.is_dir() else []


def client_read(scenario: str) -> set[tuple[int, int]]:
    """(partition, offset) of every data record librdkafka read from the live broker."""
    out = set()
    with open(RECORDINGS / scenario / "offsets_records.jsonl") as f:
        for line in f:
            r = json.loads(line)
            out.add((r["partition"], r["offset"]))
    return out


def bronze(lake: Lake, cluster: str):
    return lake.read_arrow("offsets_records", filter=ds.field("cluster") == cluster)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_segments_of_each_recording_load_once(tmp_path, scenario):
    lake = Lake(tmp_path / "lake")
    first = ingest_segments(lake, [RECORDINGS / scenario / "offsets_segments"], cluster="rec")
    rows = bronze(lake, "rec")
    # Data records are exactly what a live client read of the same broker; markers are extra.
    data = rows.filter(pc.invert(pc.fill_null(rows["control"], False)))
    assert set(zip(data["partition"].to_pylist(), data["offset"].to_pylist())) == client_read(scenario)
    assert rows.num_rows == first.seen == first.inserted
    assert len(set(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist()))) == rows.num_rows
    assert first.quarantined_seen == 0
    # Every row says where it came from.
    assert set(rows["source"].to_pylist()) == {"segments"}
    assert all(Path(f).name.endswith(".log") for f in rows["source_file"].to_pylist())
    assert len(set(rows["ingest_version"].to_pylist())) >= 1 and None not in rows["ingest_version"].to_pylist()
    # The ranges reported per partition cover exactly the inserted offsets.
    covered = {(p, o) for (_, p), rs in first.loaded_ranges().items() for a, b in rs for o in range(a, b + 1)}
    assert covered == set(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist()))
    version = lake.version("offsets_records")
    again = ingest_segments(lake, [RECORDINGS / scenario / "offsets_segments"], cluster="rec")
    assert (again.seen, again.inserted, again.commits) == (first.seen, 0, 0)
    assert lake.version("offsets_records") == version


def test_transaction_markers_are_kept(tmp_path):
    lake = Lake(tmp_path / "lake")
    ingest_segments(lake, [RECORDINGS / "transactional_commits" / "offsets_segments"])
    rows = bronze(lake, "default")
    markers = rows.filter(pc.fill_null(rows["control"], False))
    # README: 297 control batches (199 COMMIT + 98 ABORT) in __consumer_offsets-2.
    assert markers.num_rows == 297
    types = [k[2:4] for k in markers["key"].to_pylist()]
    assert types.count(b"\x00\x01") == 199 and types.count(b"\x00\x00") == 98
    assert all(markers["transactional"].to_pylist())


def _copy_brokers(src: Path, parent: Path, labels: list[str]) -> None:
    for label in labels:
        shutil.copytree(src, parent / label)


def test_three_replicas_store_each_record_once(tmp_path):
    src = RECORDINGS / "compressed_compacted" / "offsets_segments"
    _copy_brokers(src, tmp_path / "cluster", ["broker-1", "broker-2", "broker-3"])
    lake = Lake(tmp_path / "lake")
    single = sum(1 for i in _iter_records(src))
    summary = ingest_segments(lake, [tmp_path / "cluster"])
    assert summary.seen == 3 * single
    assert summary.inserted == single
    rows = bronze(lake, "default")
    assert rows.num_rows == single
    assert set(rows["broker"].to_pylist()) == {"broker-1"}  # the first replica read wins


def _iter_records(folder: Path):
    for seg in sorted(folder.glob("__consumer_offsets-*/*.log")):
        for item in iter_segment_records(seg):
            if isinstance(item, SegmentRecord):
                yield item


def test_segments_and_live_read_overlap_is_stored_once(tmp_path):
    """A compacted rewrite: the final (compacted) segments after the full live history."""
    lake = Lake(tmp_path / "lake")
    src = RECORDINGS / "compressed_compacted" / "offsets_segments"
    ingest_segments(lake, [src], cluster="c")
    # The same folder under another broker label, as if re-read after compaction.
    shutil.copytree(src, tmp_path / "later" / "broker-9")
    again = ingest_segments(lake, [tmp_path / "later"], cluster="c")
    assert again.inserted == 0


def test_corrupt_batch_is_quarantined_and_the_rest_loads(tmp_path):
    src = RECORDINGS / "scale_out_range" / "offsets_segments"
    dst = tmp_path / "broker-1"
    shutil.copytree(src, dst)
    seg = max(dst.glob("__consumer_offsets-*/*.log"), key=lambda p: p.stat().st_size)
    records = [i for i in iter_segment_records(seg) if isinstance(i, SegmentRecord)]
    victim = records[len(records) // 2].batch
    in_victim = sum(1 for r in records if r.batch.batch_position == victim.batch_position)
    data = bytearray(seg.read_bytes())
    flip = victim.batch_position + victim.size - 3  # inside the records, under the CRC
    data[flip] ^= 0xFF
    seg.write_bytes(bytes(data))

    lake = Lake(tmp_path / "lake")
    total = sum(1 for _ in _iter_records(src))
    summary = ingest_segments(lake, [dst])
    assert summary.inserted == total - in_victim
    q = lake.read_arrow("quarantine").to_pylist()
    assert len(q) == 1
    assert "CRC" in q[0]["reason"]
    assert (q[0]["partition"], q[0]["offset"], q[0]["byte_position"]) == (2, victim.base_offset, victim.batch_position)
    assert q[0]["raw"] == bytes(data[victim.batch_position: victim.batch_position + victim.size])
    assert q[0]["target_table"] == "offsets_records" and q[0]["source"] == "segments"
    again = ingest_segments(lake, [dst])
    assert (again.inserted, again.quarantined, again.quarantined_seen) == (0, 0, 1)
    assert lake.read_arrow("quarantine").num_rows == 1
    # The intact copy of the batch (another replica) fills the gap.
    healed = ingest_segments(lake, [src])
    assert healed.inserted == in_victim


def _without_arrival(lake: Lake, table: str) -> list[str]:
    rows = lake.read_arrow(table)
    return sorted(map(repr, rows.drop_columns(["ingested_at"]).to_pylist()))


def test_several_processes_load_what_one_process_loads(tmp_path):
    """Segment files read by two processes give the tables one process gives, commit for
    commit: four replicas, the first (broker-0) with a corrupt batch whose records the
    next replica gives, and a .log outside any partition folder."""
    src = RECORDINGS / "compressed_compacted" / "offsets_segments"
    cluster = tmp_path / "cluster"
    _copy_brokers(src, cluster, ["broker-0", "broker-1", "broker-2", "broker-3"])
    seg = max((cluster / "broker-0").glob("__consumer_offsets-*/*.log"), key=lambda p: p.stat().st_size)
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0xFF
    seg.write_bytes(bytes(data))
    loose = tmp_path / "loose" / seg.name
    loose.parent.mkdir()
    shutil.copy(seg, loose)

    runs = {}
    for jobs in (1, 2):
        lake = Lake(tmp_path / f"lake-{jobs}")
        summary = ingest_segments(lake, [cluster, loose], cluster="c", chunk_rows=400, jobs=jobs)
        runs[jobs] = (lake, summary)
    (one, s1), (two, s2) = runs[1], runs[2]
    assert s1.quarantined_seen > 0 and s1.extra["records_without_partition"] > 0 and s1.seen > s1.inserted
    for field in ("seen", "inserted", "quarantined_seen", "quarantined", "commits"):
        assert getattr(s2, field) == getattr(s1, field), field
    assert s2.loaded_ranges() == s1.loaded_ranges() and s2.extra == s1.extra
    for table in ("offsets_records", "quarantine"):
        assert one.version(table) == two.version(table), table
        assert _without_arrival(one, table) == _without_arrival(two, table), table
    assert set(bronze(two, "c")["broker"].to_pylist()) == {"broker-0", "broker-1"}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_server_log_of_each_recording_loads_once(tmp_path, scenario):
    log = RECORDINGS / scenario / "server.log"
    lake = Lake(tmp_path / "lake")
    entries = [e for e in iter_log_entries([log]) if not e.error]
    first = ingest_logs(lake, [log])
    rows = lake.read_arrow("coordinator_log_lines")
    assert rows.num_rows == first.inserted == len(entries) > 0
    assert sorted(rows["line"].to_pylist()) == sorted(e.line for e in entries)
    assert sorted(rows["text"].to_pylist()) == sorted(e.text for e in entries)
    again = ingest_logs(lake, [log])
    assert again.inserted == 0


def test_rotated_log_is_not_stored_twice(tmp_path):
    log = RECORDINGS / "storm_flapping" / "server.log"
    live = tmp_path / "b1"
    live.mkdir()
    shutil.copy(log, live / "server.log")
    lake = Lake(tmp_path / "lake")
    first = ingest_logs(lake, [live])
    # log4j's hourly rotation renames the file; a new, empty server.log starts.
    (live / "server.log").rename(live / "server.log.2026-11-22-08")
    (live / "server.log").write_text("")
    again = ingest_logs(lake, [live])
    assert first.inserted > 0 and again.seen == first.seen and again.inserted == 0


def test_ingest_cli_prints_what_it_loaded(tmp_path):
    lake = tmp_path / "lake"
    cmd = [sys.executable, "-m", "rebalance_audit.cli", "ingest", "segments", "--lake", str(lake), "--cluster", "prod-eu",
           str(RECORDINGS / "crash_autocommit" / "offsets_segments")]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "105 read, 105 new rows in offsets_records" in r.stdout
    assert "prod-eu partition 2: 105 new, offsets 0-104" in r.stdout
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert "105 read, 0 new rows" in r.stdout
    logs = [sys.executable, "-m", "rebalance_audit.cli", "ingest", "logs", "--lake", str(lake), "--broker",
            f"1={RECORDINGS / 'crash_autocommit' / 'server.log'}"]
    r = subprocess.run(logs, capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "new rows in coordinator_log_lines" in r.stdout
    bad = subprocess.run(cmd[:-1] + [str(tmp_path / "nope")], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "no such file" in bad.stderr
    bad = subprocess.run(cmd[:6] + ["--cluster", "a/b", str(RECORDINGS)], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "cluster" in bad.stderr
    assert DeltaTable(str(lake / "offsets_records")).protocol().min_writer_version == 2
