"""Where the batches of a segment are: framing, and resynchronisation after damage.

A batch proves itself when its header is consistent and its checksum matches:
* record batch v2 (magic 2): a Length that holds the header and stays inside the file,
  LastOffsetDelta >= 0, 0 <= RecordsCount <= LastOffsetDelta + 1 (every record has an
  offset of its own), no record bytes when RecordsCount is 0, and the CRC-32C over
  Attributes..end;
* legacy message (magic 0/1): attributes without unknown bits, key and value lengths that
  fill the message exactly, and the CRC-32 over Magic..end.

BaseOffset, Length, PartitionLeaderEpoch, Magic and the CRC itself lie outside the
checksum. A Length is still checked by it (a wrong Length moves the checksummed span), so
a batch that proves itself is framed right; a batch that does not prove itself tells
nothing about where the next one starts. After damage the reader therefore looks, byte by
byte, for the next position where a batch proves itself, and never skips by a damaged
Length (which could jump over intact batches). Base offsets are judged afterwards, against
their neighbours (`ordering.py`).
"""
from __future__ import annotations

import re
import struct
import zlib
from typing import Iterator, NamedTuple, cast

from crc32c import crc32c

V2_HEADER = struct.Struct(">qiiBIhiqqqhii")  # 61 bytes, DefaultRecordBatch layout
V2_HEADER_SIZE = V2_HEADER.size
LOG_OVERHEAD = 12  # BaseOffset + Length
_BASE_LENGTH = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_HEADER_UP_TO_MAGIC = 17
# Smallest legal Length per magic: v2 header after Length; legacy crc+magic+attrs(+ts)+2 lengths.
MIN_LENGTH = {0: 14, 1: 22, 2: V2_HEADER_SIZE - LOG_OVERHEAD}
DAMAGED = -1  # the `magic` of a frame of bytes that hold no batch

# Where a batch may start when resynchronising, as regexes so that the scan runs in C:
# a position is looked at in Python only when its bytes could begin a batch. v2: magic 2
# at byte 16, a non-negative Length, Attributes below 0x80 (bits 7-15 are unused and Kafka
# writes them as zero), a non-negative LastOffsetDelta. Legacy: magic 0/1 at byte 16,
# attributes below 0x10, a Length of 14 bytes up to 16 MiB (its first byte 0; legacy
# messages over 16 MiB are not searched for: Kafka's message.max.bytes is 1 MiB).
_V2_CANDIDATE = re.compile(rb"(?=[\x00-\xff]{8}[\x00-\x7f][\x00-\xff]{7}\x02[\x00-\xff]{4}\x00[\x00-\x7f][\x00-\x7f])")
_LEGACY_CANDIDATE = re.compile(
    rb"(?=[\x00-\xff]{8}\x00(?!\x00\x00[\x00-\x0d])[\x00-\xff]{7}[\x00\x01][\x00-\x0f])"
)


class Frame(NamedTuple):
    """A batch that proves itself: its header is consistent and its checksum valid."""

    pos: int
    end: int
    magic: int  # 0, 1 or 2
    base: int
    last: int  # last offset the batch spans (BaseOffset + LastOffsetDelta)
    info: tuple  # v2: the unpacked header (V2_HEADER); legacy: ()


class Damaged(NamedTuple):
    """Bytes that hold no batch, up to the next one that proves itself (or the end)."""

    pos: int
    end: int
    magic: int  # always DAMAGED: a frame's fields, so a reader can look at either kind alike
    base: int | None  # the base offset the first bytes claim, if any
    last: None
    info: str  # why the bytes hold no batch, and what was skipped


# tuple.__new__ skips NamedTuple's Python-level __new__: one batch, one frame, on the hot path.
_new_frame = tuple.__new__


def iter_frames(data: bytes) -> Iterator[Frame | Damaged]:
    """The frames of a segment in file order: batches, and the damaged stretches between
    them (each up to the next batch that proves itself, or to the end of the file)."""
    n = len(data)
    zeros = len(data.rstrip(b"\x00"))  # where the trailing zeros start (no copy when none)
    pos = 0
    while pos < n:
        frame = frame_at(data, pos, n)
        if frame.__class__ is Frame:
            yield frame
            pos = frame.end
            continue
        if _zero_tail(pos, n, zeros):
            return
        resume = resync(data, pos + 1, n, zeros)
        if resume is None:
            where = f"no readable batch in the remaining {n - pos} bytes of the segment"
            if cast(str, frame).startswith("truncated"):  # not a Frame: the problem text
                where += " (a segment still being written?)"
        else:
            where = f"skipped {resume - pos} bytes up to the next readable batch at byte {resume}"
        yield Damaged(pos, n if resume is None else resume, DAMAGED, _claimed_base(data, pos, n), None,
                      f"{frame}; {where}")
        if resume is None:
            return
        pos = resume


def frame_at(data: bytes, pos: int, n: int) -> Frame | str:
    """The batch at `pos` if it proves itself, else what is wrong with it."""
    if n - pos < _HEADER_UP_TO_MAGIC:
        return f"truncated batch: only {n - pos} bytes left at the end of the segment"
    magic = data[pos + 16]
    if magic == 2:
        return _v2_frame(data, pos, n)
    if magic == 0 or magic == 1:
        return _legacy_frame(data, pos, n, magic)
    return f"invalid magic byte {magic} (expected 0, 1 or 2): not a Kafka record batch"


def _length_problem(length: int, magic: int, pos: int, n: int) -> str | None:
    if length < MIN_LENGTH[magic]:
        return f"invalid batch length {length} for magic {magic} (at least {MIN_LENGTH[magic]})"
    if pos + LOG_OVERHEAD + length > n:
        return (f"truncated batch: it declares {LOG_OVERHEAD + length} bytes but the segment has "
                f"only {n - pos} left")
    return None


def _v2_frame(data: bytes, pos: int, n: int) -> Frame | str:
    length = _I32.unpack_from(data, pos + 8)[0]
    problem = _length_problem(length, 2, pos, n)
    if problem is not None:
        return problem
    end = pos + LOG_OVERHEAD + length
    header = V2_HEADER.unpack_from(data, pos)
    last_delta, count = header[6], header[12]
    # The cheap consistency checks come before the CRC: resynchronisation tries many
    # candidate positions, and most fail here.
    if last_delta < 0:
        return f"invalid last offset delta {last_delta} (negative)"
    if count < 0 or count > last_delta + 1:
        return f"invalid records count {count} for a batch spanning {last_delta + 1} offsets"
    if count == 0 and end != pos + V2_HEADER_SIZE:
        return f"records count 0 but {end - pos - V2_HEADER_SIZE} bytes of records follow the header"
    crc = header[4]
    computed = crc32c(memoryview(data)[pos + 21 : end])
    if computed != crc:
        return f"CRC-32C mismatch: stored {crc:#010x}, computed {computed:#010x} (corrupt batch)"
    return _new_frame(Frame, (pos, end, 2, header[0], header[0] + last_delta, header))


def _legacy_frame(data: bytes, pos: int, n: int, magic: int) -> Frame | str:
    base, length = _BASE_LENGTH.unpack_from(data, pos)
    problem = _length_problem(length, magic, pos, n)
    if problem is not None:
        return problem
    end = pos + LOG_OVERHEAD + length
    attrs = data[pos + 17]
    if attrs & (0xF8 if magic == 0 else 0xF0):  # codec bits (+ timestamp type in magic 1)
        return f"invalid attributes {attrs:#04x} for a magic-{magic} message"
    p = pos + 18 + (8 if magic == 1 else 0)
    key_len = _I32.unpack_from(data, p)[0]
    p += 4 + max(key_len, 0)
    if key_len < -1 or p + 4 > end:
        return f"invalid key length {key_len} in a {length}-byte message"
    value_len = _I32.unpack_from(data, p)[0]
    if value_len < -1 or p + 4 + max(value_len, 0) != end:
        return f"key and value lengths ({key_len}, {value_len}) do not fill the {length}-byte message"
    crc = _U32.unpack_from(data, pos + 12)[0]
    computed = zlib.crc32(memoryview(data)[pos + 16 : end]) & 0xFFFFFFFF
    if computed != crc:
        return f"CRC-32 mismatch: stored {crc:#010x}, computed {computed:#010x} (corrupt message)"
    return Frame(pos, end, magic, base, base, ())


def _zero_tail(pos: int, n: int, zeros: int) -> bool:
    """A preallocated, never-written tail (`log.preallocate=true`): zeros from `pos` to
    the end (they start at `zeros`). A run of zeros shorter than a batch header is more
    likely the cut-off start of a batch."""
    return pos >= zeros and n - pos >= _HEADER_UP_TO_MAGIC


def _claimed_base(data: bytes, pos: int, n: int) -> int | None:
    """The base offset damaged bytes claim, when they at least look like a batch start."""
    if n - pos < _HEADER_UP_TO_MAGIC or data[pos + 16] not in MIN_LENGTH:
        return None
    return _BASE_LENGTH.unpack_from(data, pos)[0]


def resync(data: bytes, start: int, n: int, zeros: int) -> int | None:
    """Position of the next batch at or after `start` that proves itself, or None.

    A batch found this way may have borrowed its last bytes: a cut-off copy of a batch
    can end with bytes that happen to equal the start of the batch after the damage. So a
    batch that is not followed by another one (or by the end of the file, or by zeros) gives
    way to one that starts inside it and is."""
    found = _proving(data, start, n)
    first = next(found, None)
    if first is None or _chained(data, first, n, zeros):
        return first
    end = cast(Frame, frame_at(data, first, n)).end  # `first` proves itself: a Frame
    for p in found:
        if p >= end:
            break
        if _chained(data, p, n, zeros):
            return p
    return first


def _proving(data: bytes, start: int, n: int) -> Iterator[int]:
    """Positions at or after `start` where a batch proves itself, in file order."""
    while True:
        v2 = _next_v2(data, start, n)
        legacy = _next_legacy(data, start, n if v2 is None else v2, n)
        p = v2 if legacy is None else legacy
        if p is None:
            return
        yield p
        start = p + 1


def _chained(data: bytes, pos: int, n: int, zeros: int) -> bool:
    """Whether the batch at `pos` is followed by another one, the end of the file or zeros."""
    end = cast(Frame, frame_at(data, pos, n)).end  # `pos` proves itself: a Frame
    return end == n or frame_at(data, end, n).__class__ is Frame or _zero_tail(end, n, zeros)


def _next_v2(data: bytes, start: int, n: int) -> int | None:
    for m in _V2_CANDIDATE.finditer(data, start):
        p = m.start()
        if _v2_frame(data, p, n).__class__ is Frame:
            return p
    return None


def _next_legacy(data: bytes, start: int, stop: int, n: int) -> int | None:
    """First legacy message that proves itself in [start, stop)."""
    for m in _LEGACY_CANDIDATE.finditer(data, start, min(n, stop + 18)):
        p = m.start()
        if p >= stop:
            return None
        if _legacy_frame(data, p, n, data[p + 16]).__class__ is Frame:
            return p
    return None
