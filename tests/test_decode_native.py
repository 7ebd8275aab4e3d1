"""The compiled core of `decode` (native/): the lines of a batch of offset commits, which must
be the pure-Python path's text byte for byte, or nothing (the batch then goes through Python).

The oracle is `LineEncoder(compiled=False)`, the path held equal to the standard library's
JSON of every recorded item in test_decode_cli.py."""
from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from conftest import RECORDINGS
from pipelines.codec import encode_key, encode_value
from pipelines.segments import SegmentError
from pipelines.segments.jsonlines import LineEncoder, _native
from pipelines.segments.reader import V2Records, iter_buffer_units, iter_segment_units
from pipelines.segments.writer import WriteRecord, build_batch_v2

T0 = 1_795_337_253_311
HOSTILE = ["", "orders", "caf\u00e9", "\u4e2d\u6587", "\U0001f600 astral", "del\x7f", "nul\x00esc\x1b\x1f",
           "tab\t\n\r\b\f", 'quote"back\\slash/', "\u202egnp.exe", "<script>alert(1)</script>", "x" * 0x7FFF]
TOPIC_ID = "AAECAwQFBgcICQoLDA0ODw"  # Uuid.toString() of bytes 0..15

needs_core = pytest.mark.skipif(_native is None, reason="the compiled core is not built (no Rust toolchain)")


def _cargo() -> bool:
    return shutil.which("cargo") is not None or (Path.home() / ".cargo" / "bin" / "cargo").exists()


def test_the_core_is_built_wherever_rust_is():
    # `make setup` builds it on any machine with cargo; CI's must run the compiled path.
    if _cargo():
        assert _native is not None, "scripts/setup-native.sh did not build pipelines/segments/_native.abi3.so"


def lines(data: bytes, compiled: bool) -> str:
    """The text `decode` writes for segment bytes, by either path."""
    enc = LineEncoder(compiled=compiled)
    return "".join(text for text, _, _ in enc.segment_units(iter_buffer_units(data, file="seg.log", partition=3,
                                                                                broker="broker-1")))


def compiled_batches(units) -> tuple[int, int]:
    """(batches the core encoded, data batches in all)."""
    taken = seen = 0
    enc = LineEncoder()
    for u in units:
        if type(u) is V2Records and not u.batch.control:
            seen += 1
            enc._remember(u.batch)
            b = u.batch
            taken += _native.offset_commit_lines(
                u.buf, u.pos, u.end, b.records_count, b.base_offset, u.last_delta, u.base_timestamp,
                u.max_timestamp, u.log_append, b.base_sequence, enc._head, enc._mid, enc._producer,
                enc._tail) is not None
    return taken, seen


def value(version: int, metadata: str = "", **extra) -> bytes:
    data = {"offset": 1234567890123, "metadata": metadata, "commitTimestamp": T0}
    if version >= 3:
        data["leaderEpoch"] = -1 if version == 4 else 7
    if version == 1:
        data["expireTimestamp"] = T0 + 86_400_000
    data.update(extra)
    return encode_value(1, version, data)


def commit(i: int, version: int = 3, key_type: int = 1, group: str = "g", topic: str = "orders",
           metadata: str = "", **extra) -> WriteRecord:
    return WriteRecord(encode_key(key_type, {"group": group, "topic": topic, "partition": i}),
                       value(version, metadata, **extra), T0 + i)


@needs_core
def test_every_recording_comes_out_the_same_and_mostly_through_the_core():
    taken = seen = 0
    for folder in sorted(RECORDINGS.glob("*/offsets_segments")):
        for log in sorted(folder.rglob("*.log")):
            units = list(iter_segment_units(log))
            assert "".join(t for t, _, _ in LineEncoder().segment_units(iter(units))) == \
                "".join(t for t, _, _ in LineEncoder(compiled=False).segment_units(iter(units))), log
            t, s = compiled_batches(units)
            taken, seen = taken + t, seen + s
    # Everything but the group metadata batches (one record each, the Python path's).
    assert seen > 1000 and taken > seen * 0.7, (taken, seen)


@needs_core
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_offset_commit_layout_goes_through_the_core_with_the_same_text(compression):
    batches = []
    base = 0
    shapes = [
        [commit(i, version=v) for i in range(4)] for v in range(5)
    ] + [
        [commit(i, version=4, topicId=TOPIC_ID) for i in range(3)],
        [commit(i, key_type=0) for i in range(3)],  # legacy type-0 keys
        [commit(i, group=s, topic=s[:200], metadata=s) for i, s in enumerate(HOSTILE)],
        [commit(0), WriteRecord(encode_key(1, {"group": "g", "topic": "t", "partition": 0}), None, T0)],  # tombstone
    ]
    for recs in shapes:
        batches.append(build_batch_v2(recs, base, timestamp=T0, compression=compression))
        base += len(recs)
    # Producer facts: LogAppendTime, a transactional producer whose sequence wraps past int32.
    batches.append(build_batch_v2([commit(i) for i in range(5)], base, timestamp=T0 + 99, compression=compression,
                                  timestamp_type="LogAppendTime", transactional=True, producer_id=42,
                                  producer_epoch=3, base_sequence=0x7FFFFFFF - 2, delete_horizon_ms=T0))
    data = b"".join(batches)
    units = list(iter_buffer_units(data, file="seg.log", partition=3, broker="broker-1"))
    assert compiled_batches(units) == (len(batches), len(batches))
    text = lines(data, compiled=True)
    assert text == lines(data, compiled=False)
    assert text.count("\n") == base + 5 and '"error"' not in text


@needs_core
def test_what_the_core_does_not_take_goes_through_python():
    header = WriteRecord(commit(0).key, commit(0).value, T0, headers=[("h", b"v")])
    unknown_tag = encode_value(1, 4, {"offset": 1, "leaderEpoch": -1, "metadata": "", "commitTimestamp": T0,
                                      "_unknownTaggedFields": [{"tag": 5, "data": "AAE="}]})
    group_metadata = WriteRecord(encode_key(2, {"group": "g"}), None, T0)
    cases = {
        "a header": [header],
        "an unknown tagged field": [WriteRecord(commit(0).key, unknown_tag, T0)],
        "a group metadata record": [commit(0), group_metadata],
        "a null key": [WriteRecord(None, commit(0).value, T0)],
        "a value version the codec does not know": [WriteRecord(commit(0).key, b"\x00\x09" + b"\x00" * 30, T0)],
        "trailing bytes after a value": [WriteRecord(commit(0).key, commit(0).value + b"\x00", T0)],
        "a string that is not UTF-8": [WriteRecord(encode_key(1, {"group": "g", "topic": "t", "partition": 0})
                                                   .replace(b"\x00\x01g", b"\x00\x01\xff"), commit(0).value, T0)],
    }
    for why, recs in cases.items():
        data = build_batch_v2(recs, 0, timestamp=T0)
        units = list(iter_buffer_units(data, file="seg.log", partition=3, broker="broker-1"))
        assert compiled_batches(units) == (0, 1), why
        assert lines(data, compiled=True) == lines(data, compiled=False), why


@needs_core
def test_damaged_records_get_python_text_or_the_same_text():
    # Mutate the records section of good batches (after the CRC check, which would
    # otherwise stop them first) and hand it to both paths: the core answers with
    # Python's very text or not at all, never with lines Python would not write.
    rng = random.Random(848)
    recs = [commit(i, version=rng.choice([1, 3, 4]), metadata=rng.choice(HOSTILE[:10])) for i in range(6)]
    good = build_batch_v2(recs, 0, timestamp=T0)
    (unit,) = list(iter_buffer_units(good, file="seg.log", partition=3, broker="broker-1"))
    region = bytearray(unit.buf[unit.pos:unit.end])
    answered = refused = 0
    for _ in range(20_000):
        mutated = bytearray(region)
        for _ in range(rng.choice([1, 1, 2, 4])):
            at = rng.randrange(len(mutated))
            how = rng.random()
            if how < 0.6:
                mutated[at] ^= 1 << rng.randrange(8)
            elif how < 0.8:
                mutated[at] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF])
            elif how < 0.9:
                del mutated[at]
            else:
                mutated.insert(at, rng.randrange(256))
        buf = bytes(mutated)
        u = V2Records(unit.batch, buf, 0, len(buf), unit.base_timestamp, unit.log_append,
                      unit.max_timestamp, unit.last_delta)
        python = LineEncoder(compiled=False)
        expected = "".join(t for t, _, _ in python.segment_units(iter([u])))
        got = "".join(t for t, _, _ in LineEncoder().segment_units(iter([u])))
        assert got == expected
        taken, _ = compiled_batches([u])
        if taken:
            answered += 1
            items = u.items()
            assert not any(isinstance(i, SegmentError) for i in items) and len(items) == len(recs)
        else:
            refused += 1
    assert answered > 1000 and refused > 1000, (answered, refused)  # both sides of the rule were hit
