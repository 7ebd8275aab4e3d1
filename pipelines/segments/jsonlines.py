"""Segment items as the JSON objects `rebalance-audit decode` prints (README, "Commands": `decode`; docs/segments.md).

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
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from pipelines import native

from .model import SegmentBatch, SegmentError, SegmentRecord
from .reader import Item, V2Records, iter_segment_units

# The compiled core (pipelines/native.py). Without it the same text comes from Python,
# about three times slower.
_native: Any = native.lib


def record_facts(rec: SegmentRecord) -> dict:
    b = rec.batch
    out: dict[str, Any] = {
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


_std_dumps = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def json_text(obj) -> str:
    """`obj` as the standard library's compact JSON (ASCII, `ensure_ascii`), made by orjson
    when that gives the very same text, about five times faster.

    orjson writes the same text for what decoded records hold (dicts in insertion order,
    lists, str, int, bool, None) with three exceptions, each sent to the standard library:
    characters outside printable ASCII (orjson writes them raw, json as `\\u` escapes: the
    output is not pure ASCII, or holds DEL), ints beyond 64 bits and lone surrogates (orjson
    refuses them). Floats would differ (`1e-07` against `1e-7`), but no schema of the codec
    has a float field, so no decoded record holds one."""
    try:
        out = orjson.dumps(obj)
    except TypeError:  # orjson.JSONEncodeError: an int beyond 64 bits, a lone surrogate
        return _std_dumps(obj)
    if out.isascii() and b"\x7f" not in out:
        return out.decode("ascii")
    return _std_dumps(obj)


class LineEncoder:
    """JSON lines for the CLI, faster than `json.dumps(to_json_dict(item))`: a batch's
    facts are serialized once and shared by its records (in the same key order), and a key's JSON (a group, topic
    and partition, repeated by every commit to it) once per distinct key bytes. Same text
    as `json_text(to_json_dict(item))` (tests hold the two equal); `encode` returns (line,
    kind) with kind one of "record", "empty_batch", "error". `segment` writes a whole file,
    handing each batch of offset commits to the compiled core (native/) in one call."""

    KEYS_REMEMBERED = 100_000  # distinct keys kept before the memo starts over (bounded memory)

    def __init__(self, kafka_version: str | None = None, *, compiled: bool = True):
        from pipelines.codec import CodecError, decode_key, decode_value

        self.kafka_version = kafka_version
        # compiled=False: every batch in Python (the tests' oracle for the compiled core)
        self._fast = _native.offset_commit_lines if compiled and _native is not None else None
        self._dumps = json_text
        self._decode_key = decode_key
        self._decode_value = decode_value
        self._codec_error = CodecError
        self._keys: dict[bytes, tuple[int, str]] = {}
        self._batch: SegmentBatch | None = None
        self._head = self._mid = self._producer = self._tail = ""
        self._texts: dict[str | int | None, str] = {}

    def _remember(self, b: SegmentBatch) -> None:
        # The batch's facts in record_facts' key order, around the record's own fields.
        j = self._json
        self._batch = b
        self._head = '{"broker":%s,"partition":%s,' % (j(b.broker), j(b.partition))
        self._mid = ',"timestamp_type":%s,' % j(b.timestamp_type)
        self._producer = ',"transactional":%s,"control":%s,"producer_id":%d,"producer_epoch":%d,' % (
            "true" if b.transactional else "false", "true" if b.control else "false", b.producer_id,
            b.producer_epoch)
        self._tail = (
            ',"base_offset":%d,"last_offset":%d,"magic":%d,"compression":%s,"partition_leader_epoch":%d,'
            '"delete_horizon_ms":%s,"file":%s,"batch_position":%d}'
        ) % (b.base_offset, b.last_offset, b.magic, j(b.compression), b.partition_leader_epoch,
             "null" if b.delete_horizon_ms is None else "%d" % b.delete_horizon_ms, j(b.file), b.batch_position)

    def _json(self, value: str | int | None) -> str:
        """JSON of a batch fact repeated by every batch of a file (broker, partition,
        file, compression, timestamp type), made once."""
        known = self._texts.get(value)
        if known is None:
            known = self._texts[value] = self._dumps(value)
        return known

    def _key(self, key: bytes) -> tuple[int, str]:
        known = self._keys.get(key)
        if known is None:
            rtype, data = self._decode_key(key)
            known = (rtype, self._dumps({"type": rtype, "data": data}))
            if len(self._keys) >= self.KEYS_REMEMBERED:
                self._keys.clear()
            self._keys[key] = known
        return known

    def encode(self, item) -> tuple[str, str]:
        if type(item) is SegmentRecord and item.key is not None and not item.headers and not item.batch.control:
            try:
                rtype, key_json = self._key(item.key)
                value = self._decode_value(rtype, item.value, self.kafka_version)
            except self._codec_error:
                pass  # the general path below writes the error line
            else:
                if item.batch is not self._batch:
                    self._remember(item.batch)
                value_json = "null" if value is None else self._dumps({"version": value[0], "data": value[1]})
                return (
                    '%s"offset":%d,"timestamp":%d%s"key":%s,"value":%s%s"sequence":%d%s'
                    % (self._head, item.offset, item.timestamp, self._mid, key_json, value_json, self._producer,
                       item.sequence, self._tail),
                    "record",
                )
        obj, is_error = to_json_dict(item, self.kafka_version)
        kind = "error" if is_error else ("empty_batch" if "empty_batch" in obj else "record")
        return self._dumps(obj), kind

    def segment(self, path: str | Path, partition: int | None = None,
                broker: str | None = None) -> Iterator[tuple[str, str, int]]:
        """Every line of one segment file, in file order, as (text, kind, n): n lines of
        one kind, each ending in a newline."""
        return self.segment_units(iter_segment_units(path, partition, broker))

    def segment_units(self, units: Iterator[Item | V2Records]) -> Iterator[tuple[str, str, int]]:
        """`segment` over the reader's units. A batch of offset commits is one piece, made
        by the compiled core where it is built; any batch it does not take (group metadata,
        a control batch, headers, anything malformed) goes record by record through
        `encode`, which writes the same text."""
        fast = self._fast
        encode = self.encode
        for unit in units:
            if type(unit) is not V2Records:
                line, kind = encode(unit)
                yield line + "\n", kind, 1
                continue
            b = unit.batch
            if fast is not None and not b.control:
                self._remember(b)
                text = fast(unit.buf, unit.pos, unit.end, b.records_count, b.base_offset, unit.last_delta,
                            unit.base_timestamp, unit.max_timestamp, unit.log_append, b.base_sequence,
                            self._head, self._mid, self._producer, self._tail)
                if text is not None:
                    yield text, "record", b.records_count
                    continue
            for item in unit.items():
                line, kind = encode(item)
                yield line + "\n", kind, 1
