"""Fuzz the segment reader and the record codec with mutated segments (seeded, random).

Seeds: the recorded Kafka 3.9 segments (`../shared/recordings`, read in place, never
copied) and segments written by `pipelines/segments/writer.py` (every codec, legacy
magic 0/1 with compressed wrappers, transaction markers, empty and compacted batches).
A reader input is a run of consecutive batches of a seed with one mutation: bit flips,
insertions, deletions, truncation at and inside batches, forged Length, CRC and base
offset fields, batches re-checksummed around forged headers, huge varints, out-of-order
offsets, decompression bombs, duplicated batches, zeroed tails, and garbage or empty
files. A codec input is a recorded key or value with one mutation.

What is checked, per reader input, against the decoding of the unmutated bytes:
* no exception (the reader reports problems as items, it never raises), no hang;
* every batch the mutation left intact decodes exactly as before (at its shifted byte
  position); the only allowed loss is a batch whose offsets a forged offset field now
  claims (which of two checksummed batches claiming the same offsets is the real one
  cannot be told), and that loss must be reported at the batch's position;
* damage is reported: an error item at a byte position from the damaged batch's start to
  the end of the damage -- unless nothing is left to see (the mutation removed whole
  batches, zeroed a tail from a batch boundary like a preallocated segment, or only
  changed a field no checksum covers within believable values);
* record offsets increase through the file and every offset and timestamp fits int64;
* `decode`'s lines through its compiled core (native/) are the pure-Python path's text.
Per codec input: a decoded record or `CodecError`, nothing else, no hang.

    .venv/bin/python bench/fuzz_segments.py                 # 1,000,000 inputs
    .venv/bin/python bench/fuzz_segments.py 20000 --seed 7
"""
from __future__ import annotations

import argparse
import random
import re
import resource
import signal
import struct
import sys
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crc32c import crc32c  # noqa: E402

from pipelines.codec import CodecError, decode_record, encode_key, encode_value  # noqa: E402
from pipelines.segments import SegmentBatch, SegmentError, SegmentRecord, iter_buffer_records  # noqa: E402
from pipelines.segments import compression as comp  # noqa: E402
from pipelines.segments.framing import DAMAGED, iter_frames  # noqa: E402
from pipelines.segments.jsonlines import LineEncoder, _native  # noqa: E402
from pipelines.segments.reader import iter_buffer_units  # noqa: E402
from pipelines.segments.paths import SEGMENT_FILE  # noqa: E402
from pipelines.segments.writer import (  # noqa: E402
    WriteRecord,
    build_batch_v2,
    build_control_batch,
    build_legacy_message_set,
    zigzag_varint,
)

REPO = Path(__file__).resolve().parents[1]
RECORDINGS = REPO.parent / "shared" / "recordings"
T0 = 1_795_337_253_311
HANG_SECONDS = 5.0
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_WINDOW = 12  # batches per reader input: small inputs keep a case around a millisecond


# ---------------------------------------------------------------------------------- seeds

@dataclass
class Seed:
    name: str
    data: bytes
    segment_base: int | None
    batches: list  # (pos, end, magic, first offset, last offset) of every batch, in file order


def _seed(name: str, data: bytes, segment_base: int | None) -> Seed:
    frames = list(iter_frames(data))
    if any(f.magic == DAMAGED for f in frames):
        raise ValueError(f"seed {name} does not frame cleanly")
    # A legacy wrapper's header holds its last offset; its first is its first inner one.
    first = {}
    for item in iter_buffer_records(data, segment_base=segment_base):
        if isinstance(item, SegmentRecord):
            first.setdefault(item.batch_position, item.offset)
    batches = [(f.pos, f.end, f.magic, f.base if f.magic == 2 else first[f.pos], f.last) for f in frames]
    return Seed(name, data, segment_base, batches)


def recorded_seeds(recordings: Path = RECORDINGS) -> list[Seed]:
    """Every non-empty recorded segment, read where it lies."""
    out = []
    for path in sorted(recordings.glob("*/offsets_segments/__consumer_offsets-*/*.log")):
        data = path.read_bytes()
        m = SEGMENT_FILE.match(path.name)
        if data:
            out.append(_seed(f"{path.parts[-4]}/{path.parts[-2]}/{path.name}", data, int(m.group(1)) if m else None))
    return out


def _commit(group: str, partition: int, offset: int) -> WriteRecord:
    key = encode_key(1, {"group": group, "topic": "orders", "partition": partition})
    value = encode_value(1, 3, {"offset": offset, "leaderEpoch": 0, "metadata": "", "commitTimestamp": T0})
    return WriteRecord(key, value, T0 + offset)


def _commits(n: int, start: int) -> list[WriteRecord]:
    return [_commit(f"g{i % 3}", i % 5, start + i) for i in range(n)]


def writer_seeds() -> list[Seed]:
    """Segments of every format the reader claims to read, written by our writer."""
    v2 = []
    offset = 100
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        v2.append(build_batch_v2(_commits(4, offset), offset, compression=codec, timestamp=T0))
        offset += 4
    v2.append(build_batch_v2([WriteRecord(b"k", None, T0, headers=[("h", b"v")])], offset,
                             timestamp=T0 + 9, timestamp_type="LogAppendTime"))
    offset += 1
    v2.append(build_batch_v2(_commits(2, 0), offset, transactional=True, producer_id=7, producer_epoch=1,
                             base_sequence=0, timestamp=T0))
    v2.append(build_control_batch(offset + 2, "COMMIT", producer_id=7, producer_epoch=1, timestamp=T0))
    offset += 3
    v2.append(build_batch_v2([], offset, last_offset=offset + 2, producer_id=8, producer_epoch=0, timestamp=T0))
    offset += 3
    gaps = [WriteRecord(r.key, r.value, r.timestamp, offset=offset + 3 * i) for i, r in enumerate(_commits(3, 0))]
    v2.append(build_batch_v2(gaps, offset, last_offset=offset + 9, compression="gzip", delete_horizon_ms=T0))
    legacy = []
    offset = 0
    for magic in (0, 1):
        for codec in ("none", "gzip", "snappy", "lz4"):
            legacy.append(build_legacy_message_set(_commits(3, offset), offset, magic=magic,
                                                   compression=codec, timestamp=T0))
            offset += 3
    upgraded = legacy[-2:] + [build_batch_v2(_commits(3, offset), offset, compression="lz4", timestamp=T0)]
    return [_seed("writer/v2", b"".join(v2), 100), _seed("writer/legacy", b"".join(legacy), 0),
            _seed("writer/upgrade", b"".join(upgraded), None)]


# ------------------------------------------------------------------------------ mutations

@dataclass
class Mutation:
    """The mutated bytes, and what changed: bytes [d0, d1) of the original gave way to
    `ins` bytes. `must_report`: the damage leaves something to see. `claims`: offsets a
    forged offset field makes the batch at `d0` claim: an intact batch out of order with
    them may lose, as nothing tells which of the two base offsets is the damaged one."""

    kind: str
    data: bytes
    d0: int
    d1: int
    ins: int
    must_report: bool = True
    claims: tuple[int, int] | None = None  # (first, last) offset now claimed by the batch at d0


def _raw_record(ts_delta: int, off_delta: int, key: bytes | None, value: bytes | None,
                length_delta: int = 0, key_len: int | None = None) -> bytes:
    v = zigzag_varint
    kl = (-1 if key is None else len(key)) if key_len is None else key_len
    body = b"\x00" + v(ts_delta) + v(off_delta) + v(kl) + (key or b"")
    body += v(-1 if value is None else len(value)) + (value or b"") + v(0)
    return v(len(body) + length_delta) + body


def forged_v2(base: int, records: bytes, count: int, last_delta: int, *, attrs: int = 0,
              base_ts: int = T0, codec: int = 0) -> bytes:
    """A v2 batch with any header values, and a CRC-32C that matches them."""
    body = comp.compress(codec, records) if codec in comp.CODEC_NAMES and codec else records
    after = struct.pack(">hiqqqhii", attrs | codec, last_delta, base_ts, base_ts, -1, -1, -1, count) + body
    return struct.pack(">qiiBI", base, 49 + len(body), 0, 2, crc32c(after)) + after


class Mutator:
    """One random mutation of a window of a seed."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def mutate(self, data: bytes, batches: list) -> Mutation:
        kinds = (
            (self.bit_flip, 20), (self.insert, 10), (self.delete, 10), (self.truncate, 8),
            (self.forge_length, 6), (self.forge_crc, 3), (self.forge_offset, 6),
            (self.forged_header, 12), (self.huge_varint, 6), (self.bomb, 2), (self.duplicate, 4),
            (self.zero_tail, 4), (self.garbage, 3), (self.empty, 1),
        )
        pick = self.rng.choices([k for k, _ in kinds], weights=[w for _, w in kinds])[0]
        return pick(data, batches)

    # -- helpers
    def _batch(self, batches):
        return self.rng.choice(batches)

    def _replace(self, kind, data, d0, d1, new: bytes, **kw) -> Mutation:
        return Mutation(kind, data[:d0] + new + data[d1:], d0, d1, len(new), **kw)

    # -- raw damage
    def bit_flip(self, data, batches):
        i = self.rng.randrange(len(data))
        new = bytes([data[i] ^ (1 << self.rng.randrange(8))])
        pos, _, magic, base, last = next(b for b in batches if b[0] <= i < b[1])
        rel = i - pos
        if rel < 8:  # BaseOffset (a legacy message's last offset): outside every checksum
            moved = struct.unpack(">q", (data[pos:i] + new + data[i + 1 : pos + 8]))[0]
            claims = (moved, moved + last - base) if magic == 2 else (moved - (last - base), moved)
            return self._replace("bit flip (base offset)", data, i, i + 1, new, must_report=False, claims=claims)
        if magic == 2 and 12 <= rel < 16:  # PartitionLeaderEpoch: no checksum, any value believable
            return self._replace("bit flip (leader epoch)", data, i, i + 1, new, must_report=False)
        return self._replace("bit flip", data, i, i + 1, new)

    def _junk(self, data, n, fragments=True):
        r = self.rng.random() * (1 if fragments else 0.7)
        if r < 0.3:
            return bytes(self.rng.getrandbits(8) for _ in range(n))
        if r < 0.5:
            return bytes(n)
        if r < 0.7:  # bytes that look like batch starts
            return (b"\x00" * 8 + struct.pack(">i", self.rng.randrange(1, 200)) + b"\x00\x00\x00\x00\x02") * (n // 17 + 1)
        start = self.rng.randrange(len(data))  # a fragment of the segment itself
        return data[start : start + n] or b"\x02"

    def _point(self, data, batches):
        """A random byte position, or a batch boundary (half of the time)."""
        if self.rng.random() < 0.5:
            return self.rng.choice([b[0] for b in batches] + [len(data)])
        return self.rng.randrange(len(data) + 1)

    def insert(self, data, batches):
        at = self._point(data, batches)
        junk = self._junk(data, self.rng.choice((1, 3, 8, 17, 61, self.rng.randrange(1, 400))))
        return self._replace("insertion", data, at, at, junk)

    def delete(self, data, batches):
        at = self._point(data, batches)
        n = self.rng.choice((1, 4, 12, 61, self.rng.randrange(1, 300)))
        return self._replace("deletion", data, at, min(len(data), at + n), b"")

    def truncate(self, data, batches):
        pos, end = self._batch(batches)[:2]
        cut = pos if self.rng.random() < 0.3 else self.rng.randrange(pos, end)
        return self._replace("truncation", data, cut, len(data), b"")

    def zero_tail(self, data, batches):
        at = self._point(data, batches)
        return self._replace("zeroed tail", data, at, len(data), bytes(len(data) - at))

    def garbage(self, data, batches):
        # No fragments of the segment: a whole batch among them would be a valid file.
        junk = self._junk(data, self.rng.randrange(1, 2000), fragments=False)
        return Mutation("garbage file", junk, 0, len(data), len(junk))

    def empty(self, data, batches):
        return Mutation("empty file", b"", 0, len(data), 0, must_report=False)

    # -- fields outside the checksum
    def forge_length(self, data, batches):
        pos, end = self._batch(batches)[:2]
        length = end - pos - 12
        value = self.rng.choice((0, -1, 13, 48, length - 1, length + 1, length + 61, len(data), 0x7FFFFFFF,
                                 self.rng.randrange(-(1 << 31), 1 << 31)))
        value = value if value != length else length + 1
        return self._replace("forged length", data, pos + 8, pos + 12, struct.pack(">i", value))

    def forge_crc(self, data, batches):
        pos, _, magic = self._batch(batches)[:3]
        at = pos + (17 if magic == 2 else 12)
        old = data[at : at + 4]
        new = old
        while new == old:
            new = struct.pack(">I", self.rng.getrandbits(32))
        return self._replace("forged CRC", data, at, at + 4, new)

    def forge_offset(self, data, batches):
        pos, _, magic, base, last = self._batch(batches)
        field_ = base if magic == 2 else last  # what the first 8 bytes hold
        value = self.rng.choice((field_ + 1, field_ - 1, field_ + (1 << 48), field_ ^ (1 << self.rng.randrange(63)),
                                 -field_ - 1, INT64_MAX, INT64_MIN, 0, last + 1))
        claims = (value, value + last - base) if magic == 2 else (value - (last - base), value)
        return self._replace("forged base offset", data, pos, pos + 8, struct.pack(">q", value),
                             must_report=False, claims=claims)

    # -- batches that pass their CRC but hold forged headers or records; each spans the
    # offsets of the batch it replaces, so that only the forged field is wrong
    def forged_header(self, data, batches):
        pos, end, _, base, last = self._batch(batches)
        span = last - base  # the LastOffsetDelta of the replaced batch
        n = min(3, span + 1)
        body = b"".join(_raw_record(i, i, b"k%d" % i, b"v" * i) for i in range(n))
        case = self.rng.randrange(8)
        if case == 0:
            new, kind = forged_v2(base, body, 0, span), "records count 0 with records"
        elif case == 1:
            new, kind = forged_v2(base, body, n + self.rng.choice((-1, 1)), span), "records count off by one"
        elif case == 2:
            new, kind = forged_v2(base, body, n, self.rng.choice((-1, -5))), "negative last offset delta"
        elif case == 3:
            body = b"".join(_raw_record(0, d, b"k", b"v") for d in (0, span + 1))
            new, kind = forged_v2(base, body, 2, span), "record offset past the last offset delta"
        elif case == 4:
            body = b"".join(_raw_record(0, d, b"k", b"v") for d in (0, 0))
            new, kind = forged_v2(base, body, 2, span), "record offsets out of order"
        elif case == 5:
            new, kind = forged_v2(base, body, n, span, attrs=self.rng.choice((5, 6, 7))), "unknown codec"
        elif case == 6:
            wide = self.rng.choice((span + 1, span + 50, 1 << 20, 0x7FFFFFFE))  # claims base..base+wide
            new = forged_v2(base, body, n, wide)
            return self._replace("wide last offset delta", data, pos, end, new, must_report=False,
                                 claims=(base, base + wide))
        else:
            new, kind = forged_v2(base, body[:-1] + b"\x09", n, span), "record framing under a valid CRC"
        return self._replace(f"forged header: {kind}", data, pos, end, new)

    def huge_varint(self, data, batches):
        pos, end, _, base, _ = self._batch(batches)
        big = self.rng.choice((INT64_MAX, INT64_MIN, 1 << 62, -(1 << 62), INT64_MAX - T0 + 1, 1 << 40))
        field_ = self.rng.choice(("timestamp delta", "offset delta", "key length", "record length"))
        if field_ == "timestamp delta":
            rec = _raw_record(big, 0, b"k", b"v")
        elif field_ == "offset delta":
            rec = _raw_record(0, big, b"k", b"v")
        elif field_ == "key length":
            rec = _raw_record(0, 0, b"k", b"v", key_len=big)
        else:
            rec = _raw_record(0, 0, b"k", b"v", length_delta=big)
        # A timestamp delta that stays inside int64 is a believable (if odd) timestamp.
        silent = field_ == "timestamp delta" and INT64_MIN <= T0 + big <= INT64_MAX
        new = forged_v2(base, rec, 1, 0)
        return self._replace(f"huge varint ({field_})", data, pos, end, new, must_report=not silent)

    def bomb(self, data, batches):
        pos, end, _, base, _ = self._batch(batches)
        codec = self.rng.choice((comp.GZIP, comp.ZSTD, comp.LZ4, comp.SNAPPY))
        records = _raw_record(0, 0, b"k", bytes(1100 * 1024))  # over the 1 MiB cap of one record
        return self._replace("decompression bomb", data, pos, end, forged_v2(base, records, 1, 0, codec=codec))

    def duplicate(self, data, batches):
        pos, end = self._batch(batches)[:2]
        return self._replace("duplicated batch", data, end, end, data[pos:end])


# --------------------------------------------------------------------------------- oracle

class Hang(Exception):
    pass


@contextmanager
def deadline(seconds: float):
    """Interrupt Python code still running after `seconds` (the main thread only)."""
    def _raise(*_):
        raise Hang()
    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def item_key(item) -> tuple:
    """What an item says, without where it was read."""
    if isinstance(item, SegmentRecord):
        b = item.batch
        return ("record", item.offset, item.timestamp, item.key, item.value, item.headers, item.sequence,
                item.control_type, b.base_offset, b.last_offset, b.magic, b.compression, b.timestamp_type,
                b.producer_id, b.producer_epoch, b.partition_leader_epoch, b.delete_horizon_ms)
    if isinstance(item, SegmentBatch):
        return ("empty", item.base_offset, item.last_offset, item.producer_id, item.records_count)
    return ("error", item.error, item.offset, item.last_offset)


def by_position(items) -> dict[int, list]:
    out: dict[int, list] = {}
    for item in items:
        out.setdefault(item.batch_position, []).append(item_key(item))
    return out


def reason_bucket(text: str) -> str:
    """An error text without its numbers and details, to count errors by kind."""
    head = re.sub(r"0x[0-9a-f]+|\b\d+\b", "N", text.split(";")[0]).split(" (")[0]
    return ": ".join(head.split(": ")[:2])[:90]


@dataclass
class Outcome:
    kind: str
    crash: str | None = None
    hang: bool = False
    lost: list = field(default_factory=list)  # intact batches not decoded as before
    excused: int = 0  # intact batches lost to offsets a forged field claims (reported)
    unreported: bool = False
    broken_invariant: str | None = None
    native_differs: bool = False  # decode's compiled core wrote other lines than Python
    reasons: Counter = field(default_factory=Counter)


def _invariants(items, segment_base) -> str | None:
    """Offsets increase through the file and everything fits int64."""
    floor = -1 if segment_base is None else segment_base - 1
    for item in items:
        if isinstance(item, SegmentError):
            for v in (item.offset, item.last_offset):
                if v is not None and not INT64_MIN <= v <= INT64_MAX:
                    return f"error offset {v} outside int64"
            continue
        lo, hi = (item.offset, item.offset) if isinstance(item, SegmentRecord) else (item.base_offset, item.last_offset)
        if isinstance(item, SegmentRecord) and not INT64_MIN <= item.timestamp <= INT64_MAX:
            return f"timestamp {item.timestamp} outside int64"
        if not floor < lo <= hi <= INT64_MAX:
            return f"offsets {lo}-{hi} after offset {floor}"
        floor = hi
    return None


def check_reader(seed: Seed, window: tuple[int, int], mut: Mutation) -> Outcome:
    """Decode `mut` (a mutated window of `seed`) and hold it against the unmutated decode."""
    first, last = window
    start = seed.batches[first][0]
    batches = [(p - start, e - start, m, b, lb) for p, e, m, b, lb in seed.batches[first : last + 1]]
    original = seed.data[start : seed.batches[last][1]]
    expected = by_position(iter_buffer_records(original, segment_base=seed.segment_base))
    # The same bytes can be told as several changes (the mutation as made, and its
    # smallest form moved as far right or left as the bytes allow: deleting the last byte
    # of a batch that equals the first of the next is deleting that one). Only a batch
    # intact in every telling must decode as before; damage that is clean in one, or a
    # deletion that can be placed on batch boundaries, leaves nothing to report.
    tellings = (mut, _minimal(original, mut), _minimal(original, mut, leftmost=True))
    out = Outcome(mut.kind)
    try:
        with deadline(HANG_SECONDS):
            items = list(iter_buffer_records(mut.data, segment_base=seed.segment_base))
    except Hang:
        out.hang = True
        return out
    except Exception:
        out.crash = traceback.format_exc()
        return out
    got = by_position(items)
    errors = [i for i in items if isinstance(i, SegmentError)]
    out.reasons.update(reason_bucket(e.error) for e in errors)
    made, *others = (_intact(t, batches) for t in tellings)
    intact = {pos: at for pos, at in made.items() if all(o.get(pos) == at for o in others)}
    for pos, end, _, base, lb in batches:
        if pos not in intact:
            continue
        at = intact[pos]
        if got.get(at) == expected[pos]:
            continue
        if expected[pos] in got.values():
            continue  # read from an identical copy met first, the original reported as a duplicate
        if _conflicts(mut, pos, base, lb) and any(k[0] == "error" for k in got.get(at, ())):
            out.excused += 1
        else:
            out.lost.append((pos, base, lb))
    out.broken_invariant = _invariants(items, seed.segment_base)
    out.native_differs = _native is not None and _lines(mut.data, seed.segment_base, True) != \
        _lines(mut.data, seed.segment_base, False)
    if (mut.must_report and all(_leaves_something(t, batches) for t in tellings)
            and not _whole_batches_deleted(tellings[2], tellings[1], batches)):
        out.unreported = not any(
            _damage_start(t, batches) <= e.batch_position <= t.d0 + t.ins for t in tellings for e in errors
        )
    return out


def _lines(data: bytes, segment_base: int | None, compiled: bool) -> str:
    """What `decode` prints for these bytes, through its compiled core or Python alone."""
    units = iter_buffer_units(data, segment_base=segment_base)
    return "".join(text for text, _, _ in LineEncoder(compiled=compiled).segment_units(units))


def _intact(mut: Mutation, batches) -> dict[int, int]:
    """Where each batch the mutation left untouched now starts."""
    shift = mut.ins - (mut.d1 - mut.d0)
    out = {}
    for pos, end, *_ in batches:
        if end <= mut.d0:
            out[pos] = pos
        elif pos >= mut.d1:
            out[pos] = pos + shift
    return out


def _minimal(original: bytes, mut: Mutation, leftmost: bool = False) -> Mutation:
    """The mutation as the smallest changed stretch: a deleted byte equal to the one after
    it is the same as deleting that one, and bytes inserted at the end of a batch may start
    like the next batch. What stays equal at either end is not damage. The common prefix
    is taken first (the stretch as far right as it goes), or the suffix (`leftmost`)."""
    a, b = original, mut.data
    n = min(len(a), len(b))
    prefix_of = lambda limit: _bisect_equal(lambda k: a[:k] == b[:k], limit)  # noqa: E731
    suffix_of = lambda limit: _bisect_equal(lambda k: a[len(a) - k :] == b[len(b) - k :], limit)  # noqa: E731
    if leftmost:
        suffix = suffix_of(n)
        prefix = prefix_of(n - suffix)
    else:
        prefix = prefix_of(n)
        suffix = suffix_of(n - prefix)
    return Mutation(mut.kind, b, prefix, len(a) - suffix, len(b) - prefix - suffix, mut.must_report, mut.claims)


def _whole_batches_deleted(left: Mutation, right: Mutation, batches) -> bool:
    """Whether a pure deletion, placed anywhere the bytes allow, can cover whole batches."""
    if left.ins or right.ins:
        return False
    bounds = {b[0] for b in batches} | {batches[-1][1]}
    size = left.d1 - left.d0
    return any(left.d0 <= b <= right.d0 and b + size in bounds for b in bounds)


def _bisect_equal(equal, n: int) -> int:
    """The largest k <= n with equal(k) (equal is monotone: true up to some k)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if equal(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _conflicts(mut: Mutation, pos: int, base: int, last: int) -> bool:
    """Whether a batch at `pos` is out of order with the offsets a forged field claims."""
    if mut.claims is None:
        return False
    return last >= mut.claims[0] if pos < mut.d0 else base <= mut.claims[1]


def _damage_start(mut: Mutation, batches) -> int:
    """Where the damaged bytes start: the batch the mutation hit, or the mutation itself."""
    for pos, end, *_ in batches:
        if pos < mut.d0 < end:
            return pos
    return mut.d0


def _leaves_something(mut: Mutation, batches) -> bool:
    """False when the mutated bytes hold nothing but whole intact batches and (like a
    preallocated segment) zeros to the end."""
    if not mut.ins and mut.d0 == mut.d1:
        return False  # nothing changed
    lo = _damage_start(mut, batches)
    tail = mut.data[lo:]
    if len(tail) >= 17 and tail.count(0) == len(tail):
        return False
    bounds = {b[0] for b in batches} | {batches[-1][1]}
    return mut.ins > 0 or mut.d0 not in bounds or mut.d1 not in bounds


# ---------------------------------------------------------------------------------- codec

def recorded_pairs(seeds: list[Seed]) -> list[tuple[bytes, bytes | None]]:
    pairs = []
    for seed in seeds:
        for item in iter_buffer_records(seed.data, segment_base=seed.segment_base):
            if isinstance(item, SegmentRecord) and not item.control and item.key is not None:
                pairs.append((bytes(item.key), None if item.value is None else bytes(item.value)))
    return pairs


def mutate_bytes(rng: random.Random, blob: bytes) -> bytes:
    if not blob:
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(8)))
    i = rng.randrange(len(blob))
    r = rng.randrange(7)
    if r == 0:
        return blob[:i] + bytes([blob[i] ^ (1 << rng.randrange(8))]) + blob[i + 1 :]
    if r == 1:
        return blob[:i]
    if r == 2:
        return blob[:i] + bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 9))) + blob[i:]
    if r == 3:
        return blob[:i] + blob[i + rng.randrange(1, 9) :]
    if r == 4:  # a length field made huge or negative (int16/int32/varint)
        return blob[:i] + rng.choice((b"\x7f\xff", b"\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00",
                                      b"\xff\xff\xff\xff\x0f", b"\x00")) + blob[i + rng.randrange(1, 5) :]
    if r == 5:
        return blob[:i] + bytes(len(blob) - i)
    return blob + blob[i:]


def check_codec(rng: random.Random, pairs) -> Outcome:
    key, value = rng.choice(pairs)
    if value is None or rng.random() < 0.3:
        key = mutate_bytes(rng, key)
    else:
        value = mutate_bytes(rng, value)
    out = Outcome("codec")
    try:
        with deadline(HANG_SECONDS):
            decode_record(key, value)
    except CodecError as exc:
        out.reasons[reason_bucket(str(exc))] += 1
    except Hang:
        out.hang = True
    except Exception:
        out.crash = traceback.format_exc()
    return out


# ---------------------------------------------------------------------------------- driver

class Fuzz:
    """Seeded fuzzing over a fixed seed set; `reader_case`/`codec_case` run one input."""

    def __init__(self, seeds: list[Seed], seed: int = 0):
        self.seeds = seeds
        self.rng = random.Random(seed)
        self.mutator = Mutator(self.rng)
        self.pairs = recorded_pairs(seeds)

    def window(self, seed: Seed) -> tuple[int, int]:
        first = self.rng.randrange(len(seed.batches))
        return first, min(len(seed.batches), first + self.rng.randrange(1, MAX_WINDOW + 1)) - 1

    def reader_case(self) -> Outcome:
        seed = self.rng.choice(self.seeds)
        first, last = self.window(seed)
        start = seed.batches[first][0]
        data = seed.data[start : seed.batches[last][1]]
        batches = [(p - start, e - start, m, b, lb) for p, e, m, b, lb in seed.batches[first : last + 1]]
        return check_reader(seed, (first, last), self.mutator.mutate(data, batches))

    def codec_case(self) -> Outcome:
        return check_codec(self.rng, self.pairs)


@dataclass
class Tally:
    inputs: Counter = field(default_factory=Counter)
    crashes: list = field(default_factory=list)
    hangs: list = field(default_factory=list)
    lost: list = field(default_factory=list)
    excused: int = 0
    unreported: list = field(default_factory=list)
    broken: list = field(default_factory=list)
    native_differs: list = field(default_factory=list)
    reasons: Counter = field(default_factory=Counter)
    codec_reasons: Counter = field(default_factory=Counter)

    def add(self, side: str, o: Outcome) -> None:
        self.inputs[side] += 1
        if o.crash:
            self.crashes.append((o.kind, o.crash))
        if o.hang:
            self.hangs.append(o.kind)
        if o.lost:
            self.lost.append((o.kind, o.lost))
        if o.unreported:
            self.unreported.append(o.kind)
        if o.broken_invariant:
            self.broken.append((o.kind, o.broken_invariant))
        if o.native_differs:
            self.native_differs.append(o.kind)
        self.excused += o.excused
        (self.codec_reasons if side == "codec" else self.reasons).update(o.reasons)


def run(fuzz: Fuzz, n: int, codec_share: float, progress=None) -> Tally:
    tally = Tally()
    codec_every = round(1 / codec_share) if codec_share else 0
    for i in range(n):
        if codec_every and i % codec_every == 0:
            tally.add("codec", fuzz.codec_case())
        else:
            tally.add("reader", fuzz.reader_case())
        if progress and (i + 1) % 50_000 == 0:
            progress(i + 1, tally)
    return tally


def report(tally: Tally, seconds: float) -> str:
    lost_batches = sum(len(batches) for _, batches in tally.lost)
    lines = [
        f"inputs tried: {sum(tally.inputs.values()):,} (reader {tally.inputs['reader']:,}, "
        f"codec {tally.inputs['codec']:,}) in {seconds:,.0f} s",
        f"crashes: {len(tally.crashes)}",
        f"hangs (> {HANG_SECONDS:g} s): {len(tally.hangs)}",
        f"lost good batches: {lost_batches} (in {len(tally.lost)} inputs); "
        f"lost to a forged offset claim, reported: {tally.excused}",
        f"damage not reported: {len(tally.unreported)}",
        f"broken invariants (offset order, int64): {len(tally.broken)}",
        f"decode's compiled core unlike Python: {len(tally.native_differs)}"
        + ("" if _native is not None else " (core not built: not checked)"),
        f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB",
        "reader quarantine rows by reason:",
        *(f"  {n:>10,}  {r}" for r, n in tally.reasons.most_common()),
        "codec errors by reason (top 15):",
        *(f"  {n:>10,}  {r}" for r, n in tally.codec_reasons.most_common(15)),
    ]
    for kind, tb in tally.crashes[:3]:
        lines += [f"crash in {kind}:", tb]
    for kind, lost in tally.lost[:5]:
        lines.append(f"lost in {kind}: {lost}")
    for kind in tally.unreported[:5]:
        lines.append(f"unreported: {kind}")
    for kind, why in tally.broken[:5]:
        lines.append(f"invariant broken in {kind}: {why}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="?", type=int, default=1_000_000, help="inputs to try (default 1,000,000)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--codec-share", type=float, default=0.25, help="share of codec inputs (default 0.25)")
    ap.add_argument("--recordings", type=Path, default=RECORDINGS, help=f"recordings folder (default {RECORDINGS})")
    args = ap.parse_args()
    seeds = writer_seeds() + (recorded_seeds(args.recordings) if args.recordings.is_dir() else [])
    print(f"{len(seeds)} seed segments, seed {args.seed}", flush=True)
    t = time.perf_counter()
    fuzz = Fuzz(seeds, args.seed)

    def progress(i, tally):
        print(f"  {i:,} inputs, {time.perf_counter() - t:,.0f} s: {len(tally.crashes)} crashes, "
              f"{len(tally.hangs)} hangs, {len(tally.lost)} with lost batches, "
              f"{len(tally.unreported)} unreported", flush=True)

    tally = run(fuzz, args.inputs, args.codec_share, progress)
    print(report(tally, time.perf_counter() - t))
    return 1 if tally.crashes or tally.hangs or tally.lost or tally.unreported or tally.broken else 0


if __name__ == "__main__":
    sys.exit(main())
