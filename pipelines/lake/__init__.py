"""The lake: Delta tables (delta-rs owns the log, Spark reads and writes the Parquet).

This package is the only place that knows about delta-rs; everything else goes through
`Lake`. See docs/lake.md.
"""
from pipelines.lake.lake import Lake, LakeError

__all__ = ["Lake", "LakeError"]
