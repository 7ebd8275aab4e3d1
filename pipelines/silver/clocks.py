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

Per pair of brokers: the median difference over the (partition, epoch) lines both logged
(the first line of each, on each broker: a broker replays the metadata at start-up and
logs the current epochs again). Per broker: the offsets that fit every pair best (least
squares, each pair weighted by its lines), counted from the cluster's median broker, the
clock most brokers agree with.

The delay between brokers is not zero: on the testbed (three brokers on one machine, one
clock) the same change was logged up to 1.4 s apart, the same broker later than another
throughout one run (a batch of metadata applied later). So an offset within
`TOLERANCE_MS` is no evidence of a skew and counts as none (`clock_offset_ms` 0;
`measured_offset_ms` keeps the figure), and a skew is known to about a second. A broker
that shares no line with another (one broker, or its log not ingested) is not measured.

Not yet handled: a change that creates the partitions' logs (the creation of
`__consumer_offsets`, a reassignment). A broker logs its lines after that work, so a broker
slow at it reads as a clock behind: on the testbed, a broker started last created the 50
logs in 2.5 s against 0.6 s for the others and logged the change 2.8 s after them, a
"skew" past the tolerance on machines sharing one clock. The first line each broker logs for
the change ("[ReplicaFetcherManager on broker N] Removed fetcher for partitions Set(...)",
before any log is created) agreed within 11 ms on the same run: reading it is the fix.

Gold subtracts `clock_offset_ms` from the times of what each broker wrote
(pipelines/gold/clocks.py). The measure runs over a handful of rows per broker and
partition epoch in Spark; only the per-pair figures (brokers squared) reach the driver.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

TABLE = "broker_clocks"
TOLERANCE_MS = 2000

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


def change_lines(events: DataFrame) -> DataFrame:
    """(cluster, coordinator_partition, coordinator_epoch, broker, ts): each broker's first
    line of each partition epoch's metadata change."""
    later = F.coalesce(F.col("state").isin(*_LATER_STATES), F.lit(False)) if "state" in events.columns else F.lit(False)
    e = events.where(F.col("event").isin(*_CHANGE_EVENTS) & ~later
                     & F.col("coordinator_partition").isNotNull() & F.col("coordinator_epoch").isNotNull()
                     & F.col("broker").isNotNull() & F.col("ts").isNotNull())
    return e.groupBy("cluster", "coordinator_partition", "coordinator_epoch", "broker").agg(F.min("ts").alias("ts"))


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
