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

from pipelines.ingest import identity
from pipelines.ingest.bronze import Summary, check_cluster, now_utc, offsets_writer, quarantine_row, quarantine_writer
from pipelines.ingest.schemas import RAW_LIMIT
from pipelines.segments import SegmentBatch, SegmentError, SegmentRecord, discover, iter_paths

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


def segment_row(rec: SegmentRecord, cluster: str, ingested_at) -> dict:
    b = rec.batch
    return {
        "cluster": cluster,
        "partition": b.partition,
        "offset": rec.offset,
        "timestamp": rec.timestamp,
        "timestamp_type": b.timestamp_type,
        "key": rec.key,
        "value": rec.value,
        "headers": [{"key": k, "value": v} for k, v in rec.headers] if rec.headers else [],
        "leader_epoch": b.partition_leader_epoch if b.partition_leader_epoch >= 0 else None,
        "magic": b.magic,
        "compression": b.compression,
        "transactional": b.transactional,
        "control": b.control,
        "producer_id": b.producer_id,
        "producer_epoch": b.producer_epoch,
        "base_sequence": b.base_sequence,
        "base_offset": b.base_offset,
        "last_offset": b.last_offset,
        "delete_horizon_ms": b.delete_horizon_ms,
        "batch_position": b.batch_position,
        "source": "segments",
        "source_file": b.file,
        "broker": b.broker,
        "ingested_at": ingested_at,
    }


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


def ingest_segments(
    lake,
    paths: Iterable[str],
    cluster: str | None = None,
    chunk_rows: int | None = None,
    progress: Callable[[Summary], None] | None = None,
) -> Summary:
    """Load every record of the segment files under `paths` into bronze. Idempotent.

    `cluster` None: the name these brokers' files (meta.properties, partition.metadata)
    were loaded under before, else "default"; a given name that disagrees with what the
    lake knows is used and warned about (pipelines/ingest/identity.py, `summary.extra`)."""
    if cluster is not None:
        check_cluster(cluster)
    paths = list(paths)
    summary = Summary()
    found = identity.of_segment_files(s.path for s in discover(paths))
    cluster = identity.settle_name(lake, cluster, found, summary)
    records = offsets_writer(lake, summary, **({"chunk_rows": chunk_rows} if chunk_rows else {}))
    quarantine = quarantine_writer(lake, summary)
    ingested_at = now_utc()
    empty_batches = 0
    without_partition = 0
    for item in iter_paths(paths):
        if isinstance(item, SegmentRecord):
            if item.batch.partition is None:
                # A .log outside any __consumer_offsets-N folder: no key to store it under.
                without_partition += 1
                quarantine.add(
                    quarantine_row(
                        cluster, "segments", f"{item.broker}:None:{os.path.basename(item.file)}@{item.batch_position}#{item.offset}",
                        "segment file is not inside a __consumer_offsets-N folder: partition unknown",
                        target_table="offsets_records", broker=item.broker, file=item.file,
                        offset=item.offset, byte_position=item.batch_position,
                    )
                )
                continue
            summary.seen += 1
            records.add(segment_row(item, cluster, ingested_at))
            if progress and summary.seen % 100_000 == 0:
                progress(summary)
        elif isinstance(item, SegmentError):
            summary.quarantined_seen += 1
            quarantine.add(error_row(item, cluster))
        elif isinstance(item, SegmentBatch):
            empty_batches += 1
    # Two tables, two commits; both are keyed, so a crash between them is repaired by a re-run.
    quarantine.flush()
    records.flush(metadata={"rebalance_audit.ingest": "segments"})
    identity.register(lake, cluster, found)
    summary.extra["empty_batches"] = empty_batches
    summary.extra["records_without_partition"] = without_partition
    return summary
