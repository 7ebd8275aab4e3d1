"""Silver's compiled path for offset commits (native/src/commits.rs through
pipelines/silver/commit_columns.py) gives the rows the per-record Python path gives, or
leaves the record to it.

The oracle is `decode_job.decode_batch(..., compiled=False)`: every record through
`records`, the path the silver tests hold to Kafka's own decoding. Both paths see the same
Arrow batches `mapInArrow` hands the executors (bronze columns and `record_type`), here
built without Spark: the recordings' segment files as bronze reads them, and records made
to sit on every edge the core must give up on.
"""
from __future__ import annotations

import random
import struct
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from conftest import RECORDINGS
from pipelines.codec import encode_key, encode_value
from pipelines.ingest.segments import read_segment_file
from pipelines.segments.paths import discover
from pipelines.silver import commit_columns, decode_job

needs_core = pytest.mark.skipif(not commit_columns.available(), reason="the compiled core is not built (no Rust toolchain)")

T0 = 1_795_337_253_311
HOSTILE = ["", "orders", "caf\u00e9", "\u4e2d\u6587", "\U0001f600 astral", "nul\x00esc\x1b", 'quote"back\\slash',
           "<script>alert(1)</script>", "x" * 0x7FFF]


def bronze_batch(rows: list[dict]) -> pa.RecordBatch:
    """Bronze rows as the decode's `mapInArrow` receives them (decode_job.BRONZE_COLUMNS and
    the key's type, as `key_type_column` reads it)."""
    types = [None if not r.get("key") else int(r["key"][:2].hex(), 16) for r in rows]
    defaults = {"cluster": "c", "partition": 0, "timestamp": T0, "source": "segments", "transactional": False,
                "producer_id": -1, "leader_epoch": 0, "ingest_version": 3, "value": None}
    full = [{**defaults, "offset": i, **r, "record_type": t} for i, (r, t) in enumerate(zip(rows, types))]
    schema = pa.schema([("cluster", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                        ("timestamp", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
                        ("source", pa.string()), ("transactional", pa.bool_()), ("producer_id", pa.int64()),
                        ("leader_epoch", pa.int32()), ("ingest_version", pa.int64()), ("record_type", pa.int32())])
    return pa.RecordBatch.from_pylist(full, schema=schema)


def decoded(batch: pa.RecordBatch, compiled: bool) -> list[dict]:
    rows = [r for b in decode_job.decode_batch(batch, compiled=compiled) for r in decode_job.unpacked(b)]
    return sorted(rows, key=repr)


def taken(batch: pa.RecordBatch) -> int:
    """Rows the core decoded itself."""
    commits, _, _ = commit_columns.split(batch)
    return 0 if commits is None else len(commits["group_id"])


def key(group="g", topic="orders", partition=0, key_type=1) -> bytes:
    return encode_key(key_type, {"group": group, "topic": topic, "partition": partition})


def value(version: int, offset=1234567890123, metadata="", commit=T0, **extra) -> bytes:
    data = {"offset": offset, "metadata": metadata, "commitTimestamp": commit}
    if version >= 3:
        data["leaderEpoch"] = 7
    if version == 1:
        data["expireTimestamp"] = commit + 86_400_000
    data.update(extra)
    return encode_value(1, version, data)


def recording_batches() -> list[pa.RecordBatch]:
    out = []
    for scenario in sorted(p for p in RECORDINGS.iterdir() if (p / "offsets_segments").is_dir()):
        for seg in discover([scenario / "offsets_segments"]):
            table = read_segment_file(seg, scenario.name, datetime.now(timezone.utc)).records
            rows = [r for r in table.to_pylist() if not r["control"]]
            if rows:
                out.append(bronze_batch(rows))
    return out


@needs_core
def test_every_recording_decodes_the_same_and_its_commits_through_the_core():
    batches = recording_batches()
    assert len(batches) >= 14  # every recording, a segment file or more each
    commits = through_core = 0
    for batch in batches:
        assert decoded(batch, compiled=True) == decoded(batch, compiled=False)
        commits += sum(t in (0, 1) for t in batch.column("record_type").to_pylist())
        through_core += taken(batch)
    # Every recorded commit is an ordinary one: all of them through the core.
    assert commits > 5000 and through_core == commits, (through_core, commits)


@needs_core
@pytest.mark.parametrize("version", range(5))
def test_every_value_version_and_hostile_strings_go_through_the_core_unchanged(version):
    rows = [{"key": key(group=s, topic=s[::-1], partition=i, key_type=i % 2), "value": value(version, metadata=s)}
            for i, s in enumerate(HOSTILE)]
    rows += [{"key": key(partition=99), "value": None},  # a tombstone
             {"key": key(), "value": value(version, offset=-1, commit=-1)},  # unset times read as null
             {"key": key(), "value": value(version), "timestamp": None, "transactional": None, "leader_epoch": None}]
    if version >= 3:
        rows.append({"key": key(), "value": value(version, leaderEpoch=-1)})
    if version == 4:
        rows.append({"key": key(), "value": value(version, topicId="AAECAwQFBgcICQoLDA0ODw")})
    batch = bronze_batch(rows)
    assert taken(batch) == len(rows)
    assert decoded(batch, compiled=True) == decoded(batch, compiled=False)


# The edges the core leaves to Python, and which row Python makes of each (a row or a
# decode error): (what, bronze row).
EXACT_MS = commit_columns.EXACT_MS
LEFT_TO_PYTHON = [
    ("commit time past 2^33 s", {"key": key(), "value": value(3, commit=EXACT_MS)}),
    ("commit time past the year 9999", {"key": key(), "value": value(2, commit=253_402_300_800_000)}),
    ("expiry past 2^33 s", {"key": key(), "value": value(1, expireTimestamp=EXACT_MS + 5)}),
    ("record time past 2^33 s", {"key": key(), "value": value(3), "timestamp": EXACT_MS}),
    ("group not UTF-8", {"key": struct.pack(">hh", 1, 2) + b"\xff\xfe" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0),
                         "value": value(3)}),
    ("metadata not UTF-8", {"key": key(), "value": value(3)[:-10] + b"\x00\x01\xc3" + value(3)[-8:]}),
    ("a byte past the value", {"key": key(), "value": value(3) + b"\x00"}),
    ("a byte past the key", {"key": key() + b"\x00", "value": value(3)}),
    ("truncated value", {"key": key(), "value": value(1)[:-3]}),
    ("value version 5", {"key": key(), "value": b"\x00\x05" + value(3)[2:]}),
    ("an unknown tagged field", {"key": key(), "value": value(4)[:-1] + b"\x01\x05\x02ab"}),
    ("null metadata", {"key": key(), "value": value(2)[:10] + b"\xff\xff" + value(2)[12:]}),
]


@needs_core
@pytest.mark.parametrize("what,row", LEFT_TO_PYTHON, ids=[w for w, _ in LEFT_TO_PYTHON])
def test_what_the_core_does_not_take_goes_to_python(what, row):
    good = {"key": key(group="beside"), "value": value(3)}
    batch = bronze_batch([good, row, good])
    assert taken(batch) == 2, what
    assert decoded(batch, compiled=True) == decoded(batch, compiled=False)


@needs_core
def test_other_types_and_missing_keys_pass_by_the_core_untouched():
    group_metadata = encode_key(2, {"group": "g"})
    rows = [{"key": group_metadata, "value": None}, {"key": None, "value": value(3)}, {"key": b"\x00", "value": None},
            {"key": key(), "value": value(3)}]
    batch = bronze_batch(rows)
    assert taken(batch) == 1
    assert decoded(batch, compiled=True) == decoded(batch, compiled=False)


@needs_core
def test_damaged_commits_give_the_python_rows():
    """Every record of a batch mutated at random: each row the core takes is Python's row."""
    rng = random.Random(848)
    rows = []
    for i in range(3000):
        k, v = bytearray(key(group=f"g{i % 7}", partition=i)), bytearray(value(i % 5, metadata="m" * (i % 3)))
        for buf in rng.sample([k, v], rng.randint(1, 2)):
            at = rng.randrange(len(buf))
            buf[at] = rng.randrange(256) if rng.random() < 0.8 else buf[at] ^ 0x80
        rows.append({"key": bytes(k), "value": None if i % 11 == 0 else bytes(v)})
    batch = bronze_batch(rows)
    assert 0 < taken(batch) < len(rows)
    assert decoded(batch, compiled=True) == decoded(batch, compiled=False)


def test_other_rows_past_a_rows_bytes_are_split_and_none_is_lost(monkeypatch):
    """A bronze batch's rows of the other tables ride in a list per row of the decoded
    increment; past `OTHERS_ROW_BYTES` they are spread over several such rows (a Spark row
    must stay far under 2 GB), every one of them still there, in order."""
    batches = recording_batches()
    whole = [[r for b in decode_job.decode_batch(batch) for r in decode_job.unpacked(b)] for batch in batches]
    monkeypatch.setattr(decode_job, "OTHERS_ROW_BYTES", 4096)
    split_rows = 0
    for batch, rows in zip(batches, whole):
        out = list(decode_job.decode_batch(batch))
        assert [r for b in out for r in decode_job.unpacked(b)] == rows
        lists = [n for b in out for t, n in zip(b.column(decode_job.TABLE_COLUMN).to_pylist(),
                                                 b.column(decode_job.OTHERS_COLUMN).to_pylist())
                 if t == decode_job.OTHERS]
        assert all(lists)  # no empty list
        split_rows += len(lists) - 1
    assert split_rows > 0
