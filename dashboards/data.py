"""What the report needs from the lake, aggregated in Spark and streamed to the driver page by page.

Two Spark queries feed the whole report, whatever the number of groups:

* `overview_rows(lake)`: one row per consumer group with its headline figures, sorted by
  rank (rebalances, then time spent rebalancing, then duplicate risk), read with
  `toLocalIterator` so only one partition of rows sits on the driver at a time;
* `group_pages(lake)`: every group's page data as (group key, kind, JSON payload) rows,
  globally sorted by group key, streamed and cut into one `GroupData` per group. Per-group
  detail is capped in Spark (the latest N intervals, episodes, windows...) and commit
  rates are bucketed there, so a group with 10 000 rebalances still yields one page-sized
  bundle; the page states what it leaves out.

Tables that are absent from the lake are reported in `LakeTables.missing` and their
sections say "not computed"; nothing here fails because a job has not run yet.
"""
from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

GROUP_KEYS = ("cluster", "group_id")

# Tables the report reads (SPEC.md "Tables"). Gold and what-if ones may be absent.
GOLD = ("rebalance_episodes", "ownership_intervals", "duplicate_windows", "skip_windows", "idle_consumers",
        "rebalance_storms", "commit_anomalies", "coverage_gaps")
WHATIF = ("whatif_summary",)
SILVER = ("group_generations", "offset_commits", "member_assignments", "consumer_group_epochs")


@dataclass(frozen=True)
class Caps:
    """How much of one group's history a page draws (the latest rows are kept)."""

    intervals: int = 1500
    episodes: int = 400
    windows: int = 500
    idle: int = 300
    storms: int = 200
    anomalies: int = 500
    gaps: int = 200
    rate_partitions: int = 24
    rate_buckets: int = 150


@dataclass
class LakeTables:
    """The lake's tables the report can use, read once (lazy Spark DataFrames)."""

    frames: dict[str, DataFrame]
    missing: list[str]
    stats: DataFrame | None = None  # group_stats, computed once and cached

    @classmethod
    def read(cls, lake) -> "LakeTables":
        frames, missing = {}, []
        for name in (*SILVER, *GOLD, *WHATIF):
            if lake.exists(name):
                frames[name] = lake.read(name)
            else:
                missing.append(name)
        return cls(frames, missing)

    def get(self, name: str) -> DataFrame | None:
        return self.frames.get(name)

    def has(self, name: str) -> bool:
        return name in self.frames

    def release(self) -> None:
        if self.stats is not None:
            self.stats.unpersist()
            self.stats = None


def group_key_col() -> F.Column:
    """sha256 hex of cluster NUL group_id: the same value as `dashboards.safe.group_hash`."""
    return F.sha2(F.concat(F.col("cluster"), F.lit("\u0000"), F.col("group_id")), 256)


def _ms(c: str) -> F.Column:
    return F.unix_millis(F.col(c))


def _with_ms(df: DataFrame) -> DataFrame:
    """Timestamps become epoch milliseconds, so the JSON payloads carry plain numbers."""
    cols = []
    for f in df.schema.fields:
        if isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType)):
            cols.append(F.unix_millis(F.col(f"`{f.name}`")).alias(f.name))
        else:
            cols.append(F.col(f"`{f.name}`"))
    return df.select(*cols)


def _present(df: DataFrame, *names: str) -> list[str]:
    have = set(df.columns)
    return [n for n in names if n in have]


# -- overview ----------------------------------------------------------------------------

OVERVIEW_COLUMNS = (
    "cluster", "group_id", "protocol_kind", "rebalances", "generations", "incomplete_rebalances",
    "rebalancing_ms", "last_rebalance_ms", "duplicate_windows", "duplicate_records", "skip_windows",
    "idle_members", "storms", "anomalies", "coverage_gaps", "ownership_intervals",
)


def group_stats(t: LakeTables) -> DataFrame:
    """One row per (cluster, group_id) seen anywhere in the lake, with its headline figures.
    A figure whose table is absent is null (the page prints "not computed")."""
    if t.stats is not None:
        return t.stats
    # Every gold row derives from these silver tables, so their groups are all the groups;
    # scanning the gold tables too would only add work.
    keys = [t.get(name).select(*GROUP_KEYS) for name in SILVER if t.has(name)]
    if not keys:
        keys = [df.select(*GROUP_KEYS) for df in t.frames.values() if set(GROUP_KEYS) <= set(df.columns)]
    if not keys:
        return None
    groups = keys[0]
    for k in keys[1:]:
        groups = groups.unionByName(k)
    out = groups.distinct()

    def join(agg: DataFrame) -> None:
        nonlocal out
        out = out.join(agg, list(GROUP_KEYS), "left")

    if t.has("rebalance_episodes"):
        e = t.get("rebalance_episodes")
        real = ~F.coalesce(F.col("empty_transition"), F.lit(False))
        join(e.groupBy(*GROUP_KEYS).agg(
            F.countDistinct(F.when(real, F.struct("incarnation", "logical_rebalance_id"))).alias("rebalances"),
            F.count("*").alias("generations"),
            F.sum(F.when(F.col("completed_at").isNull(), 1).otherwise(0)).alias("incomplete_rebalances"),
            F.sum(F.coalesce("duration_ms", F.lit(0))).alias("rebalancing_ms"),
            F.max(F.unix_millis(F.coalesce("completed_at", "started_at"))).alias("last_rebalance_ms"),
            F.first("protocol_kind", ignorenulls=True).alias("protocol_kind"),
        ))
    if t.has("ownership_intervals"):
        o = t.get("ownership_intervals").groupBy(*GROUP_KEYS).agg(F.count("*").alias("ownership_intervals"),
                                                                   F.first("protocol_kind", ignorenulls=True).alias("_pk"))
        join(o)
        out = out.withColumn("protocol_kind", F.coalesce(*[c for c in ("protocol_kind", "_pk") if c in out.columns])).drop("_pk")
    if t.has("duplicate_windows"):
        join(t.get("duplicate_windows").groupBy(*GROUP_KEYS).agg(
            F.count("*").alias("duplicate_windows"),
            F.sum(F.greatest(F.coalesce("estimated_records", F.lit(0)), F.lit(0))).alias("duplicate_records")))
    if t.has("skip_windows"):
        join(t.get("skip_windows").groupBy(*GROUP_KEYS).agg(F.count("*").alias("skip_windows")))
    if t.has("idle_consumers"):
        i = t.get("idle_consumers")
        lasting = ~F.coalesce(F.col("transient"), F.lit(False)) if "transient" in i.columns else F.lit(True)
        join(i.groupBy(*GROUP_KEYS).agg(F.countDistinct(F.when(lasting, F.col("member_id"))).alias("idle_members")))
    if t.has("rebalance_storms"):
        join(t.get("rebalance_storms").groupBy(*GROUP_KEYS).agg(F.count("*").alias("storms")))
    if t.has("commit_anomalies"):
        join(t.get("commit_anomalies").groupBy(*GROUP_KEYS).agg(F.count("*").alias("anomalies")))
    if t.has("coverage_gaps"):
        join(t.get("coverage_gaps").groupBy(*GROUP_KEYS).agg(F.count("*").alias("coverage_gaps")))

    cols = []
    for c in OVERVIEW_COLUMNS:
        if c in out.columns:
            cols.append(F.col(c))
        else:
            cols.append(F.lit(None).cast("string" if c == "protocol_kind" else "long").alias(c))
    out = out.select(*cols)
    # Within a computed table, a group with no rows has zero of it (not "unknown").
    zero_if = {
        "rebalance_episodes": ("rebalances", "generations", "incomplete_rebalances", "rebalancing_ms"),
        "duplicate_windows": ("duplicate_windows", "duplicate_records"),
        "skip_windows": ("skip_windows",), "idle_consumers": ("idle_members",),
        "rebalance_storms": ("storms",), "commit_anomalies": ("anomalies",), "coverage_gaps": ("coverage_gaps",),
        "ownership_intervals": ("ownership_intervals",),
    }
    for table, names in zero_if.items():
        if t.has(table):
            for n in names:
                out = out.withColumn(n, F.coalesce(F.col(n), F.lit(0)).cast("long"))
    # Both queries of the report (overview and group pages) start from these figures.
    t.stats = out.cache()
    return t.stats


def rank_order() -> list[F.Column]:
    return [F.col("rebalances").desc_nulls_last(), F.col("rebalancing_ms").desc_nulls_last(),
            F.col("duplicate_records").desc_nulls_last(), F.col("cluster"), F.col("group_id")]


def overview_rows(t: LakeTables) -> Iterator[dict]:
    """Every group's headline row, best-ranked first, streamed partition by partition."""
    stats = group_stats(t)
    if stats is None:
        return iter(())
    return (r.asDict() for r in stats.orderBy(*rank_order()).toLocalIterator())


# -- per-group pages ---------------------------------------------------------------------


@dataclass
class GroupData:
    """Everything one group page draws (each list already capped, newest kept)."""

    key: str
    cluster: str = ""
    group_id: str = ""
    stats: dict = field(default_factory=dict)
    parts: dict[str, list[dict]] = field(default_factory=dict)

    def rows(self, kind: str) -> list[dict]:
        return self.parts.get(kind, [])


def _latest(df: DataFrame, order: F.Column, cap: int) -> DataFrame:
    w = Window.partitionBy(*GROUP_KEYS).orderBy(order)
    return df.withColumn("_n", F.row_number().over(w)).where(F.col("_n") <= cap).drop("_n")


def _payload(df: DataFrame, kind: str, sort: F.Column, keep_keys: bool = False) -> DataFrame:
    """(key, kind, sort, json) rows: one shape for every kind, so one sorted stream carries all."""
    body = _with_ms(df.withColumn("_sort", sort.cast("double")))
    cols = [c for c in body.columns if c != "_sort" and (keep_keys or c not in GROUP_KEYS)]
    return body.select(
        group_key_col().alias("key"), F.lit(kind).alias("kind"), F.col("_sort").alias("sort"),
        F.to_json(F.struct(*[F.col(f"`{c}`") for c in cols])).alias("json"),
    )


def _commit_rates(commits: DataFrame, caps: Caps) -> DataFrame:
    """Records per second committed on each partition, in at most `rate_buckets` time buckets
    per group, for the `rate_partitions` busiest partitions of the group."""
    c = commits
    if "is_deletion" in c.columns:
        c = c.where(~F.col("is_deletion"))
    c = c.where(F.col("offset").isNotNull()).select(*GROUP_KEYS, "topic", "partition", "offset", _ms("record_ts").alias("t"))
    g = Window.partitionBy(*GROUP_KEYS)
    c = c.withColumn("_t0", F.min("t").over(g)).withColumn("_t1", F.max("t").over(g))
    # At least a second per bucket: commits are seconds apart (auto-commit defaults to 5 s),
    # so finer buckets would show gaps rather than a rate.
    width = F.greatest(F.lit(1_000), F.ceil((F.col("_t1") - F.col("_t0") + 1) / F.lit(caps.rate_buckets)))
    c = c.withColumn("_w", width.cast("long")).withColumn("_b", F.floor((F.col("t") - F.col("_t0")) / F.col("_w")))
    b = c.groupBy(*GROUP_KEYS, "topic", "partition", "_b", "_w", "_t0").agg(F.max("offset").alias("offset"), F.count("*").alias("commits"))
    busy = b.groupBy(*GROUP_KEYS, "topic", "partition").agg(F.sum("commits").alias("_all"))
    busy = busy.withColumn("_r", F.row_number().over(Window.partitionBy(*GROUP_KEYS).orderBy(F.col("_all").desc(), "topic", "partition"))) \
        .where(F.col("_r") <= caps.rate_partitions).select(*GROUP_KEYS, "topic", "partition")
    b = b.join(busy, [*GROUP_KEYS, "topic", "partition"])
    wp = Window.partitionBy(*GROUP_KEYS, "topic", "partition").orderBy("_b")
    b = b.withColumn("_pb", F.lag("_b").over(wp)).withColumn("_po", F.lag("offset").over(wp))
    rate = F.when(F.col("_pb").isNotNull(),
                  F.greatest(F.col("offset") - F.col("_po"), F.lit(0)) / ((F.col("_b") - F.col("_pb")) * F.col("_w") / 1000.0))
    return b.select(*GROUP_KEYS, "topic", "partition", ((F.col("_b") + 1) * F.col("_w") + F.col("_t0")).alias("t"),
                    "offset", "commits", rate.alias("rate"))


def group_parts(t: LakeTables, caps: Caps = Caps()) -> DataFrame | None:
    """The union of every group's page data (see module doc), not yet sorted."""
    stats = group_stats(t)
    if stats is None:
        return None
    parts = [_payload(stats, "stats", F.lit(0), keep_keys=True)]

    def add(name: str, kind: str, time_col: str, cap: int, cols: tuple[str, ...], where=None):
        df = t.get(name)
        if df is None:
            return
        if where is not None:
            df = df.where(where)
        df = df.select(*GROUP_KEYS, *_present(df, *cols))
        if time_col not in df.columns:
            return  # an older table without the column the section is ordered by
        df = _latest(df, F.col(time_col).desc_nulls_last(), cap)
        timed = isinstance(df.schema[time_col].dataType, (T.TimestampType, T.TimestampNTZType))
        parts.append(_payload(df, kind, F.unix_millis(F.col(time_col)) if timed else F.lit(0)))

    add("rebalance_episodes", "episode", "started_at", caps.episodes,
        ("incarnation", "protocol_kind", "protocol", "from_generation", "to_generation", "started_at", "started_after_ts",
         "joined_at", "completed_at", "duration_ms", "trigger", "trigger_member", "reason", "members_before", "members_after",
         "partitions_moved", "partitions_revoked", "logical_rebalance_id", "phase", "empty_transition", "start_source"))
    add("ownership_intervals", "interval", "from_ts", caps.intervals,
        ("incarnation", "topic", "partition", "member_id", "group_instance_id", "client_id", "client_host", "owner_kind",
         "from_ts", "to_ts", "start_generation", "end_generation", "owner_left"))
    add("duplicate_windows", "duplicate", "handover_ts", caps.windows,
        ("topic", "partition", "from_member", "to_member", "handover_ts", "start_offset", "end_offset_estimate",
         "end_offset_high", "estimated_records", "cause"))
    add("skip_windows", "skip", "commit_ts", caps.windows,
        ("topic", "partition", "member_id", "commit_ts", "start_offset", "end_offset", "records", "cause"))
    add("idle_consumers", "idle", "from_ts", caps.idle,
        ("incarnation", "member_id", "group_instance_id", "client_id", "generation", "from_ts", "to_ts", "duration_ms", "cause", "transient"))
    add("rebalance_storms", "storm", "started_at", caps.storms,
        ("incarnation", "started_at", "ended_at", "episodes", "generations", "time_rebalancing_ms", "dominant_trigger", "flapping_members"))
    add("commit_anomalies", "anomaly", "started_at", caps.anomalies,
        ("topic", "partition", "kind", "started_at", "ended_at", "span_ms", "offset_from", "offset_to", "commits", "member_id"))
    add("coverage_gaps", "gap", "from_ts", caps.gaps,
        ("topic", "partition", "kind", "from_ts", "to_ts", "log_from", "log_to", "detail"))
    add("whatif_summary", "whatif", "assignor", 100,
        ("incarnation", "group_kind", "real_assignor", "assignor", "protocol", "steps", "rounds", "moved", "revoked",
         "stw_partition_seconds", "max_balance", "final_balance", "idle_member_rounds", "dup_exposure_records", "errors",
         "divergences", "actual_rounds", "actual_moved", "actual_revoked", "actual_stw_partition_seconds",
         "actual_max_balance", "actual_idle_member_rounds", "actual_dup_exposure_records", "notes"))
    if t.has("offset_commits"):
        rates = _commit_rates(t.get("offset_commits"), caps)
        parts.append(_payload(rates, "rate", F.col("t")))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def group_pages(t: LakeTables, caps: Caps = Caps()) -> Iterator[GroupData]:
    """One `GroupData` per group, in group-key order, streamed from a single sorted query."""
    parts = group_parts(t, caps)
    if parts is None:
        return
    rows = parts.orderBy("key", "kind", "sort").toLocalIterator()
    for key, chunk in itertools.groupby(rows, key=lambda r: r["key"]):
        g = GroupData(key=key)
        for r in chunk:
            payload = json.loads(r["json"])
            if r["kind"] == "stats":
                g.stats = payload
                g.cluster, g.group_id = payload["cluster"], payload["group_id"]
            else:
                g.parts.setdefault(r["kind"], []).append(payload)
        if g.stats:  # every group has a stats row; anything else would be a key without a group
            yield g
