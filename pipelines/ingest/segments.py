"""Offline ingestion: `__consumer_offsets` segment folders (one or many brokers) → bronze.

Every record, transaction markers included (silver needs them to resolve transactional
commits), goes to `offsets_records` keyed by (cluster, partition, offset): a record read
from three replicas, from a compacted rewrite of a segment, or already ingested live, is
stored once (the first source wins). What cannot be read goes to `quarantine`, keyed by
its position (broker, partition, segment file name, byte position), so a re-run adds
nothing. Loaded data is reported as offset ranges per partition, never as file names.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.ingest import identity
from pipelines.ingest.bronze import Summary, check_cluster, now_utc, offsets_writer, quarantine_row, quarantine_writer
from pipelines.ingest.schemas import OFFSETS_RECORDS, RAW_LIMIT
from pipelines.segments import SegmentBatch, SegmentError, SegmentRecord, discover
from pipelines.segments.parallel import default_jobs, ordered_map
from pipelines.segments.paths import SegmentFile
from pipelines.segments.reader import iter_segment_records

_RAW_FALLBACK = 64 * 1024


def _raw_batch(path: str, position: int) -> bytes | None:
    """The bytes of the batch at `position` (as framed by its Length), for inspection."""
    try:
        with open(path, "rb") as f:
            f.seek(position)
            head = f.read(12)
            size = _RAW_FALLBACK
            if len(head) == 12:
                length = struct.unpack(">i", head[8:12])[0]
                if 0 < length <= RAW_LIMIT - 12:
                    size = 12 + length
            f.seek(position)
            return f.read(min(size, RAW_LIMIT))
    except OSError:
        return None


def error_row(err: SegmentError, cluster: str) -> dict:
    name = os.path.basename(err.file)
    where = f"{err.broker}:{err.partition}:{name}@{err.batch_position}"
    return quarantine_row(
        cluster,
        "segments",
        where,
        err.error,
        target_table="offsets_records",
        broker=err.broker,
        file=err.file,
        partition=err.partition,
        offset=err.offset,
        last_offset=err.last_offset,
        byte_position=err.batch_position,
        raw=_raw_batch(err.file, err.batch_position),
    )


@dataclass
class FileRows:
    """What one segment file gives bronze: its records as `offsets_records` rows (in file
    order), quarantine rows for what could not be read, and counts."""

    records: pa.Table
    quarantine: list[dict]
    empty_batches: int
    without_partition: int


def read_segment_file(seg: SegmentFile, cluster: str, ingested_at) -> FileRows:
    """Every record of one segment file as bronze rows, built column-wise: the batch facts
    once per batch (spread over its records by `take`), the record fields in lists. A
    worker's task when several processes read (`pipelines.segments.parallel`)."""
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[list[dict]] = []
    batches: list[SegmentBatch] = []
    batch_of: list[int] = []  # per record, its batch's index in `batches`
    quarantine: list[dict] = []
    empty_batches = without_partition = 0
    last = None
    for item in iter_segment_records(seg.path, partition=seg.partition, broker=seg.broker):
        if type(item) is SegmentRecord:
            b = item.batch
            if b.partition is None:
                # A .log outside any __consumer_offsets-N folder: no key to store it under.
                without_partition += 1
                quarantine.append(quarantine_row(
                    cluster, "segments", f"{item.broker}:None:{os.path.basename(item.file)}@{item.batch_position}#{item.offset}",
                    "segment file is not inside a __consumer_offsets-N folder: partition unknown",
                    target_table="offsets_records", broker=item.broker, file=item.file,
                    offset=item.offset, byte_position=item.batch_position,
                ))
                continue
            if b is not last:
                batches.append(b)
                last = b
            batch_of.append(len(batches) - 1)
            offsets.append(item.offset)
            timestamps.append(item.timestamp)
            keys.append(item.key)
            values.append(item.value)
            headers.append([{"key": k, "value": v} for k, v in item.headers] if item.headers else [])
        elif isinstance(item, SegmentError):
            quarantine.append(error_row(item, cluster))
        elif isinstance(item, SegmentBatch):
            empty_batches += 1
    return FileRows(_records_table(cluster, ingested_at, offsets, timestamps, keys, values, headers, batches, batch_of),
                    quarantine, empty_batches, without_partition)


# Batch facts: (column, SegmentBatch attribute), one value per batch, spread to its records.
_BATCH_COLUMNS = (
    ("partition", "partition"), ("timestamp_type", "timestamp_type"), ("leader_epoch", "partition_leader_epoch"),
    ("magic", "magic"), ("compression", "compression"), ("transactional", "transactional"), ("control", "control"),
    ("producer_id", "producer_id"), ("producer_epoch", "producer_epoch"), ("base_sequence", "base_sequence"),
    ("base_offset", "base_offset"), ("last_offset", "last_offset"), ("delete_horizon_ms", "delete_horizon_ms"),
    ("batch_position", "batch_position"), ("source_file", "file"), ("broker", "broker"),
)


def _records_table(cluster, ingested_at, offsets, timestamps, keys, values, headers, batches, batch_of) -> pa.Table:
    schema = OFFSETS_RECORDS.schema
    n = len(offsets)
    take = pa.array(batch_of, pa.int32())
    columns = {
        "offset": pa.array(offsets, pa.int64()),
        "timestamp": pa.array(timestamps, pa.int64()),
        "key": pa.array(keys, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "headers": pa.array(headers, schema.field("headers").type),
        "cluster": pa.repeat(pa.scalar(cluster, pa.string()), n),
        "source": pa.repeat(pa.scalar("segments", pa.string()), n),
        "ingested_at": pa.repeat(pa.scalar(ingested_at, schema.field("ingested_at").type), n),
    }
    for name, attribute in _BATCH_COLUMNS:
        # A batch is often a single commit: map an attribute getter, not a Python function.
        facts = pa.array(list(map(attrgetter(attribute), batches)), schema.field(name).type)
        if name == "leader_epoch":  # -1: the batch was written before leader epochs (KIP-101)
            facts = pc.if_else(pc.less(facts, 0), pa.scalar(None, facts.type), facts)
        columns[name] = facts.take(take)
    return pa.Table.from_arrays(
        [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in schema], schema=schema)


def ingest_segments(
    lake,
    paths: Iterable[str],
    cluster: str | None = None,
    chunk_rows: int | None = None,
    progress: Callable[[Summary], None] | None = None,
    jobs: int | None = None,
) -> Summary:
    """Load every record of the segment files under `paths` into bronze. Idempotent.

    `cluster` None: the name these brokers' files (meta.properties, partition.metadata)
    were loaded under before, else "default"; a given name that disagrees with what the
    lake knows is used and warned about (pipelines/ingest/identity.py, `summary.extra`).
    `jobs`: processes reading segment files at once (default: one per CPU on 16 MiB of
    files or more, else 1); the tables are the same either way, for the rows are taken
    in the files' order."""
    if cluster is not None:
        check_cluster(cluster)
    paths = list(paths)
    summary = Summary()
    segments = discover(paths)  # path errors surface here, before anything is written
    found = identity.of_segment_files(s.path for s in segments)
    cluster = identity.settle_name(lake, cluster, found, summary)
    records = offsets_writer(lake, summary, **({"chunk_rows": chunk_rows} if chunk_rows else {}))
    quarantine = quarantine_writer(lake, summary)
    ingested_at = now_utc()
    empty_batches = 0
    without_partition = 0
    tasks = ((seg, cluster, ingested_at) for seg in segments)
    for _, rows in ordered_map(read_segment_file, tasks, jobs or default_jobs(segments)):
        before = summary.seen
        summary.seen += rows.records.num_rows
        summary.quarantined_seen += len(rows.quarantine) - rows.without_partition
        empty_batches += rows.empty_batches
        without_partition += rows.without_partition
        for row in rows.quarantine:
            quarantine.add(row)
        records.add_table(rows.records)
        if progress and summary.seen // 100_000 > before // 100_000:
            progress(summary)
    # Two tables, two commits; both are keyed, so a crash between them is repaired by a re-run.
    quarantine.flush()
    records.flush(metadata={"rebalance_audit.ingest": "segments"})
    identity.register(lake, cluster, found)
    summary.extra["empty_batches"] = empty_batches
    summary.extra["records_without_partition"] = without_partition
    return summary
