"""The brokers' clock offsets (pipelines/silver/clocks.py) and what gold does when they change
(pipelines/gold/incremental.py). No Spark: the solver takes the per-pair medians Spark
computes, the plan reads the Delta log. The measure on real brokers' logs, skewed and not,
is asserted by tests/test_coordinator_failover.py and tests/test_testbed_scenarios.py."""
from __future__ import annotations

import pyarrow as pa

from pipelines import stages
from pipelines.gold import incremental
from pipelines.gold.model import GoldParams
from pipelines.lake import Lake, Positions
from pipelines.silver import clocks


def _pair(a: int, b: int, median_ms: float, lines: int, cluster: str = "c") -> dict:
    return {"cluster": cluster, "a": a, "b": b, "median_ms": median_ms, "lines": lines}


def _by_broker(rows: list[dict]) -> dict[int, tuple[int, int]]:
    return {r["broker"]: (r["measured_offset_ms"], r["clock_offset_ms"]) for r in rows}


def test_offsets_are_counted_from_the_median_broker():
    # The failover test's cluster, as measured there: broker 1 about 15 s ahead of broker 2,
    # broker 3 about 15 s behind it (the medians a few hundred ms off, as metadata reaches
    # brokers that much apart).
    rows = clocks.solve([_pair(1, 2, 14729, 50), _pair(1, 3, 29329, 50), _pair(2, 3, 14604, 67)])
    got = _by_broker(rows)
    assert abs(got[1][0] - 14729) < 400 and abs(got[2][0]) < 400 and abs(got[3][0] + 14604) < 400, got
    assert all(measured == applied for measured, applied in got.values() if abs(measured) > clocks.TOLERANCE_MS)
    assert got[2][1] == 0
    assert {r["shared_lines"] for r in rows if r["broker"] == 2} == {117}


def test_brokers_within_the_tolerance_are_taken_as_agreeing():
    # Three brokers on one clock (the scenarios test's cluster): a change logged up to 1.4 s apart.
    rows = clocks.solve([_pair(1, 2, 1150, 50), _pair(1, 3, 1439, 50), _pair(2, 3, 288, 50)])
    assert [r["clock_offset_ms"] for r in rows] == [0, 0, 0]
    assert _by_broker(rows)[1][0] > 800  # the figure is kept


def test_each_cluster_is_measured_apart():
    rows = clocks.solve([_pair(1, 2, 10_000, 5, "a"), _pair(1, 2, -10_000, 5, "b")])
    offsets = {(r["cluster"], r["broker"]): r["clock_offset_ms"] for r in rows}
    # Two brokers: the median is their middle, each carries half.
    assert offsets == {("a", 1): 5000, ("a", 2): -5000, ("b", 1): -5000, ("b", 2): 5000}


def _gold_lake(tmp_path) -> Lake:
    """A lake with every table gold reads (empty) and every gold table committed with the
    positions a run on it would give, without clocks."""
    lake = Lake(tmp_path / "lake")
    for t in {*stages.GOLD.reads, *stages.GOLD.watched()} - {clocks.TABLE}:
        lake.create(t, pa.schema([pa.field("cluster", pa.string())]))
    p = incremental.plan(lake, stages.GOLD.outputs, GoldParams(), None)
    for t in stages.GOLD.outputs:
        lake.create(t, pa.schema([pa.field("cluster", pa.string())]))
        lake.append(t, pa.table({"cluster": pa.array([], pa.string())}), positions=Positions(incremental.WRITER, p.positions))
    return lake


def test_gold_rebuilds_only_when_an_applied_offset_changes(tmp_path):
    lake = _gold_lake(tmp_path)
    params = GoldParams()
    assert incremental.plan(lake, stages.GOLD.outputs, params, None).mode == "none"
    # Measured but within the tolerance: nothing is applied, nothing to rebuild (a lake whose
    # gold predates the measure had none applied either).
    agreeing = [{"cluster": "c", "broker": 1, "clock_offset_ms": 0, "measured_offset_ms": 900, "shared_lines": 50}]
    assert incremental.plan(lake, stages.GOLD.outputs, params, None, agreeing).mode == "none"
    skewed = [{"cluster": "c", "broker": 1, "clock_offset_ms": 15_000, "measured_offset_ms": 15_000, "shared_lines": 50}]
    p = incremental.plan(lake, stages.GOLD.outputs, params, None, skewed)
    assert (p.mode, p.reason) == ("full", "a broker's clock offset changed")
    assert p.positions[incremental.CLOCKS_ID] != incremental.clocks_fingerprint(agreeing)
