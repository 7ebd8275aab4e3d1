"""Offset commits of a bronze Arrow batch → `offset_commits` columns, through the compiled core.

Offset commits are nearly every record silver decodes (11.6 M of 12.4 M in the large
benchmark), and decoded one Python dict at a time they were most of silver's time. The
compiled core (native/src/commits.rs) reads a batch's keys and values straight from their
Arrow buffers; the source columns are bronze's own, converted as whole columns. It is an
accelerator, never a second decoder: every row it does not take (a malformed record, a
string that is not UTF-8, an unknown tagged field, a time `records.ms_to_ts` would not
turn into the same microsecond) is left to `records.offset_commit_rows`, which also
reports the error. tests/test_silver_native.py holds the two paths equal.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines import native
from pipelines.silver import records, schemas

_native: Any = native.lib  # None: every row takes the Python path

# A bronze timestamp (ms) from which `records.ms_to_ts` may not give exactly ms * 1000 µs
# (ms / 1000.0 loses the microsecond past 2^33 s, the year 2242): such rows go to Python.
EXACT_MS = (1 << 33) * 1000
_COMMIT_TYPES = pa.array(records.OFFSET_COMMIT_TYPES, pa.int32())
_TS = schemas.OFFSET_COMMITS.field("commit_ts").type


def available() -> bool:
    return _native is not None and hasattr(_native, "offset_commit_columns")


def _binary(arr: pa.Array) -> tuple[bytes, bytes]:
    """An Arrow binary column's int32 offsets (from its first row) and data, as bytes."""
    if arr.type != pa.binary():
        arr = arr.cast(pa.binary())
    _, offsets, data = arr.buffers()
    start = arr.offset * 4
    return offsets[start:start + (len(arr) + 1) * 4].to_pybytes(), b"" if data is None else data.to_pybytes()


def _strings(offsets: bytes, data: bytes, n: int, valid: np.ndarray | None = None) -> pa.Array:
    validity = None if valid is None else pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(pa.string(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])


def _numbers(raw: bytes, dtype: str, null: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    return pa.array(np.frombuffer(raw, dtype), mask=null, type=arrow_type)


def _times(ms: np.ndarray, null: np.ndarray) -> pa.Array:
    return pa.array(np.where(null, 0, ms) * 1000, mask=null, type=pa.int64()).view(_TS)


def split(batch: pa.RecordBatch) -> tuple[dict[str, pa.Array] | None, pa.Array | None, pa.RecordBatch]:
    """(the `offset_commits` columns of the rows the core decoded and their bronze
    `ingest_version`, or None, None; the bronze rows left for the Python path). `batch`
    holds bronze columns plus `record_type` (decode_job.BRONZE_COLUMNS)."""
    if not available() or batch.num_rows == 0:
        return None, None, batch
    taken = pc.fill_null(pc.and_(pc.is_in(batch.column("record_type"), _COMMIT_TYPES),
                                 pc.is_valid(batch.column("key"))), False)
    commits = batch.filter(taken)
    n = commits.num_rows
    if n == 0:
        return None, None, batch
    values = commits.column("value")
    has_value = values.is_valid().to_numpy(zero_copy_only=False)
    (ok, group_off, group, topic_off, topic, partition, offset, leader_epoch, metadata_off, metadata,
     commit_ms, expire_ms, version) = _native.offset_commit_columns(
        *_binary(commits.column("key")), *_binary(values), has_value.astype(np.uint8).tobytes())
    # A null record time reads as unset (-1), as records.ms_to_ts takes it.
    record_ms = pc.fill_null(commits.column("timestamp"), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    good = np.frombuffer(ok, np.uint8).astype(bool) & (record_ms < EXACT_MS)
    deleted = ~has_value
    epochs = np.frombuffer(leader_epoch, np.int32)
    commits_ms, expires_ms = np.frombuffer(commit_ms, np.int64), np.frombuffer(expire_ms, np.int64)
    columns = {
        "group_id": _strings(group_off, group, n),
        "topic": _strings(topic_off, topic, n),
        "partition": _numbers(partition, "<i4", np.zeros(n, bool), pa.int32()),
        "offset": _numbers(offset, "<i8", deleted, pa.int64()),
        "is_deletion": pa.array(deleted),
        "leader_epoch": _numbers(leader_epoch, "<i4", deleted | (epochs < 0), pa.int32()),
        "metadata": _strings(metadata_off, metadata, n, has_value),
        "commit_ts": _times(commits_ms, deleted | (commits_ms < 0)),
        "expire_ts": _times(expires_ms, deleted | (expires_ms < 0)),
        "value_version": _numbers(version, "<i2", deleted, pa.int16()),
        "transactional": pc.fill_null(commits.column("transactional"), False),
        "producer_id": commits.column("producer_id"),
        "effective_log_offset": commits.column("offset"),
        # records.source_columns
        "cluster": commits.column("cluster"),
        "coordinator_partition": commits.column("partition"),
        "log_offset": commits.column("offset"),
        "record_ts": _times(record_ms, record_ms < 0),
        "source": commits.column("source"),
        "coordinator_epoch": commits.column("leader_epoch"),
    }
    keep = pa.array(good)
    # Rows the core gave up on go back to the Python path with the other types' rows.
    left = ~taken.to_numpy(zero_copy_only=False)
    left[~left] = ~good
    return ({name: col.filter(keep) for name, col in columns.items()}, commits.column("ingest_version").filter(keep),
            batch.filter(pa.array(left)))
