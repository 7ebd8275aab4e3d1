"""Segment items as the JSON objects `rebalance-audit decode` prints (SPEC: `decode`).

Three shapes, told apart by their keys:
* a record: `partition`, `offset`, `timestamp`, `key` {type, data}, `value` {version, data}
  or null (tombstone), batch facts (`transactional`, `control`, `producer_id`, ...) and
  where it was read (`broker`, `file`, `batch_position`). A control record (transaction
  marker) has `control: true`, `key`/`value` null, `control_type` ("COMMIT"/"ABORT") and
  `marker` (the decoded marker) -- check `control` before reading a null value as a
  tombstone.
* an empty batch left by compaction: `empty_batch: true` with the batch facts and the
  offsets it spans (`base_offset`..`last_offset`); it has no `offset` of its own.
* an error: `error` (what went wrong) with `partition`, `offset` (null when the bytes were
  too broken to tell), `file`, `batch_position`; for a record that was read but could
  not be decoded, also its `key_hex`/`value_hex`.
"""
from __future__ import annotations

import base64

from .model import SegmentBatch, SegmentError, SegmentRecord


def record_facts(rec: SegmentRecord) -> dict:
    b = rec.batch
    out = {
        "broker": b.broker,
        "partition": b.partition,
        "offset": rec.offset,
        "timestamp": rec.timestamp,
        "timestamp_type": b.timestamp_type,
        "key": None,
        "value": None,
        "transactional": b.transactional,
        "control": b.control,
        "producer_id": b.producer_id,
        "producer_epoch": b.producer_epoch,
        "sequence": rec.sequence,
        "base_offset": b.base_offset,
        "last_offset": b.last_offset,
        "magic": b.magic,
        "compression": b.compression,
        "partition_leader_epoch": b.partition_leader_epoch,
        "delete_horizon_ms": b.delete_horizon_ms,
        "file": b.file,
        "batch_position": b.batch_position,
    }
    if rec.headers:
        out["headers"] = [
            {"key": k, "value": None if v is None else base64.b64encode(v).decode("ascii")}
            for k, v in rec.headers
        ]
    return out


def to_json_dict(item, kafka_version: str | None = None) -> tuple[dict, bool]:
    """(JSON-ready dict, is_error) for one item of the segment reader."""
    if isinstance(item, SegmentRecord):
        return _record(item, kafka_version)
    if isinstance(item, SegmentError):
        return item.to_dict(), True
    if isinstance(item, SegmentBatch):
        return {"empty_batch": True, **item.facts()}, False
    raise TypeError(f"not a segment item: {type(item).__name__}")


def _record(rec: SegmentRecord, kafka_version: str | None) -> tuple[dict, bool]:
    from pipelines.codec import CodecError, decode_record

    out = record_facts(rec)
    if rec.batch.control:
        out["control_type"] = rec.control_type
        out["marker"] = rec.control_record
        return out, False
    if rec.key is None:
        return _error(rec, "record has a null key (every __consumer_offsets record has one)"), True
    try:
        decoded = decode_record(rec.key, rec.value, kafka_version)
    except CodecError as exc:
        return _error(rec, f"cannot decode record: {exc}"), True
    out["key"] = decoded["key"]
    out["value"] = decoded["value"]
    return out, False


def _error(rec: SegmentRecord, message: str) -> dict:
    b = rec.batch
    return {
        "error": message,
        "broker": b.broker,
        "partition": b.partition,
        "offset": rec.offset,
        "last_offset": rec.offset,
        "file": b.file,
        "batch_position": b.batch_position,
        "timestamp": rec.timestamp,
        "key_hex": None if rec.key is None else rec.key.hex(),
        "value_hex": None if rec.value is None else rec.value.hex(),
    }
