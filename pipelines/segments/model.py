"""What the segment reader yields: records, batch facts, and errors.

A record points at its batch (`SegmentBatch`) instead of copying a dozen batch fields into
every record; the batch facts are exposed on the record as read-only properties, so
`record.producer_id` works either way. Records of one batch share one `SegmentBatch`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

NO_TIMESTAMP_TYPE = "NoTimestampType"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(slots=True)
class SegmentBatch:
    """One record batch (magic 2) or one shallow legacy message (magic 0/1), as stored."""

    file: str
    broker: str | None
    partition: int | None
    batch_position: int  # byte position of the batch in its file
    size: int  # bytes the batch occupies in the file (12 + Length)
    base_offset: int
    last_offset: int
    magic: int
    compression: str  # none, gzip, snappy, lz4, zstd
    timestamp_type: str  # CreateTime, LogAppendTime, NoTimestampType (magic 0)
    max_timestamp: int  # -1 where the format has none
    transactional: bool = False
    control: bool = False
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    partition_leader_epoch: int = -1
    delete_horizon_ms: int | None = None
    records_count: int = 0
    crc: int = 0

    def facts(self) -> dict:
        """The batch facts as a JSON-ready dict (keys match the record properties)."""
        return {
            "broker": self.broker,
            "partition": self.partition,
            "file": self.file,
            "batch_position": self.batch_position,
            "base_offset": self.base_offset,
            "last_offset": self.last_offset,
            "magic": self.magic,
            "compression": self.compression,
            "timestamp_type": self.timestamp_type,
            "max_timestamp": self.max_timestamp,
            "transactional": self.transactional,
            "control": self.control,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "base_sequence": self.base_sequence,
            "partition_leader_epoch": self.partition_leader_epoch,
            "delete_horizon_ms": self.delete_horizon_ms,
            "records_count": self.records_count,
        }


@dataclass(slots=True)
class SegmentRecord:
    """One record. `value is None` is a tombstone. For a control record, `key`/`value` are
    the control key/value bytes and `control_type` is "COMMIT"/"ABORT"/... (decoded by
    `pipelines.codec.decode_control_record`), with `control_record` the full decoding."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    sequence: int
    batch: SegmentBatch
    control_type: str | None = None
    control_record: dict | None = None

    # Batch facts, read through so one batch object serves all its records.
    @property
    def partition(self) -> int | None:
        return self.batch.partition

    @property
    def broker(self) -> str | None:
        return self.batch.broker

    @property
    def file(self) -> str:
        return self.batch.file

    @property
    def timestamp_type(self) -> str:
        return self.batch.timestamp_type

    @property
    def base_offset(self) -> int:
        return self.batch.base_offset

    @property
    def batch_position(self) -> int:
        return self.batch.batch_position

    @property
    def magic(self) -> int:
        return self.batch.magic

    @property
    def compression(self) -> str:
        return self.batch.compression

    @property
    def transactional(self) -> bool:
        return self.batch.transactional

    @property
    def control(self) -> bool:
        return self.batch.control

    @property
    def producer_id(self) -> int:
        return self.batch.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.batch.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.batch.base_sequence

    @property
    def partition_leader_epoch(self) -> int:
        return self.batch.partition_leader_epoch

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.batch.delete_horizon_ms


@dataclass(slots=True)
class SegmentError:
    """Something in a segment that could not be read. `offset` is the first offset the
    error covers when known (a batch's base offset, or a record's offset), and
    `last_offset` the last one; both are None when the bytes were too broken to tell."""

    file: str
    broker: str | None
    partition: int | None
    batch_position: int
    error: str
    offset: int | None = None
    last_offset: int | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = {
            "error": self.error,
            "broker": self.broker,
            "partition": self.partition,
            "offset": self.offset,
            "last_offset": self.last_offset,
            "file": self.file,
            "batch_position": self.batch_position,
        }
        out.update(self.extra)
        return out
