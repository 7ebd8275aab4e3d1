"""`broker_clocks`: each broker's wall clock against its cluster's, measured from the
brokers' own logs.

A group's records carry the time of the broker that wrote them (its coordinator), and its
log lines the time of the broker that logged them. When the coordinator moves, its history
moves to another clock: on machines whose clocks disagree, a time read across the move is
the skew as much as time. What the records and lines cannot tell apart from the skew, the
brokers' lines of one metadata change can.

Each broker's group coordinator logs a line when a metadata change makes it lead a
`__consumer_offsets` partition ("Scheduling loading of metadata from __consumer_offsets-N
with epoch E"; the Scala coordinator: "Elected as the group coordinator for partition N in
epoch E") or follow it ("Scheduling unloading ... with epoch E", "Resigned as ..."). Every
live broker applies the same change as it reaches it (KRaft brokers fetch the metadata log
from the controllers all the time, ZooKeeper brokers get the controller's request), so the
lines of one (partition, epoch) on two brokers are about one instant read on two clocks:
their difference is the two clocks' offset, plus how much later one broker applied the
change.

But a broker logs those lines only after the work the change asks of its replica manager:
for a change that creates the partitions' logs (the creation of `__consumer_offsets`, a
reassignment) that is seconds on a slow or just-started broker. On the testbed, a broker
started last created the 50 logs in 2.5 s against 0.6 s for the others and logged the change
2.8 s after them: a "skew" past the tolerance on machines sharing one clock. The replica
manager's first line of the change, "[ReplicaFetcherManager on broker N] Removed fetcher for
partitions Set(__consumer_offsets-...)", comes before that work (the same run: within 11 ms
on the three brokers). So the instant of a coordinator line is the first such line of its
burst: the fetcher lines naming offsets partitions that came after the broker's previous
coordinator line of a change and before this one (a change logs up to two, the leaders' on
receipt and the followers' after their logs exist, both before the coordinator's lines). A
line with no fetcher line in the `RECEIPT_WINDOW_MS` before it (a log that does not have
them, a broker older than its lines) keeps its own time. Measured on the testbed's logs, one
clock: pairs of brokers within 65 ms (2,786 ms before); three clocks 15 and 30 s apart:
within 22 ms of the truth (354 ms before).

Per pair of brokers: the median difference over the (partition, epoch) lines both logged
(the first line of each, on each broker: a broker replays the metadata at start-up and
logs the current epochs again). Per broker: the offsets that fit every pair best (least
squares, each pair weighted by its lines), counted from the cluster's median broker, the
clock most brokers agree with.

The delay between brokers is not zero: on the testbed (three brokers on one machine, one
clock) the coordinator's lines of one change were up to 1.4 s apart, the same broker later
than another throughout one run (a batch of metadata applied later). So an offset within
`TOLERANCE_MS` is no evidence of a skew and counts as none (`clock_offset_ms` 0;
`measured_offset_ms` keeps the figure), and a skew is known to about a second. A broker
that shares no line with another (one broker, or its log not ingested) is not measured.

Gold subtracts `clock_offset_ms` from the times of what each broker wrote
(pipelines/gold/clocks.py). The measure runs over a handful of rows per broker and
partition epoch in Spark; only the per-pair figures (brokers squared) reach the driver.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

TABLE = "broker_clocks"
TOLERANCE_MS = 2000
# How far back a coordinator line of a change looks for the fetcher line of its receipt:
# longer than any change's work on a broker (seconds), shorter than the time between changes
# a broker could otherwise be confused by.
RECEIPT_WINDOW_MS = 60_000

SCHEMA = pa.schema([
    pa.field("cluster", pa.string(), nullable=False),
    pa.field("broker", pa.int32(), nullable=False),
    # what gold subtracts from the times this broker wrote: 0 within TOLERANCE_MS
    pa.field("clock_offset_ms", pa.int64(), nullable=False),
    # the least-squares offset against the cluster's median broker (null: not measured)
    pa.field("measured_offset_ms", pa.int64()),
    # (partition, epoch) lines this broker shares with the others
    pa.field("shared_lines", pa.int64(), nullable=False),
])

# The lines logged when a metadata change reaches a broker (not those of the work it then
# does: "Started unloading", "Finished loading" come later, by as long as the work takes).
_CHANGE_EVENTS = ("coordinator_loading", "coordinator_unloading", "coordinator_elected", "coordinator_resigned")
# coordinator_events.state of "Started unloading metadata for ..." (Java runtime 3.9+).
_LATER_STATES = ("started",)
# The replica manager's line of a change's receipt (pipelines/logs/reader.py).
_RECEIPT_EVENT = "replica_fetchers_removed"


def change_lines(events: DataFrame) -> DataFrame:
    """(cluster, coordinator_partition, coordinator_epoch, broker, ts): the instant each
    broker received each partition epoch's metadata change (the module's docstring)."""
    later = F.coalesce(F.col("state").isin(*_LATER_STATES), F.lit(False)) if "state" in events.columns else F.lit(False)
    known = F.col("broker").isNotNull() & F.col("ts").isNotNull()
    change = events.where(F.col("event").isin(*_CHANGE_EVENTS) & ~later & known
                          & F.col("coordinator_partition").isNotNull() & F.col("coordinator_epoch").isNotNull())
    receipt = events.where((F.col("event") == _RECEIPT_EVENT) & (F.col("count") > 0) & known)
    lines = (change.select("cluster", "broker", "coordinator_partition", "coordinator_epoch", "ts", "line",
                           F.lit(False).alias("receipt"))
             .unionByName(receipt.select("cluster", "broker", "coordinator_partition", "coordinator_epoch", "ts",
                                         "line", F.lit(True).alias("receipt"))))
    # Each broker's lines in log order (time, then line within a file); a fetcher line right
    # after a coordinator line (or first) opens a burst, whose first line is its instant.
    in_order = Window.partitionBy("cluster", "broker").orderBy("ts", "line")
    opens = F.col("receipt") & ~F.coalesce(F.lag("receipt").over(in_order), F.lit(False))
    lines = lines.withColumn("burst", F.sum(opens.cast("int")).over(
        in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    first = F.min(F.when(F.col("receipt"), F.col("ts"))).over(Window.partitionBy("cluster", "broker", "burst"))
    instant = F.when(F.col("ts") - first <= RECEIPT_WINDOW_MS, first).otherwise(F.col("ts"))
    return (lines.withColumn("ts", instant).where(~F.col("receipt"))
            .groupBy("cluster", "coordinator_partition", "coordinator_epoch", "broker").agg(F.min("ts").alias("ts")))


def pair_offsets(events: DataFrame) -> DataFrame:
    """Per cluster and pair of brokers (a < b): the median of a's time less b's over the
    lines both logged, and how many."""
    lines = change_lines(events)
    a = lines.select("cluster", "coordinator_partition", "coordinator_epoch", F.col("broker").alias("a"), F.col("ts").alias("ta"))
    b = lines.select("cluster", "coordinator_partition", "coordinator_epoch", F.col("broker").alias("b"), F.col("ts").alias("tb"))
    pairs = a.join(b, ["cluster", "coordinator_partition", "coordinator_epoch"]).where(F.col("a") < F.col("b"))
    return pairs.groupBy("cluster", "a", "b").agg(
        F.percentile_approx(F.col("ta") - F.col("tb"), 0.5).alias("median_ms"), F.count("*").alias("lines"))


def solve(pairs: Iterable[Mapping]) -> list[dict]:
    """The broker_clocks rows from the per-pair medians (rows of `pair_offsets`)."""
    import numpy as np

    by_cluster: dict[str, list[Mapping]] = {}
    for p in pairs:
        by_cluster.setdefault(p["cluster"], []).append(p)
    rows = []
    for cluster, ps in sorted(by_cluster.items()):
        brokers = sorted({int(p["a"]) for p in ps} | {int(p["b"]) for p in ps})
        index = {b: i for i, b in enumerate(brokers)}
        # One equation per pair, o_a - o_b = median (weighted by its lines), and sum(o) = 0
        # to fix the origin, moved to the median broker below.
        m = np.zeros((len(ps) + 1, len(brokers)))
        y = np.zeros(len(ps) + 1)
        for k, p in enumerate(ps):
            w = float(p["lines"]) ** 0.5
            m[k, index[int(p["a"])]], m[k, index[int(p["b"])]] = w, -w
            y[k] = w * float(p["median_ms"])
        m[-1, :] = 1.0
        offsets, *_ = np.linalg.lstsq(m, y, rcond=None)
        offsets -= np.median(offsets)
        shared = {b: 0 for b in brokers}
        for p in ps:
            shared[int(p["a"])] += int(p["lines"])
            shared[int(p["b"])] += int(p["lines"])
        for b in brokers:
            measured = int(round(float(offsets[index[b]])))
            rows.append({"cluster": cluster, "broker": b, "measured_offset_ms": measured, "shared_lines": shared[b],
                         "clock_offset_ms": measured if abs(measured) > TOLERANCE_MS else 0})
    return rows


def measure(events: DataFrame) -> pa.Table:
    """The broker_clocks table of `events` (silver coordinator_events)."""
    rows = solve(r.asDict() for r in pair_offsets(events).collect())
    return pa.Table.from_pylist(rows, schema=SCHEMA)
