"""Read `__consumer_offsets` `.log` segment files: record batches v2 and legacy message sets.

A segment is a plain concatenation of batches with no file header (kafka-internals §1.12).
Every batch starts with BaseOffset:int64, Length:int32 (bytes after the Length field), and
has its magic byte at position 16 in all three formats, which is how the format of each
batch is told apart.

What the reader promises:
* Every record comes out as a `SegmentRecord` (key/value bytes plus batch facts); every
  empty batch (RecordsCount 0, left by compaction to keep producer state) as its
  `SegmentBatch`; everything that cannot be read as a `SegmentError` carrying the file,
  position and the offsets it covers. Nothing is skipped silently.
* A corrupt batch (CRC mismatch, bad compression, inconsistent record framing) costs only
  that batch: its Length still says where the next batch starts. When the framing itself
  is broken (bad magic, impossible length, a Length running past the end of the file), the
  reader looks for the next v2 batch that proves itself (magic, sane length, CRC-32C) and
  reports the skipped bytes and the offsets they held as one error; if there is none (a
  segment cut off while being written, or not a segment at all) the file ends with an
  error.
* Trailing zero bytes (a preallocated segment, `log.preallocate=true`) end the file quietly:
  they are not data.
"""
from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Iterator, Union

from crc32c import crc32c

from . import compression as comp
from .model import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    SegmentBatch,
    SegmentError,
    SegmentRecord,
)
from .paths import partition_from_path

Item = Union[SegmentRecord, SegmentBatch, SegmentError]

_V2_HEADER = struct.Struct(">qiiBIhiqqqhii")  # 61 bytes, DefaultRecordBatch layout
V2_HEADER_SIZE = _V2_HEADER.size
_LEGACY_HEADER = struct.Struct(">qiIBB")  # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
LOG_OVERHEAD = 12  # BaseOffset + Length
_HEADER_UP_TO_MAGIC = 17
# Smallest legal Length per magic: v2 header after Length; legacy crc+magic+attrs(+ts)+2 lengths.
_MIN_LENGTH = {0: 14, 1: 22, 2: V2_HEADER_SIZE - LOG_OVERHEAD}
_INT32_MAX = 0x7FFFFFFF


class RecordFormatError(ValueError):
    """Record bytes inside a batch that do not parse."""


def iter_segment_records(
    path: str | Path,
    partition: int | None = None,
    broker: str | None = None,
) -> Iterator[Item]:
    """Every record, empty batch and error of one `.log` segment file, in file order.

    `partition` defaults to the N of an enclosing `__consumer_offsets-N` folder.
    """
    path = Path(path)
    if partition is None:
        partition = partition_from_path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return iter([SegmentError(str(path), broker, partition, 0, f"cannot read segment: {exc.strerror or exc}")])
    return iter_buffer_records(data, file=str(path), partition=partition, broker=broker)


def iter_buffer_records(
    data: bytes,
    *,
    file: str = "<memory>",
    partition: int | None = None,
    broker: str | None = None,
) -> Iterator[Item]:
    """Like `iter_segment_records`, over segment bytes already in memory."""
    data = bytes(data)
    n = len(data)
    pos = 0

    next_offset = None  # first offset after the last batch read, to bound a skipped range
    while pos < n:
        remaining = n - pos
        problem = None
        base_offset = None
        if remaining < _HEADER_UP_TO_MAGIC:
            problem = f"truncated batch: only {remaining} bytes left at the end of the segment"
        else:
            base_offset, length = struct.unpack_from(">qi", data, pos)
            magic = data[pos + 16]
            if length == 0 and base_offset == 0 and data.count(0, pos) == remaining:
                # Preallocated, never-written tail. (A run of zeros shorter than a batch
                # header is more likely the cut-off start of a batch, reported above.)
                return
            if magic not in _MIN_LENGTH:
                problem = f"invalid magic byte {magic} (expected 0, 1 or 2): not a Kafka record batch"
                base_offset = None
            elif length < _MIN_LENGTH[magic]:
                problem = f"invalid batch length {length} for magic {magic} (at least {_MIN_LENGTH[magic]})"
            elif pos + LOG_OVERHEAD + length > n:
                problem = (
                    f"truncated batch: it declares {LOG_OVERHEAD + length} bytes but the segment has "
                    f"only {remaining} left"
                )
        if problem is not None:
            # The framing is lost: look for the next batch that proves itself (magic 2,
            # plausible length and offset, valid CRC-32C) and report the bytes in between.
            resume = _resync(data, pos + 1, next_offset)
            if resume is None:
                yield SegmentError(
                    file, broker, partition, pos,
                    f"{problem}; no readable batch in the remaining {remaining} bytes of the segment"
                    + (" (a segment still being written?)" if problem.startswith("truncated") else ""),
                    base_offset if base_offset is not None else next_offset, None,
                )
                return
            resume_offset = struct.unpack_from(">q", data, resume)[0]
            first = next_offset if next_offset is not None else base_offset
            if first is not None and first >= resume_offset:
                lost = " (no offsets are missing: the bytes held none)"
                first = last = None
            else:
                lost, last = "", resume_offset - 1
            yield SegmentError(
                file, broker, partition, pos,
                f"{problem}; skipped {resume - pos} bytes up to the next readable batch at byte {resume}{lost}",
                first, last,
            )
            pos = resume
            continue
        end = pos + LOG_OVERHEAD + length
        if magic == 2:
            next_offset = base_offset + struct.unpack_from(">i", data, pos + 23)[0] + 1
            yield from _read_v2(data, pos, end, file, broker, partition)
        else:
            next_offset = base_offset + 1
            yield from _read_legacy(data, pos, end, file, broker, partition)
        pos = end


def _resync(data: bytes, start: int, min_offset: int | None) -> int | None:
    """Position of the first v2 batch at or after `start` that checks out (magic 2, sane
    length inside the file, base offset not before `min_offset`, CRC-32C valid), or None.
    Legacy batches are not searched for: magic 0/1 bytes are too common to scan for."""
    n = len(data)
    q = data.find(b"\x02", start + 16)
    while q != -1:
        p = q - 16
        if p + V2_HEADER_SIZE > n:
            return None
        base, length = struct.unpack_from(">qi", data, p)
        if (
            length >= _MIN_LENGTH[2]
            and p + LOG_OVERHEAD + length <= n
            and base >= (min_offset or 0)
            and crc32c(memoryview(data)[p + 21 : p + LOG_OVERHEAD + length]) == struct.unpack_from(">I", data, p + 17)[0]
        ):
            return p
        q = data.find(b"\x02", q + 1)
    return None


# ------------------------------------------------------------------------ record batch v2

def _read_v2(data: bytes, pos: int, end: int, file, broker, partition) -> list[Item]:
    """Items of one v2 batch. Returns a list: records pass through fewer generator levels."""
    (
        base_offset, _length, leader_epoch, magic, crc, attrs, last_delta,
        base_ts, max_ts, producer_id, producer_epoch, base_sequence, count,
    ) = _V2_HEADER.unpack_from(data, pos)
    last_offset = base_offset + last_delta

    computed = crc32c(memoryview(data)[pos + 21 : end])
    if computed != crc:
        return [SegmentError(file, broker, partition, pos,
                             f"CRC-32C mismatch: stored {crc:#010x}, computed {computed:#010x} (corrupt batch)",
                             base_offset, last_offset)]
    codec = attrs & 0x07
    if codec not in comp.CODEC_NAMES:
        return [SegmentError(file, broker, partition, pos,
                             f"unknown compression codec id {codec} in batch attributes {attrs:#06x}",
                             base_offset, last_offset)]
    log_append = bool(attrs & 0x08)
    control = bool(attrs & 0x20)
    batch = SegmentBatch(
        file, broker, partition, pos, end - pos, base_offset, last_offset, magic,
        comp.CODEC_NAMES[codec],
        LOG_APPEND_TIME if log_append else CREATE_TIME,
        max_ts,
        bool(attrs & 0x10),  # transactional
        control,
        producer_id,
        producer_epoch,
        base_sequence,
        leader_epoch,
        # Attribute bit 6: BaseTimestamp holds the delete horizon set by the cleaner.
        base_ts if attrs & 0x40 else None,
        count,
        crc,
    )
    if count < 0:
        return [SegmentError(file, broker, partition, pos, f"invalid records count {count}",
                             base_offset, last_offset)]
    if count == 0:
        return [batch]  # compaction leftover: keeps the producer's sequence state
    start = pos + V2_HEADER_SIZE
    if codec:
        try:
            buf = comp.decompress(codec, memoryview(data)[start:end], magic=2)
        except comp.CompressionError as exc:
            return [SegmentError(file, broker, partition, pos, f"cannot decompress batch: {exc}",
                                 base_offset, last_offset)]
        rpos, rend = 0, len(buf)
    else:
        buf, rpos, rend = data, start, end

    items, problem = _v2_records(buf, rpos, rend, count, batch, base_ts, log_append, max_ts)
    if control:
        for i, record in enumerate(items):
            error = _decode_control(record)
            if error is not None:
                items[i] = SegmentError(file, broker, partition, pos, error, record.offset, record.offset)
    if problem is not None:
        first = items[-1].offset + 1 if items else base_offset
        items.append(SegmentError(file, broker, partition, pos, f"corrupt record in batch: {problem}",
                                  first, last_offset))
    return items


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag varint (ByteUtils.readVarlong); the 1-byte case is inlined by callers."""
    value = 0
    shift = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise RecordFormatError("varint runs past the end of the records") from None
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise RecordFormatError("varint longer than 10 bytes")


def _v2_records(buf, pos, end, count, batch, base_ts, log_append, max_ts):
    """Parse `count` DefaultRecords from buf[pos:end] (the hot loop: keep it flat).
    Returns (records, None), or (the records before the problem, what the problem is)."""
    out: list = []
    try:
        _v2_records_into(out, buf, pos, end, count, batch, base_ts, log_append, max_ts)
    except RecordFormatError as exc:
        return out, str(exc)
    return out, None


def _v2_records_into(out, buf, pos, end, count, batch, base_ts, log_append, max_ts) -> None:
    append = out.append
    base_offset = batch.base_offset
    base_seq = batch.base_sequence
    read_varint = _read_varint
    Record = SegmentRecord
    no_headers = ()
    for _ in range(count):
        if pos >= end:
            raise RecordFormatError(f"batch declares {count} records but its data ends early")
        try:
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                length, pos = read_varint(buf, pos)
            rec_end = pos + length
            if length < 6 or rec_end > end:
                raise RecordFormatError(f"record length {length} overruns its batch")
            pos += 1  # record attributes: unused
            b = buf[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                ts_delta, pos = read_varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = read_varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = read_varint(buf, pos)
            if n < 0:
                key = None
            else:
                key = buf[pos : pos + n]
                pos += n
            b = buf[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = read_varint(buf, pos)
            if n < 0:
                value = None
            else:
                value = buf[pos : pos + n]
                pos += n
            if buf[pos] == 0 and pos < rec_end:
                headers = no_headers
                pos += 1
            else:
                headers, pos = _read_headers(buf, pos, rec_end)
        except IndexError:
            raise RecordFormatError("record runs past the end of its batch") from None
        if pos != rec_end:
            raise RecordFormatError(
                f"record at offset delta {offset_delta} declares {length} bytes but its fields "
                f"end {pos - rec_end:+d} bytes from there"
            )
        if base_seq < 0:
            seq = -1
        elif base_seq > _INT32_MAX - offset_delta:  # DefaultRecordBatch.incrementSequence
            seq = offset_delta - (_INT32_MAX - base_seq) - 1
        else:
            seq = base_seq + offset_delta
        append(Record(
            base_offset + offset_delta,
            max_ts if log_append else base_ts + ts_delta,
            key,
            value,
            headers,
            seq,
            batch,
        ))
    if pos != end:
        raise RecordFormatError(f"{end - pos} bytes after the batch's last record")


def _read_headers(buf, pos: int, end: int):
    count, pos = _read_varint(buf, pos)
    if count < 0 or count > end - pos:
        raise RecordFormatError(f"invalid header count {count}")
    headers = []
    for _ in range(count):
        n, pos = _read_varint(buf, pos)
        if n < 0 or pos + n > end:
            raise RecordFormatError("header key overruns its record")
        try:
            hkey = bytes(buf[pos : pos + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise RecordFormatError("header key is not UTF-8") from None
        pos += n
        n, pos = _read_varint(buf, pos)
        if n < 0:
            hval = None
        else:
            if pos + n > end:
                raise RecordFormatError("header value overruns its record")
            hval = bytes(buf[pos : pos + n])
            pos += n
        headers.append((hkey, hval))
    return tuple(headers), pos


def _decode_control(record: SegmentRecord) -> str | None:
    """Fill `control_type`/`control_record` of a control record; an error text if it cannot."""
    from pipelines.codec import CodecError, decode_control_record  # the codec owns the schema

    if record.key is None:
        return "control record without a key"
    try:
        decoded = decode_control_record(record.key, record.value)
    except CodecError as exc:
        return f"cannot decode control record: {exc}"
    record.control_record = decoded
    ctype = decoded.get("type") if isinstance(decoded, dict) else None
    record.control_type = str(ctype) if ctype is not None else None
    return None


# ----------------------------------------------------------- legacy message sets (magic 0/1)

def _read_legacy(data: bytes, pos: int, end: int, file, broker, partition) -> Iterator[Item]:
    """One shallow legacy message: a plain record, or a compressed wrapper whose value is
    an inner message set (LegacyRecord.java / AbstractLegacyRecordBatch.java)."""
    try:
        wrapper = _parse_legacy_message(data, pos, end)
    except RecordFormatError as exc:
        offset = _I64.unpack_from(data, pos)[0]
        yield SegmentError(file, broker, partition, pos, f"corrupt legacy message: {exc}", offset, offset)
        return
    offset, magic, attrs, ts, key, value = wrapper
    codec = attrs & 0x07
    log_append = magic == 1 and bool(attrs & 0x08)
    ts_type = NO_TIMESTAMP_TYPE if magic == 0 else (LOG_APPEND_TIME if log_append else CREATE_TIME)

    def fail(msg: str, first=offset, last=offset) -> SegmentError:
        return SegmentError(file, broker, partition, pos, msg, first, last)

    if codec not in comp.CODEC_NAMES:
        yield fail(f"unknown compression codec id {codec} in message attributes {attrs:#04x}")
        return
    batch = SegmentBatch(
        file=file, broker=broker, partition=partition, batch_position=pos, size=end - pos,
        base_offset=offset, last_offset=offset, magic=magic,
        compression=comp.CODEC_NAMES[codec], timestamp_type=ts_type, max_timestamp=ts,
        records_count=1, crc=struct.unpack_from(">I", data, pos + 12)[0],
    )
    if codec == comp.NONE:
        yield SegmentRecord(offset, ts, key, value, (), -1, batch)
        return
    if codec == comp.ZSTD:
        yield fail(f"zstd compression in a magic-{magic} message (zstd needs magic 2)")
        return
    if value is None:
        yield fail("compressed wrapper message has a null value")
        return
    try:
        inner_bytes = comp.decompress(codec, value, magic=magic)
    except comp.CompressionError as exc:
        yield fail(f"cannot decompress wrapper message: {exc}")
        return

    # Frame the inner message set first: magic-1 inner offsets are relative and only the
    # last one tells how they map onto the wrapper's (absolute, = last inner) offset.
    inner: list = []
    ipos, iend = 0, len(inner_bytes)
    while ipos < iend:
        if iend - ipos < LOG_OVERHEAD + _MIN_LENGTH[0]:
            inner.append(RecordFormatError(f"truncated inner message at byte {ipos} of the wrapper"))
            break
        ioffset, isize = struct.unpack_from(">qi", inner_bytes, ipos)
        inext = ipos + LOG_OVERHEAD + isize
        if isize < _MIN_LENGTH[0] or inext > iend:
            inner.append(RecordFormatError(f"inner message size {isize} overruns the wrapper at byte {ipos}"))
            break
        try:
            inner.append(_parse_legacy_message(inner_bytes, ipos, inext))
        except RecordFormatError as exc:
            inner.append((ioffset, exc))
        ipos = inext
    framed = [m for m in inner if not isinstance(m, RecordFormatError)]
    if not framed:
        yield fail("compressed wrapper message holds no inner messages")
        return
    if magic > 0:
        shift = offset - framed[-1][0]  # absolute = wrapper offset - last relative + relative
    else:
        shift = 0  # magic 0 inner messages carry absolute offsets
    batch.base_offset = framed[0][0] + shift
    batch.records_count = len(framed)
    for m in inner:
        if isinstance(m, RecordFormatError):
            yield fail(f"corrupt inner message: {m}", batch.base_offset, offset)
            continue
        if isinstance(m[1], RecordFormatError):
            yield fail(f"corrupt inner message: {m[1]}", m[0] + shift, m[0] + shift)
            continue
        ioffset, imagic, iattrs, its, ikey, ivalue = m
        if iattrs & 0x07:
            yield fail("nested compression inside a wrapper message", ioffset + shift, ioffset + shift)
            continue
        if imagic != magic:
            yield fail(
                f"inner message magic {imagic} differs from its wrapper's {magic}",
                ioffset + shift, ioffset + shift,
            )
            continue
        timestamp = ts if log_append else its
        yield SegmentRecord(ioffset + shift, timestamp, ikey, ivalue, (), -1, batch)


def _parse_legacy_message(data: bytes, pos: int, end: int):
    """(offset, magic, attributes, timestamp, key, value) of the message at data[pos:end],
    with its CRC-32 checked."""
    offset, _size, crc, magic, attrs = _LEGACY_HEADER.unpack_from(data, pos)
    if magic > 1:
        raise RecordFormatError(f"magic {magic} message inside a legacy message set")
    computed = zlib.crc32(memoryview(data)[pos + 16 : end]) & 0xFFFFFFFF
    if computed != crc:
        raise RecordFormatError(f"CRC-32 mismatch: stored {crc:#010x}, computed {computed:#010x}")
    p = pos + 18
    if magic == 1:
        if p + 8 > end:
            raise RecordFormatError("truncated timestamp")
        ts = _I64.unpack_from(data, p)[0]
        p += 8
    else:
        ts = -1
    key, p = _legacy_bytes(data, p, end, "key")
    value, p = _legacy_bytes(data, p, end, "value")
    if p != end:
        raise RecordFormatError(f"{end - p} unexpected bytes after the value")
    return offset, magic, attrs, ts, key, value


def _legacy_bytes(data: bytes, p: int, end: int, what: str):
    if p + 4 > end:
        raise RecordFormatError(f"truncated {what} length")
    n = _I32.unpack_from(data, p)[0]
    p += 4
    if n < 0:
        return None, p
    if p + n > end:
        raise RecordFormatError(f"{what} of {n} bytes overruns the message")
    return data[p : p + n], p + n
