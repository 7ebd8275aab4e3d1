"""Read `__consumer_offsets` `.log` segment files: record batches v2 and legacy message sets.

A segment is a plain concatenation of batches with no file header (kafka-internals §1.12).
Every batch starts with BaseOffset:int64, Length:int32 (bytes after the Length field), and
has its magic byte at position 16 in all three formats, which is how the format of each
batch is told apart.

What the reader promises:
* Every record comes out as a `SegmentRecord` (key/value bytes plus batch facts); every
  empty batch (RecordsCount 0, left by compaction to keep producer state) as its
  `SegmentBatch`; everything that cannot be read as a `SegmentError` carrying the file,
  byte position and the offsets it covers. Nothing is skipped silently.
* Damage costs only the damaged bytes: a batch that does not prove itself (consistent
  header, valid CRC; see `framing.py`) is skipped up to the next batch that does, found
  byte by byte, never by trusting the damaged batch's Length. One error reports the
  skipped bytes and the offsets they held; if no batch follows (a segment cut off while
  being written, or not a segment at all) the file ends with an error.
* Offsets are believable or reported (`ordering.py`): within int64 and the segment's
  window (from its file name), in increasing order; a duplicated batch is an error.
  Inside a batch, record offsets increase within the batch's range and timestamps fit in
  int64; decompression stops at a cap derived from the batch header.
* Trailing zero bytes (a preallocated segment, `log.preallocate=true`) end the file quietly:
  they are not data.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Union

from . import compression as comp
from .framing import LOG_OVERHEAD, MIN_LENGTH, V2_HEADER_SIZE, Frame, iter_frames
from .model import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    SegmentBatch,
    SegmentError,
    SegmentRecord,
)
from .ordering import int64_or_none, judge
from .paths import SEGMENT_FILE, partition_from_path

Item = Union[SegmentRecord, SegmentBatch, SegmentError]

_LEGACY_HEADER = struct.Struct(">qiIBB")  # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_INT32_MAX = 0x7FFFFFFF
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# What a compressed batch may decompress to. Kafka bounds a batch by its compressed size
# only (max.message.bytes), so a small payload can claim gigabytes (a 1 MB segment once
# took 2.1 GB). The cap follows the batch's own header: RecordsCount records of at most
# 1 MiB each -- Kafka's default message.max.bytes, which with the default
# offsets.topic.compression.codec (none) no coordinator record can exceed; a bigger one
# needs compression configured, and is reported, not dropped -- and never more than
# 64 MiB, so that a forged RecordsCount cannot lift it. 64 MiB is far above any
# coordinator batch (an OffsetCommit of 100,000 partitions is about 10 MB) and small next
# to the segment already in memory. Legacy wrappers have no record count: they get 64 MiB.
MAX_RECORD_BYTES = 1024 * 1024
MAX_DECOMPRESSED_BATCH = 64 * 1024 * 1024


class RecordFormatError(ValueError):
    """Record bytes inside a batch that do not parse."""


def iter_segment_records(
    path: str | Path,
    partition: int | None = None,
    broker: str | None = None,
) -> Iterator[Item]:
    """Every record, empty batch and error of one `.log` segment file, in file order.

    `partition` defaults to the N of an enclosing `__consumer_offsets-N` folder; a file
    named `NNNNNNNNNNNNNNNNNNNN.log` gives the lowest offset its batches may hold.
    """
    return _records(iter_segment_units(path, partition, broker))


def iter_buffer_records(
    data: bytes,
    *,
    file: str = "<memory>",
    partition: int | None = None,
    broker: str | None = None,
    segment_base: int | None = None,
) -> Iterator[Item]:
    """Like `iter_segment_records`, over segment bytes already in memory; `segment_base`
    is the base offset a segment file's name gives."""
    return _records(iter_buffer_units(data, file=file, partition=partition, broker=broker,
                                      segment_base=segment_base))


def iter_segment_units(
    path: str | Path,
    partition: int | None = None,
    broker: str | None = None,
) -> Iterator[Item | V2Records]:
    """`iter_segment_records` with each readable v2 batch's records left unparsed, as a
    `V2Records`: for a consumer that handles whole batches (`decode`'s compiled path)."""
    path = Path(path)
    if partition is None:
        partition = partition_from_path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return iter([SegmentError(str(path), broker, partition, 0, f"cannot read segment: {exc.strerror or exc}")])
    m = SEGMENT_FILE.match(path.name)
    return iter_buffer_units(data, file=str(path), partition=partition, broker=broker,
                             segment_base=int(m.group(1)) if m else None)


def iter_buffer_units(
    data: bytes,
    *,
    file: str = "<memory>",
    partition: int | None = None,
    broker: str | None = None,
    segment_base: int | None = None,
) -> Iterator[Item | V2Records]:
    data = bytes(data)
    for frame, problem, first, last in judge(iter_frames(data), segment_base):
        if problem is not None:
            yield SegmentError(file, broker, partition, frame.pos, problem, first, last)
            continue
        assert isinstance(frame, Frame) and first is not None  # judge accepts checked batches only
        if frame.magic == 2:
            yield _open_v2(data, frame, file, broker, partition)
        else:
            yield from _read_legacy(data, frame, first, file, broker, partition)


def _records(units: Iterator[Item | V2Records]) -> Iterator[Item]:
    for unit in units:
        if type(unit) is V2Records:
            yield from unit.items()
        else:
            yield unit  # type: ignore[misc]


# ------------------------------------------------------------------------ record batch v2

@dataclass(slots=True)
class V2Records:
    """A v2 batch that checks out (framed, offsets judged, decompressed), its `count`
    records not parsed yet: they are `buf[pos:end]`. `items()` parses them."""

    batch: SegmentBatch
    buf: bytes
    pos: int
    end: int
    base_timestamp: int
    log_append: bool
    max_timestamp: int
    last_delta: int

    def items(self) -> list[Item]:
        """The batch's records in offset order; a record that does not parse ends the
        list with an error covering it and every offset after it. A list: records pass
        through fewer generator levels."""
        b = self.batch
        items, problem = _v2_records(self.buf, self.pos, self.end, b.records_count, b, self.base_timestamp,
                                     self.log_append, self.max_timestamp, self.last_delta)
        if b.control:
            for i, record in enumerate(items):
                error = _decode_control(record)
                if error is not None:
                    items[i] = SegmentError(b.file, b.broker, b.partition, b.batch_position, error,
                                            record.offset, record.offset)
        if problem is not None:
            first = items[-1].offset + 1 if items else b.base_offset
            items.append(SegmentError(b.file, b.broker, b.partition, b.batch_position,
                                      f"corrupt record in batch: {problem}", first, b.last_offset))
        return items


def _open_v2(data: bytes, frame: Frame, file, broker, partition) -> V2Records | SegmentBatch | SegmentError:
    """One v2 batch (framed, so its header is consistent and its CRC valid): its records,
    still to parse; or the batch itself when it is empty; or why it cannot be read."""
    (
        base_offset, _length, leader_epoch, magic, crc, attrs, last_delta,
        base_ts, max_ts, producer_id, producer_epoch, base_sequence, count,
    ) = frame.info
    pos, end, last_offset = frame.pos, frame.end, frame.last
    codec = attrs & 0x07
    if codec not in comp.CODEC_NAMES:
        return SegmentError(file, broker, partition, pos,
                            f"unknown compression codec id {codec} in batch attributes {attrs:#06x}",
                            base_offset, last_offset)
    log_append = bool(attrs & 0x08)
    batch = SegmentBatch(
        file, broker, partition, pos, end - pos, base_offset, last_offset, magic,
        comp.CODEC_NAMES[codec],
        LOG_APPEND_TIME if log_append else CREATE_TIME,
        max_ts,
        bool(attrs & 0x10),  # transactional
        bool(attrs & 0x20),  # control
        producer_id,
        producer_epoch,
        base_sequence,
        leader_epoch,
        # Attribute bit 6: BaseTimestamp holds the delete horizon set by the cleaner.
        base_ts if attrs & 0x40 else None,
        count,
        crc,
    )
    if count == 0:
        return batch  # compaction leftover: keeps the producer's sequence state
    start = pos + V2_HEADER_SIZE
    if codec:
        cap = min(count * MAX_RECORD_BYTES, MAX_DECOMPRESSED_BATCH)
        try:
            buf = comp.decompress(codec, memoryview(data)[start:end], magic=2, limit=cap)
        except comp.CompressionError as exc:
            return SegmentError(file, broker, partition, pos, f"cannot decompress batch: {exc}",
                                base_offset, last_offset)
        return V2Records(batch, buf, 0, len(buf), base_ts, log_append, max_ts, last_delta)
    return V2Records(batch, data, start, end, base_ts, log_append, max_ts, last_delta)


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


def _v2_records(buf, pos, end, count, batch, base_ts, log_append, max_ts, last_delta):
    """Parse `count` DefaultRecords from buf[pos:end] (the hot loop: keep it flat).
    Returns (records, None), or (the records before the problem, what the problem is)."""
    out: list = []
    try:
        _v2_records_into(out, buf, pos, end, count, batch, base_ts, log_append, max_ts, last_delta)
    except RecordFormatError as exc:
        return out, str(exc)
    return out, None


def _v2_records_into(out, buf, pos, end, count, batch, base_ts, log_append, max_ts, last_delta) -> None:
    append = out.append
    prev_delta = -1
    ts_min, ts_max = _INT64_MIN, _INT64_MAX
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
        # Offsets increase inside the batch's range (compaction leaves gaps, never disorder).
        if not prev_delta < offset_delta <= last_delta:
            raise RecordFormatError(
                f"record offset delta {offset_delta} is not between {prev_delta + 1} and the batch's "
                f"last offset delta {last_delta}"
            )
        prev_delta = offset_delta
        ts = max_ts if log_append else base_ts + ts_delta
        if not ts_min <= ts <= ts_max:
            raise RecordFormatError(f"record timestamp {base_ts} + {ts_delta} overflows int64")
        if base_seq < 0:
            seq = -1
        elif base_seq > _INT32_MAX - offset_delta:  # DefaultRecordBatch.incrementSequence
            seq = offset_delta - (_INT32_MAX - base_seq) - 1
        else:
            seq = base_seq + offset_delta
        append(Record(
            base_offset + offset_delta,
            ts,
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

def _read_legacy(data: bytes, frame: Frame, low: int, file, broker, partition) -> Iterator[Item]:
    """One shallow legacy message (framed, so its CRC is valid): a plain record, or a
    compressed wrapper whose value is an inner message set (LegacyRecord.java /
    AbstractLegacyRecordBatch.java). Inner offsets must lie in [low, wrapper offset]."""
    pos, end = frame.pos, frame.end
    offset, magic, attrs, ts, key, value = _legacy_fields(data, pos, end)
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
        inner_bytes = comp.decompress(codec, value, magic=magic, limit=MAX_DECOMPRESSED_BATCH)
    except comp.CompressionError as exc:
        yield fail(f"cannot decompress wrapper message: {exc}")
        return

    inner = _frame_inner(inner_bytes)
    framed = [m for m in inner if not isinstance(m, RecordFormatError)]
    if not framed:
        yield fail("compressed wrapper message holds no inner messages")
        return
    if magic > 0:
        shift = offset - framed[-1][0]  # absolute = wrapper offset - last relative + relative
    else:
        shift = 0  # magic 0 inner messages carry absolute offsets
    if low <= framed[0][0] + shift <= offset:
        batch.base_offset = framed[0][0] + shift
    batch.records_count = len(framed)
    prev = low - 1
    for m in inner:
        if isinstance(m, RecordFormatError):
            yield fail(f"corrupt inner message: {m}", batch.base_offset, offset)
            continue
        ioffset = m[0] + shift
        if not prev < ioffset <= offset:
            at = int64_or_none(ioffset)
            yield fail(f"inner message offset {ioffset} is not between {prev + 1} and the wrapper's offset {offset}",
                       at, at)
            continue
        prev = ioffset
        if isinstance(m[1], RecordFormatError):
            yield fail(f"corrupt inner message: {m[1]}", ioffset, ioffset)
            continue
        _, imagic, iattrs, its, ikey, ivalue = m
        if iattrs & 0x07:
            yield fail("nested compression inside a wrapper message", ioffset, ioffset)
            continue
        if imagic != magic:
            yield fail(f"inner message magic {imagic} differs from its wrapper's {magic}", ioffset, ioffset)
            continue
        timestamp = ts if log_append else its
        yield SegmentRecord(ioffset, timestamp, ikey, ivalue, (), -1, batch)


def _frame_inner(inner_bytes: bytes) -> list:
    """The inner message set of a wrapper, framed first: magic-1 inner offsets are relative
    and only the last one tells how they map onto the wrapper's (absolute, = last inner)
    offset. Items: parsed messages, (offset, RecordFormatError) for a message that does
    not parse, and a final RecordFormatError where the framing breaks."""
    inner: list = []
    ipos, iend = 0, len(inner_bytes)
    while ipos < iend:
        if iend - ipos < LOG_OVERHEAD + MIN_LENGTH[0]:
            inner.append(RecordFormatError(f"truncated inner message at byte {ipos} of the wrapper"))
            break
        ioffset, isize = struct.unpack_from(">qi", inner_bytes, ipos)
        inext = ipos + LOG_OVERHEAD + isize
        if isize < MIN_LENGTH[0] or inext > iend:
            inner.append(RecordFormatError(f"inner message size {isize} overruns the wrapper at byte {ipos}"))
            break
        try:
            inner.append(_parse_legacy_message(inner_bytes, ipos, inext))
        except RecordFormatError as exc:
            inner.append((ioffset, exc))
        ipos = inext
    return inner


def _parse_legacy_message(data: bytes, pos: int, end: int):
    """(offset, magic, attributes, timestamp, key, value) of the inner message at
    data[pos:end], with its CRC-32 checked."""
    crc, magic = struct.unpack_from(">IB", data, pos + 12)
    if magic > 1:
        raise RecordFormatError(f"magic {magic} message inside a legacy message set")
    computed = zlib.crc32(memoryview(data)[pos + 16 : end]) & 0xFFFFFFFF
    if computed != crc:
        raise RecordFormatError(f"CRC-32 mismatch: stored {crc:#010x}, computed {computed:#010x}")
    return _legacy_fields(data, pos, end)


def _legacy_fields(data: bytes, pos: int, end: int):
    """(offset, magic, attributes, timestamp, key, value) of the message at data[pos:end]."""
    offset, _size, _crc, magic, attrs = _LEGACY_HEADER.unpack_from(data, pos)
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
