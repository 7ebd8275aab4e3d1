"""Write Kafka log segments: record batches v2, legacy magic 0/1 message sets, `.log` files.

The byte layouts are the ones the reader reads (kafka-internals §1.12; `DefaultRecordBatch`,
`DefaultRecord`, `LegacyRecord`), so that tests, the benchmark, the demo and a simulator
can produce segment files a Kafka broker (and `kafka-dump-log.sh`) would accept:
* batch v2: CRC-32C over Attributes..end; zig-zag varints in records; compression of
  everything after RecordsCount; transactional/control flags, producer id/epoch/sequence;
  empty batches (RecordsCount 0) as compaction leaves them; the delete-horizon flag, which
  makes BaseTimestamp the delete horizon.
* legacy: CRC-32 over Magic..end; compressed wrapper messages whose value is an inner
  message set (magic 1: relative inner offsets, wrapper offset = last inner absolute
  offset; magic 0: absolute inner offsets); magic-0 LZ4 with Kafka's pre-0.10 broken frame
  header checksum (KAFKA-3160).
"""
from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable, Sequence

from crc32c import crc32c

from . import compression as comp

_V2_HEADER = struct.Struct(">qiiBIhiqqqhii")
_V2_AFTER_CRC = struct.Struct(">hiqqqhii")  # Attributes .. RecordsCount
DEFAULT_SEGMENT_BYTES = 104857600  # offsets.topic.segment.bytes default
_CONTROL_IDS = {"ABORT": 0, "COMMIT": 1}  # ControlRecordType.java


@dataclass(slots=True)
class WriteRecord:
    """A record to write. `value=None` writes a tombstone. `timestamp` defaults to the
    batch's `timestamp`; `offset` defaults to the next consecutive one (set it to leave the
    gaps compaction leaves)."""

    key: bytes | None
    value: bytes | None
    timestamp: int | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()
    offset: int | None = None


def _as_record(r) -> WriteRecord:
    if isinstance(r, WriteRecord):
        return r
    key, value, *rest = r
    return WriteRecord(key, value, *rest)


def zigzag_varint(value: int) -> bytes:
    """Zig-zag varint as ByteUtils.writeVarlong writes it."""
    v = (value << 1) ^ (value >> 63)
    v &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _encode_v2_record(rec: WriteRecord, offset_delta: int, ts_delta: int) -> bytes:
    v = zigzag_varint
    parts = [b"\x00", v(ts_delta), v(offset_delta)]
    if rec.key is None:
        parts.append(v(-1))
    else:
        parts += (v(len(rec.key)), rec.key)
    if rec.value is None:
        parts.append(v(-1))
    else:
        parts += (v(len(rec.value)), rec.value)
    parts.append(v(len(rec.headers)))
    for hkey, hval in rec.headers:
        hk = hkey.encode("utf-8")
        parts += (v(len(hk)), hk)
        if hval is None:
            parts.append(v(-1))
        else:
            parts += (v(len(hval)), hval)
    body = b"".join(parts)
    return v(len(body)) + body


def build_batch_v2(
    records: Iterable[WriteRecord | tuple],
    base_offset: int,
    *,
    timestamp: int = 0,
    compression: str | int = "none",
    timestamp_type: str = "CreateTime",
    transactional: bool = False,
    control: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = 0,
    delete_horizon_ms: int | None = None,
    last_offset: int | None = None,
) -> bytes:
    """One record batch v2 (magic 2).

    With no records it writes an empty batch as the cleaner leaves it: pass `last_offset`
    (the batch still spans base..last so the producer's sequence state survives).
    With `timestamp_type="LogAppendTime"`, MaxTimestamp is `timestamp` (the append time).
    """
    recs = [_as_record(r) for r in records]
    codec = comp.codec_id(compression)
    attributes = codec
    if timestamp_type == "LogAppendTime":
        attributes |= 0x08
    elif timestamp_type != "CreateTime":
        raise ValueError(f"timestamp_type must be CreateTime or LogAppendTime, not {timestamp_type!r}")
    if transactional:
        attributes |= 0x10
    if control:
        attributes |= 0x20
    if delete_horizon_ms is not None:
        attributes |= 0x40

    offsets = []
    next_offset = base_offset
    for r in recs:
        off = next_offset if r.offset is None else r.offset
        if off < next_offset:
            raise ValueError(f"record offsets must increase: {off} after {next_offset - 1}")
        offsets.append(off)
        next_offset = off + 1
    stamps = [timestamp if r.timestamp is None else r.timestamp for r in recs]

    if recs:
        last = offsets[-1] if last_offset is None else last_offset
        if last < offsets[-1]:
            raise ValueError("last_offset is before the batch's last record")
        max_ts = max(stamps)
        # The delete horizon replaces BaseTimestamp; record deltas stay relative to it.
        base_ts = delete_horizon_ms if delete_horizon_ms is not None else stamps[0]
    else:
        if last_offset is None:
            raise ValueError("an empty batch needs last_offset")
        last = last_offset
        max_ts = timestamp
        base_ts = delete_horizon_ms if delete_horizon_ms is not None else timestamp
    if timestamp_type == "LogAppendTime":
        max_ts = timestamp

    body = b"".join(
        _encode_v2_record(r, off - base_offset, ts - base_ts) for r, off, ts in zip(recs, offsets, stamps)
    )
    if codec and recs:
        body = comp.compress(codec, body, magic=2)
    after_crc = _V2_AFTER_CRC.pack(
        attributes, last - base_offset, base_ts, max_ts, producer_id, producer_epoch, base_sequence, len(recs)
    ) + body
    crc = crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)  # PartitionLeaderEpoch + Magic + CRC + rest
    return struct.pack(">qiiBI", base_offset, length, partition_leader_epoch, 2, crc) + after_crc


def build_control_batch(
    base_offset: int,
    control_type,
    *,
    coordinator_epoch: int = 0,
    producer_id: int,
    producer_epoch: int,
    timestamp: int = 0,
    partition_leader_epoch: int = 0,
) -> bytes:
    """A transaction marker batch (transactional + control, one control record), as the
    transaction coordinator has the partition leader append it. `control_type` is
    "COMMIT" / "ABORT" or the ControlRecordType id (1 / 0)."""
    from pipelines.codec import encode_control_record  # the codec owns the marker schema

    if isinstance(control_type, str):
        try:
            control_type = _CONTROL_IDS[control_type.upper()]
        except KeyError:
            raise ValueError(f"control_type must be COMMIT or ABORT, not {control_type!r}") from None
    key, value = encode_control_record(control_type, coordinator_epoch)
    return build_batch_v2(
        [WriteRecord(key, value)],
        base_offset,
        timestamp=timestamp,
        transactional=True,
        control=True,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
    )


# ---------------------------------------------------------------------------- legacy formats

def build_legacy_message(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    magic: int,
    timestamp: int = -1,
    timestamp_type: str = "CreateTime",
    codec: int = 0,
) -> bytes:
    """One legacy message with its log entry header (Offset, Size)."""
    if magic not in (0, 1):
        raise ValueError("legacy messages have magic 0 or 1")
    attributes = codec
    if magic == 1 and timestamp_type == "LogAppendTime":
        attributes |= 0x08
    parts = [struct.pack(">BB", magic, attributes)]
    if magic == 1:
        parts.append(struct.pack(">q", timestamp))
    for blob in (key, value):
        if blob is None:
            parts.append(struct.pack(">i", -1))
        else:
            parts += (struct.pack(">i", len(blob)), blob)
    body = b"".join(parts)
    crc = zlib.crc32(body) & 0xFFFFFFFF
    return struct.pack(">qiI", offset, 4 + len(body), crc) + body


def build_legacy_message_set(
    records: Iterable[WriteRecord | tuple],
    base_offset: int,
    *,
    magic: int,
    timestamp: int = -1,
    compression: str | int = "none",
    timestamp_type: str = "CreateTime",
    lz4_broken_checksum: bool | None = None,
) -> bytes:
    """Legacy messages for consecutive offsets from `base_offset`: plain, or one compressed
    wrapper message holding them. `lz4_broken_checksum` defaults to what Kafka wrote for
    the magic (True for magic 0, KAFKA-3160)."""
    recs = [_as_record(r) for r in records]
    if not recs:
        raise ValueError("a legacy message set needs at least one record")
    if any(r.offset is not None for r in recs):
        raise ValueError("legacy message sets are written with consecutive offsets")
    codec = comp.codec_id(compression)
    stamps = [timestamp if r.timestamp is None else r.timestamp for r in recs]
    if codec == comp.NONE:
        return b"".join(
            build_legacy_message(base_offset + i, r.key, r.value, magic=magic, timestamp=ts,
                                 timestamp_type=timestamp_type)
            for i, (r, ts) in enumerate(zip(recs, stamps))
        )
    if codec == comp.ZSTD:
        raise ValueError("zstd needs magic 2 (Kafka rejects it in legacy message sets)")
    # Inner offsets: relative (0..n-1) from magic 1 on (KIP-31), absolute before.
    inner = b"".join(
        build_legacy_message((i if magic == 1 else base_offset + i), r.key, r.value, magic=magic,
                             timestamp=ts, timestamp_type="CreateTime")
        for i, (r, ts) in enumerate(zip(recs, stamps))
    )
    if codec == comp.LZ4:
        broken = (magic == 0) if lz4_broken_checksum is None else lz4_broken_checksum
        payload = comp.lz4_frame_compress(inner, broken_header_checksum=broken)
    else:
        payload = comp.compress(codec, inner, magic=magic)
    wrapper_ts = timestamp if timestamp_type == "LogAppendTime" else max(stamps)
    return build_legacy_message(
        base_offset + len(recs) - 1, None, payload, magic=magic, timestamp=wrapper_ts,
        timestamp_type=timestamp_type, codec=codec,
    )


# ------------------------------------------------------------------------------ segment files

def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


class SegmentWriter:
    """Appends batches to `LOG_DIR/__consumer_offsets-N/NNNNNNNNNNNNNNNNNNNN.log`, rolling
    to a new segment (named by its first offset) past `segment_bytes`, as a broker does.
    Offsets are assigned per partition from 0 (or `start_offsets`).

        with SegmentWriter(tmp / "broker-1") as w:
            w.append(3, [WriteRecord(key, value)], timestamp=now, compression="gzip")
    """

    def __init__(
        self,
        log_dir: str | os.PathLike,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        topic: str = "__consumer_offsets",
        start_offsets: dict[int, int] | None = None,
    ):
        self.log_dir = Path(log_dir)
        self.segment_bytes = segment_bytes
        self.topic = topic
        self._next = dict(start_offsets or {})
        self._files: dict[int, tuple[BinaryIO, int]] = {}  # partition -> (file, bytes written)
        self.paths: list[Path] = []

    def next_offset(self, partition: int) -> int:
        return self._next.get(partition, 0)

    def append(self, partition: int, records, **batch_kwargs) -> tuple[int, int]:
        """A v2 batch of `records` at the partition's next offset; returns (base, last)."""
        base = self.next_offset(partition)
        batch = build_batch_v2(records, base, **batch_kwargs)
        last = base + struct.unpack_from(">i", batch, 23)[0]  # LastOffsetDelta
        self.append_raw(partition, batch, base, last)
        return base, last

    def append_empty(self, partition: int, count: int, **batch_kwargs) -> tuple[int, int]:
        """An empty batch spanning `count` offsets (what compaction leaves of a batch)."""
        base = self.next_offset(partition)
        self.append_raw(partition, build_batch_v2([], base, last_offset=base + count - 1, **batch_kwargs),
                        base, base + count - 1)
        return base, base + count - 1

    def append_control(self, partition: int, control_type, **kwargs) -> int:
        base = self.next_offset(partition)
        self.append_raw(partition, build_control_batch(base, control_type, **kwargs), base, base)
        return base

    def append_legacy(self, partition: int, records, *, magic: int, **kwargs) -> tuple[int, int]:
        recs = [_as_record(r) for r in records]
        base = self.next_offset(partition)
        self.append_raw(partition, build_legacy_message_set(recs, base, magic=magic, **kwargs),
                        base, base + len(recs) - 1)
        return base, base + len(recs) - 1

    def append_raw(self, partition: int, batch: bytes, base_offset: int, last_offset: int) -> None:
        """Write already-built batch bytes whose offsets are base..last."""
        if base_offset < self.next_offset(partition):
            raise ValueError(f"offset {base_offset} goes backwards on partition {partition}")
        fh, size = self._files.get(partition, (None, 0))
        if fh is None or (size and size + len(batch) > self.segment_bytes):
            if fh is not None:
                fh.close()
            folder = self.log_dir / f"{self.topic}-{partition}"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / segment_name(base_offset)
            fh, size = open(path, "xb"), 0
            self.paths.append(path)
        fh.write(batch)
        self._files[partition] = (fh, size + len(batch))
        self._next[partition] = last_offset + 1

    def close(self) -> None:
        for fh, _ in self._files.values():
            fh.close()
        self._files.clear()

    def __enter__(self) -> "SegmentWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
