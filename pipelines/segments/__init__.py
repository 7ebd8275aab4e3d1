"""Kafka `__consumer_offsets` segment files (`.log`): read and write record batches.

Reader: `iter_segment_records(path)` for one file, `iter_paths(paths)` for files, partition
folders, broker log dirs or a parent of several brokers. Writer: `pipelines.segments.writer`.
Both deal in key/value bytes; `pipelines.codec` turns those into records.
"""
from .compression import CODEC_IDS, CODEC_NAMES, CompressionError
from .model import SegmentBatch, SegmentError, SegmentRecord
from .paths import SegmentFile, SegmentPathError, discover, iter_paths, partition_from_path
from .reader import iter_buffer_records, iter_segment_records

__all__ = [
    "CODEC_IDS",
    "CODEC_NAMES",
    "CompressionError",
    "SegmentBatch",
    "SegmentError",
    "SegmentFile",
    "SegmentPathError",
    "SegmentRecord",
    "discover",
    "iter_buffer_records",
    "iter_paths",
    "iter_segment_records",
    "partition_from_path",
]
