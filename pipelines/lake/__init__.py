"""The lake: Delta tables, written by delta-spark from Spark jobs and by delta-rs where no
JVM should start, and the positions each table keeps of its inputs.

This package is the only place that knows about delta-rs; everything else goes through
`Lake`. See docs/lake.md.
"""
from pipelines.lake.lake import Lake, LakeError
from pipelines.lake.positions import Positions, PositionsLost

__all__ = ["Lake", "LakeError", "Positions", "PositionsLost"]
