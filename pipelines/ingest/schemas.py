"""Bronze tables: what arrived, untouched, with where it came from (docs/lake.md).

Each table is described once here: its Arrow schema, its Delta partition columns, the key
that makes a row unique (re-ingesting the same input stores nothing twice), and the column
whose per-file min/max bounds the duplicate check (see `Lake.insert_if_absent`).
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class BronzeTable:
    name: str
    schema: pa.Schema
    partition_by: tuple[str, ...]
    key: tuple[str, ...] | None
    range_column: str | None
    description: str


HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])

OFFSETS_RECORDS = BronzeTable(
    name="offsets_records",
    schema=pa.schema(
        [
            ("cluster", pa.string()),
            ("partition", pa.int32()),        # __consumer_offsets partition
            ("offset", pa.int64()),
            ("timestamp", pa.int64()),        # record timestamp, epoch ms
            ("timestamp_type", pa.string()),  # CreateTime | LogAppendTime | NoTimestampType
            ("key", pa.binary()),
            ("value", pa.binary()),           # null = tombstone
            ("headers", pa.list_(HEADER)),
            ("leader_epoch", pa.int32()),
            # Batch facts: segment files have them, a librdkafka consumer does not (null).
            ("magic", pa.int32()),
            ("compression", pa.string()),
            ("transactional", pa.bool_()),
            ("control", pa.bool_()),          # transaction marker (COMMIT/ABORT in key)
            # Read live: true on a record of an aborted transaction (read back, read_uncommitted,
            # from a range the read_committed reader skipped); null from segments, whose
            # markers say it (silver resolves them).
            ("aborted", pa.bool_()),
            ("producer_id", pa.int64()),
            ("producer_epoch", pa.int32()),
            ("base_sequence", pa.int32()),
            ("base_offset", pa.int64()),
            ("last_offset", pa.int64()),
            ("delete_horizon_ms", pa.int64()),
            ("batch_position", pa.int64()),   # byte position of the batch in source_file
            # Provenance.
            ("source", pa.string()),          # kafka | segments
            ("source_file", pa.string()),
            ("broker", pa.string()),          # segments: broker label of the log dir; kafka: bootstrap
            ("ingested_at", TS),
            ("ingest_version", pa.int64()),   # the bronze version that committed the row (Lake stamps it)
        ]
    ),
    partition_by=("cluster", "partition"),
    key=("cluster", "partition", "offset"),
    range_column="offset",
    description="one raw __consumer_offsets record",
)

COORDINATOR_LOG_LINES = BronzeTable(
    name="coordinator_log_lines",
    schema=pa.schema(
        [
            ("cluster", pa.string()),
            ("broker", pa.int32()),
            ("file", pa.string()),
            ("line", pa.int64()),             # 1-based line number of the entry's first line
            ("ts", pa.int64()),               # epoch ms UTC (in the --tz the log was written in)
            ("ts_text", pa.string()),         # the log4j %d text as printed (no zone)
            ("level", pa.string()),
            ("logger", pa.string()),
            ("message", pa.string()),
            ("text", pa.string()),            # the raw entry, continuation lines included
            ("line_key", pa.string()),        # dedup key, see pipelines.ingest.logs
            ("source", pa.string()),          # logs
            ("ingested_at", TS),
            ("ingest_version", pa.int64()),   # the bronze version that committed the row (Lake stamps it)
        ]
    ),
    partition_by=("cluster",),
    key=("cluster", "broker", "line_key"),
    range_column="ts",
    description="one raw group-coordinator log entry",
)

QUARANTINE = BronzeTable(
    name="quarantine",
    schema=pa.schema(
        [
            ("cluster", pa.string()),
            ("source_key", pa.string()),      # the input's position; unique per cluster
            ("source", pa.string()),          # kafka | segments | logs | a lake table name
            ("source_table", pa.string()),    # for inputs read from a lake table
            ("target_table", pa.string()),    # the table the input was meant for
            ("reason", pa.string()),
            ("broker", pa.string()),
            ("file", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("last_offset", pa.int64()),
            ("line", pa.int64()),
            ("byte_position", pa.int64()),
            ("record_type", pa.int32()),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("raw", pa.binary()),             # undecodable bytes, capped (RAW_LIMIT)
            ("ingested_at", TS),
        ]
    ),
    partition_by=("cluster",),
    key=("cluster", "source_key"),
    range_column=None,
    description="one input that could not be decoded or parsed, with the reason",
)

PARTITION_END_OFFSETS = BronzeTable(
    name="partition_end_offsets",
    schema=pa.schema(
        [
            ("cluster", pa.string()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("start_offset", pa.int64()),     # log-start offset (low watermark) at the sample
            ("end_offset", pa.int64()),       # log-end offset (high watermark)
            ("sampled_at", TS),
        ]
    ),
    partition_by=("cluster",),
    key=None,
    range_column=None,
    description="log-end offset of each partition the groups commit on, per live ingestion",
)

# Topic id -> name from the cluster's metadata. KIP-848 records name topics by id only, and
# from Kafka 4.1 the coordinator no longer writes the type-4 records that mapped ids to
# names: live ingestion is then the only source of names. A topic id is never reused (a
# recreated topic gets a new one), so each id is stored once.
TOPIC_METADATA = BronzeTable(
    name="topic_metadata",
    schema=pa.schema(
        [
            ("cluster", pa.string()),
            ("topic_id", pa.string()),
            ("topic", pa.string()),
            ("num_partitions", pa.int32()),
            ("sampled_at", TS),
        ]
    ),
    partition_by=("cluster",),
    key=("cluster", "topic_id"),
    range_column=None,
    description="topic id and name of each topic of the cluster, sampled by live ingestion",
)

BRONZE_TABLES = (OFFSETS_RECORDS, COORDINATOR_LOG_LINES, QUARANTINE, PARTITION_END_OFFSETS, TOPIC_METADATA)

# Undecodable input kept in quarantine.raw is cut here: enough to inspect, not a copy of a 1 GB file.
RAW_LIMIT = 1 << 20


def ensure(lake, table: BronzeTable) -> None:
    lake.create(table.name, table.schema, list(table.partition_by), description=table.description)
