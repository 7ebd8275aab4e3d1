"""Our decoding of every recorded `__consumer_offsets` record against Kafka's own
(DumpLogSegments --offsets-decoder, Kafka 3.9) for the same (partition, offset).

Normalisation applied to OUR output before comparing (everything else must be equal):
* Kafka prints the key "type" and value "version" as JSON strings ("1", "3").
* Decoded consumer-protocol blobs carry `_version` (needed to re-encode the exact bytes),
  which Kafka's JSON does not print: it is dropped.  A `_trailing` key would mean bytes
  Kafka's dump could not have shown, so it must not occur in these recordings.
* Sticky / cooperative-sticky subscription userData is decoded by us; Kafka prints it as
  base64 (Jackson binary node).  We re-encode our decoded userData with our encoder and
  compare that base64 with Kafka's, so the decoding is checked byte for byte.
* Keys starting with "_" (codec metadata such as `_subscriptionError`) must not occur.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pipelines.codec import decode_record
from pipelines.codec.consumer_protocol import encode_user_data
from pipelines.codec.dumpfmt import parse_dump_offsets_decoder

SHARED = Path(os.environ.get("REBALANCE_AUDIT_SHARED",
                             Path(__file__).resolve().parents[1].parent / "shared"))
RECORDINGS = sorted(p.parent for p in (SHARED / "recordings").glob("*/offsets_records.jsonl"))


def _normalise_embedded(blob: dict) -> dict:
    assert "_trailing" not in blob, "trailing bytes in an embedded consumer-protocol blob"
    out = {k: v for k, v in blob.items() if k != "_version"}
    if isinstance(out.get("userData"), dict):
        out["userData"] = __import__("base64").b64encode(encode_user_data(out["userData"])).decode()
    assert not [k for k in out if k.startswith("_")], out
    return out


def _as_kafka_prints(decoded: dict) -> tuple[dict, dict | None]:
    key = {"type": str(decoded["key"]["type"]), "data": decoded["key"]["data"]}
    if decoded["value"] is None:
        return key, None
    data = decoded["value"]["data"]
    if decoded["key"]["type"] == 2 and data.get("protocolType") == "consumer":
        data = dict(data)
        members = []
        for m in data["members"]:
            assert not [k for k in m if k.startswith("_")], m
            m = dict(m)
            for field in ("subscription", "assignment"):
                if isinstance(m[field], dict):
                    m[field] = _normalise_embedded(m[field])
            members.append(m)
        data["members"] = members
    return key, {"version": str(decoded["value"]["version"]), "data": data}


def _records(recording: Path):
    with open(recording / "offsets_records.jsonl", encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


@pytest.mark.parametrize("recording", RECORDINGS, ids=[p.name for p in RECORDINGS])
def test_every_record_matches_kafkas_decoding(recording: Path):
    dump = parse_dump_offsets_decoder(recording / "dump_offsets_decoder.txt")
    seen = set()
    mismatches = []
    for rec in _records(recording):
        where = (rec["partition"], rec["offset"])
        seen.add(where)
        key = bytes.fromhex(rec["key_hex"])
        value = None if rec["value_hex"] is None else bytes.fromhex(rec["value_hex"])
        # No kafka_version: the 3.9 recordings must decode without the flag.
        ours_key, ours_value = _as_kafka_prints(decode_record(key, value))
        kafka = dump[where]
        assert kafka["control"] is None, f"{where} is a control record in the dump"
        if ours_key != kafka["key"]:
            mismatches.append((where, "key", ours_key, kafka["key"]))
        if value is None:
            if not kafka["tombstone"]:
                mismatches.append((where, "tombstone", None, kafka["value"]))
        elif ours_value != kafka["value"]:
            mismatches.append((where, "value", ours_value, kafka["value"]))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[0]}"
    # Every data record Kafka dumped is one we decoded (control records are not delivered
    # to librdkafka, so they are absent from offsets_records.jsonl).
    data_in_dump = {k for k, r in dump.items() if r["control"] is None}
    assert data_in_dump == seen
    assert len(seen) > 0


def test_recordings_are_present():
    assert len(RECORDINGS) >= 14, f"expected the 14 recordings under {SHARED / 'recordings'}"


def test_record_types_seen_in_recordings_cover_kip848_and_tombstones():
    """Guards the comparison above against silently testing only OffsetCommit."""
    types, tombstones, decoded_subscriptions, sticky_user_data = set(), 0, 0, 0
    for recording in RECORDINGS:
        for rec in _records(recording):
            value = None if rec["value_hex"] is None else bytes.fromhex(rec["value_hex"])
            d = decode_record(bytes.fromhex(rec["key_hex"]), value)
            types.add(d["key"]["type"])
            tombstones += d["value"] is None
            if d["key"]["type"] == 2 and d["value"]:
                for m in d["value"]["data"]["members"]:
                    decoded_subscriptions += isinstance(m["subscription"], dict)
                    sticky_user_data += isinstance(m["subscription"], dict) and isinstance(
                        m["subscription"].get("userData"), dict)
    assert {1, 2, 3, 4, 5, 6, 7, 8} <= types
    assert tombstones == 16 + 2 + 12  # README: compressed_compacted 16+2, kip848 4 x (5, 7, 8)
    assert decoded_subscriptions > 0 and sticky_user_data > 0


def test_control_records_in_the_dump_are_the_markers_the_readme_lists():
    dump = parse_dump_offsets_decoder(SHARED / "recordings/transactional_commits/dump_offsets_decoder.txt")
    markers = [r for r in dump.values() if r["control"]]
    assert sum(r["control"]["endTxnMarker"] == "COMMIT" for r in markers) == 199
    assert sum(r["control"]["endTxnMarker"] == "ABORT" for r in markers) == 98
    assert all(r["batch"]["isControl"] and r["batch"]["isTransactional"] for r in markers)
    assert all(r["record"]["keySize"] == 4 and r["record"]["valueSize"] == 6 for r in markers)
