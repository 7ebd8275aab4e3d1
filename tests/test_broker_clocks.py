"""The brokers' clock offsets (pipelines/silver/clocks.py) and what gold does when they change
(pipelines/gold/incremental.py). The solver takes the per-pair medians Spark computes, the
plan reads the Delta log; one test runs the measure in Spark over logs written in the shape
of a testbed run's. The measure on real brokers' logs, skewed and not, is asserted by
tests/test_coordinator_failover.py and tests/test_testbed_scenarios.py."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from pipelines import stages
from pipelines.gold import incremental
from pipelines.gold.model import GoldParams
from pipelines.lake import Lake, Positions
from pipelines.logs import parse_events
from pipelines.silver import clocks
from tests.spark_fixture import spark  # noqa: F401


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


# --- the instant of a change: the replica manager's line, not the coordinator's ------------

_PARTITIONS = range(6)
_MINUTE = dt.datetime(2026, 11, 29, 3, 40)


def _broker_log(broker: int, receipt: str | None, scheduled: str, created_per_log_ms: int) -> str:
    """A broker's server.log around the creation of `__consumer_offsets` (epoch 0), in the
    order a 4.x broker logs it: the fetchers removed on receipt (omitted when `receipt` is
    None), a log created per partition, then the coordinator's lines."""
    def at(second: str, plus_ms: int = 0) -> str:
        """log4j's time of `second` ("52,284": seconds past 03:40, as log4j prints them)."""
        t = _MINUTE + dt.timedelta(milliseconds=round(float(second.replace(",", ".")) * 1000) + plus_ms)
        return f"[{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d}]"
    names = ", ".join(f"__consumer_offsets-{p}" for p in _PARTITIONS)
    lines = []
    if receipt is not None:
        lines.append(f"{at(receipt)} INFO [ReplicaFetcherManager on broker {broker}] Removed fetcher for partitions "
                     f"Set({names}) (kafka.server.ReplicaFetcherManager)")
        start = receipt
    else:
        start = scheduled
    lines += [f"{at(start, created_per_log_ms * (p + 1))} INFO Created log for partition __consumer_offsets-{p} "
              f"in /data/__consumer_offsets-{p} (kafka.log.LogManager)" for p in _PARTITIONS]
    lines += [f"{at(scheduled, p)} INFO [GroupCoordinator id={broker}] Scheduling "
              + (f"loading of metadata from __consumer_offsets-{p} with epoch 0" if p % 3 == broker - 1
                 else f"unloading of metadata for __consumer_offsets-{p} with epoch 0")
              + " (org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)" for p in _PARTITIONS]
    return "\n".join(lines) + "\n"


def _measured(spark, tmp_path, logs: dict[int, str]) -> dict[int, int]:  # noqa: F811
    for broker, text in logs.items():
        (tmp_path / f"node-{broker}").mkdir(parents=True)
        (tmp_path / f"node-{broker}" / "server.log").write_text(text)
    events = [dict(e, cluster="c") for e in parse_events([tmp_path])]
    assert not [e for e in events if e["event"] in ("unrecognized", "error")]
    columns = ["cluster", "event", "state", "broker", "coordinator_partition", "coordinator_epoch", "ts", "line", "count"]
    df = spark.createDataFrame([tuple(e[c] for c in columns) for e in events],
                               "cluster string, event string, state string, broker int, coordinator_partition int, "
                               "coordinator_epoch int, ts long, line long, count long")
    return {r["broker"]: r["measured_offset_ms"] for r in clocks.measure(df).to_pylist()}


@pytest.mark.spark
def test_a_change_is_timed_by_its_receipt_not_by_the_work_after_it(spark, tmp_path):  # noqa: F811
    """The scenarios test's failure in a CI-like run: three brokers on one clock received the
    creation of `__consumer_offsets` within 11 ms; broker 3 (started last) took 2.5 s to
    create the logs against 0.6 s, so its coordinator logged the change 2.5 s later."""
    logs = {1: _broker_log(1, "52,284", "52,912", 100),
            2: _broker_log(2, "52,300", "52,919", 100),
            3: _broker_log(3, "52,295", "54,784", 410)}
    got = _measured(spark, tmp_path, logs)
    assert all(abs(v) < 20 for v in got.values()), got
    # Without the replica manager's lines (a log filtered of them), the coordinator's own
    # lines are all there is: broker 3 reads as a clock 1.9 s behind, where the lines put it.
    bare = {b: "\n".join(x for x in text.splitlines() if "ReplicaFetcherManager" not in x) + "\n"
            for b, text in logs.items()}
    got = _measured(spark, tmp_path / "bare", bare)
    assert got[3] > 1800 and abs(got[1]) < 20, got


@pytest.mark.spark
def test_a_fetcher_line_long_before_a_change_is_not_its_receipt(spark, tmp_path):  # noqa: F811
    """A broker whose log lacks the change's own fetcher line (filtered, or a version that
    words it otherwise) but holds one of an earlier change that logged no coordinator line:
    past `RECEIPT_WINDOW_MS` that line is not taken for the receipt, and the coordinator's
    lines time the change (broker 3 read 1.9 s behind, where they put it)."""
    stale = _broker_log(3, "-20,000", "-19,000", 100).splitlines()[0]
    logs = {1: _broker_log(1, "52,284", "52,912", 100),
            2: _broker_log(2, "52,300", "52,919", 100),
            3: stale + "\n" + _broker_log(3, None, "54,784", 410)}
    got = _measured(spark, tmp_path, logs)
    assert got[3] > 1800 and abs(got[1]) < 20, got
