"""A realistic group-coordinator simulator: what a Kafka broker writes for N consumer groups.

    from simulator import SimConfig, simulate
    summary = simulate(SimConfig(out="/tmp/sim", groups=20, minutes=10, seed=7, kafka_version="3.9"))

writes `OUT/broker-<id>/__consumer_offsets-N/*.log` (through `pipelines.codec` and
`pipelines.segments.writer`, in the record versions of the release), `OUT/broker-<id>/server.log`
(coordinator lines in that release's wording) and the ground truth `OUT/truth/*.jsonl`.
Same seed, same bytes. See docs/simulator.md.
"""
from .config import ConfigError, Release, SimConfig, release
from .engine import simulate
from .ids import partition_for

__all__ = ["ConfigError", "Release", "SimConfig", "release", "simulate", "partition_for"]
