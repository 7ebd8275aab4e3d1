"""Every record of every recording's `offsets_segments/`, read from the real Kafka 3.9
segment files, checked field by field against Kafka's own DumpLogSegments decoding
(`dump_offsets_decoder.txt`) and against the same records read over the wire by
librdkafka (`offsets_records.jsonl`)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.codec import decode_record, encode_value
from pipelines.codec.dumpfmt import parse_dump_offsets_decoder
from pipelines.segments import SegmentBatch, SegmentError, SegmentRecord, iter_paths
from pipelines.segments.writer import WriteRecord, build_batch_v2

from conftest import RECORDINGS

SCENARIOS = sorted(p.name for p in RECORDINGS.iterdir() if (p / "offsets_segments").is_dir()) if RECORDINGS.is_dir() else []


def test_all_fourteen_recordings_are_here():
    assert len(SCENARIOS) == 14


def _read(scenario: str):
    items = list(iter_paths([RECORDINGS / scenario / "offsets_segments"]))
    errors = [i for i in items if isinstance(i, SegmentError)]
    assert errors == [], f"{scenario}: {errors[:3]}"
    assert not [i for i in items if isinstance(i, SegmentBatch)]  # no empty batches recorded
    return [i for i in items if isinstance(i, SegmentRecord)]


def _as_kafka_prints_it(ours, theirs):
    """Our decoding, shaped like DumpLogSegments': the codec adds `_version` to decoded
    subscription/assignment objects and decodes assignor `userData` (sticky,
    cooperative-sticky) that Kafka prints as base64. Those decoded userData objects become
    Kafka's base64 text here only when the value re-encodes to the exact original bytes,
    which the caller checks."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = {}
        for k, v in ours.items():
            if k == "_version":
                continue
            if k == "userData" and isinstance(v, dict) and isinstance(theirs.get(k), str):
                out[k] = theirs[k]  # decoded by us, base64 in Kafka's dump
            else:
                out[k] = _as_kafka_prints_it(v, theirs.get(k))
        return out
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [_as_kafka_prints_it(a, b) for a, b in zip(ours, theirs)]
    return ours


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_segments_match_kafka_dump_log_segments(scenario):
    records = _read(scenario)
    dump = parse_dump_offsets_decoder(RECORDINGS / scenario / "dump_offsets_decoder.txt")
    ours = {(r.partition, r.offset): r for r in records}
    assert len(ours) == len(records), "an offset came out twice"
    assert set(ours) == set(dump)

    for where, want in dump.items():
        rec = ours[where]
        batch, wrec = want["batch"], want["record"]
        # batch facts
        assert rec.base_offset == batch["baseOffset"], where
        assert rec.batch.last_offset == batch["lastOffset"], where
        assert rec.batch.records_count == batch["count"], where
        assert rec.batch_position == batch["position"], where
        assert rec.batch.size == batch["size"], where
        assert rec.magic == batch["magic"], where
        assert rec.batch.crc == batch["crc"] and batch["isvalid"] is True, where
        assert rec.compression == batch["compresscodec"], where
        assert rec.transactional == batch["isTransactional"], where
        assert rec.control == batch["isControl"], where
        assert rec.producer_id == batch["producerId"], where
        assert rec.producer_epoch == batch["producerEpoch"], where
        assert rec.base_sequence == batch["baseSequence"], where
        assert rec.partition_leader_epoch == batch["partitionLeaderEpoch"], where
        assert rec.delete_horizon_ms == batch["deleteHorizonMs"], where
        assert rec.batch.max_timestamp == batch["CreateTime"], where
        # record facts
        assert rec.timestamp_type == "CreateTime"
        assert rec.timestamp == wrec["CreateTime"], where
        assert rec.sequence == wrec["sequence"], where
        assert len(rec.key) == wrec["keySize"], where
        assert (-1 if rec.value is None else len(rec.value)) == wrec["valueSize"], where
        assert wrec["headerKeys"] == "[]" and rec.headers == (), where
        if want["control"] is not None:
            assert rec.control_type == want["control"]["endTxnMarker"], where
            assert rec.control_record["coordinatorEpoch"] == want["control"]["coordinatorEpoch"], where
            continue
        assert rec.control_type is None
        decoded = decode_record(rec.key, rec.value)
        assert str(decoded["key"]["type"]) == want["key"]["type"], where
        assert decoded["key"]["data"] == want["key"]["data"], where
        if want["tombstone"]:
            assert rec.value is None and decoded["value"] is None, where
        else:
            assert str(decoded["value"]["version"]) == want["value"]["version"], where
            data = decoded["value"]["data"]
            assert _as_kafka_prints_it(data, want["value"]["data"]) == want["value"]["data"], where
            # ...and nothing was lost: the decoding re-encodes to Kafka's exact bytes.
            version = decoded["value"]["version"]
            assert encode_value(decoded["key"]["type"], version, data) == rec.value, where


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_segments_match_records_read_over_the_wire(scenario):
    records = _read(scenario)
    wire = {}
    with open(RECORDINGS / scenario / "offsets_records.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            wire[(row["partition"], row["offset"])] = row
    # librdkafka never delivers control records; it does deliver aborted-transaction data.
    data = {(r.partition, r.offset): r for r in records if not r.control}
    assert set(data) == set(wire)
    for where, row in wire.items():
        rec = data[where]
        assert rec.key.hex() == row["key_hex"], where
        assert (None if rec.value is None else rec.value.hex()) == row["value_hex"], where
        assert rec.timestamp == row["timestamp_ms"], where
        assert row["timestamp_type"] == "CREATE_TIME" and rec.timestamp_type == "CreateTime"
        assert rec.partition_leader_epoch == row["leader_epoch"], where
        assert row["headers"] is None and rec.headers == ()
    controls = [r for r in records if r.control]
    if scenario == "transactional_commits":  # README: 199 COMMIT and 98 ABORT markers
        assert sorted(r.control_type for r in controls).count("COMMIT") == 199
        assert [r.control_type for r in controls].count("ABORT") == 98
    else:
        assert controls == []


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_writer_rebuilds_uncompressed_kafka_batches_byte_for_byte(scenario):
    """The writer, fed what the reader found, reproduces Kafka's own uncompressed batches
    exactly (CRC-32C, varints, attributes): it writes what a broker writes."""
    batches: dict[tuple, list[SegmentRecord]] = {}
    for rec in _read(scenario):
        batches.setdefault((rec.batch.file, rec.batch_position), []).append(rec)
    checked = 0
    for (file, position), recs in batches.items():
        b = recs[0].batch
        if b.compression != "none":
            continue
        original = Path(file).read_bytes()[position : position + b.size]
        rebuilt = build_batch_v2(
            [WriteRecord(r.key, r.value, r.timestamp, offset=r.offset) for r in recs],
            b.base_offset,
            transactional=b.transactional,
            control=b.control,
            producer_id=b.producer_id,
            producer_epoch=b.producer_epoch,
            base_sequence=b.base_sequence,
            partition_leader_epoch=b.partition_leader_epoch,
            last_offset=b.last_offset,
        )
        assert rebuilt == original, (file, position)
        checked += 1
    compressed = scenario.startswith("compressed_")
    assert (checked == 0) == compressed
