"""Gold's inputs on one clock: each record's and log line's time less its writer's clock
offset (silver `broker_clocks`, measured in pipelines/silver/clocks.py).

A record of `__consumer_offsets` is stamped by the leader of its partition in its term
(`coordinator_epoch`); the broker that led a term is the one that logged loading it
("Scheduling loading of metadata from __consumer_offsets-N with epoch E", or "Elected as
the group coordinator for partition N in epoch E"). A log line is stamped by the broker
that logged it. Terms whose leader logged no such line (its log not ingested, or older than
the log) and brokers with no measured offset keep their own times.

Applied to the inputs, before any gold table is built, so that every table reads times on
one clock and no builder has to know about clocks. Without a non-zero offset (brokers whose
clocks agree, a single broker, no logs) the inputs are left as they are.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.spark import local_frame

from .model import GoldInputs

# Coordinator-stamped times of the silver record tables (pipelines/silver/schemas.py).
RECORD_TIMES = ("record_ts", "commit_ts", "expire_ts", "current_state_ts")
TERM_KEY = ["cluster", "coordinator_partition", "coordinator_epoch"]
_LEADER_EVENTS = ("coordinator_loading", "coordinator_elected")


def offsets(rows: Iterable[Mapping]) -> dict[tuple[str, int], int]:
    """(cluster, broker) → milliseconds to take off its times: the broker_clocks rows with a
    non-zero clock_offset_ms."""
    return {(r["cluster"], int(r["broker"])): int(r["clock_offset_ms"]) for r in rows if r["clock_offset_ms"]}


def term_leaders(events: DataFrame) -> DataFrame:
    """(cluster, coordinator_partition, coordinator_epoch, broker): the broker that loaded
    each term of a `__consumer_offsets` partition (its first such line)."""
    e = events.where(F.col("event").isin(*_LEADER_EVENTS) & F.col("coordinator_partition").isNotNull()
                     & F.col("coordinator_epoch").isNotNull() & F.col("broker").isNotNull() & F.col("ts").isNotNull())
    return e.groupBy(*TERM_KEY).agg(F.min_by("broker", "ts").alias("broker"))


def align(inputs: GoldInputs, leaders: DataFrame | None, by_broker: Mapping[tuple[str, int], int]) -> GoldInputs:
    """`inputs` with every coordinator-stamped time moved onto the cluster's clock."""
    if not by_broker:
        return inputs
    spark = inputs.offset_commits.sparkSession
    clock = F.broadcast(local_frame(spark, [(c, b, o) for (c, b), o in sorted(by_broker.items())],
                                              "cluster string, broker int, _clock_ms long"))
    changed: dict[str, DataFrame] = {}
    if leaders is not None:
        terms = F.broadcast(leaders.join(clock, ["cluster", "broker"]).drop("broker"))
        for f in dataclasses.fields(inputs):
            df = getattr(inputs, f.name)
            if df is None or not set(TERM_KEY) <= set(df.columns):
                continue
            times = [c for c in RECORD_TIMES if c in df.columns]
            if times:
                changed[f.name] = _shifted(df.join(terms, TERM_KEY, "left"), times)
    ev = inputs.coordinator_events
    if ev is not None and {"cluster", "broker", "ts"} <= set(ev.columns):
        ev = ev.join(clock, ["cluster", "broker"], "left")
        ev = ev.withColumn("ts", F.col("ts") - F.coalesce("_clock_ms", F.lit(0)))
        changed["coordinator_events"] = _shifted(ev, [c for c in ("event_ts",) if c in ev.columns])
    return dataclasses.replace(inputs, **changed)


def _shifted(df: DataFrame, times: list[str]) -> DataFrame:
    """Each of `times` less the row's `_clock_ms` (none: unchanged); the column order kept."""
    columns = [c for c in df.columns if c != "_clock_ms"]
    for c in times:
        df = df.withColumn(c, F.when(F.col("_clock_ms").isNull(), F.col(c))
                           .otherwise(F.timestamp_micros(F.unix_micros(c) - F.col("_clock_ms") * 1000)))
    return df.select(*columns)
