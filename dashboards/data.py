"""What the report needs from the lake: a few aggregations in Spark, small Arrow results on the driver.

Three Spark queries feed the whole report, whatever the number of groups or clusters; each
is distributed, and only its aggregated, bounded result comes to the driver, as Arrow
(`DataFrame.toArrow`):

* `group_stats`: one row per consumer group with its headline figures and the totals the
  pages quote: gold's `group_summary` read as it is (where each figure is defined);
* `page_detail`: what each group page draws and lists, as (group key, kind, sort, JSON)
  rows: the latest ownership intervals and episodes, the top-N rows of every finding
  (the most records at risk, the longest idle spans and stalls...), the latest
  incarnation's what-if rows. One union, one window ranking rows within (group, kind),
  one shuffle;
* `commit_rates`: records/s committed per partition, bucketed in time per group, for each
  group's busiest partitions (one aggregation, plus one shuffle by group for the ranking),
  from gold's `commit_attribution` (silver's `offset_commits` before gold has run).

Bounds: every per-group list is capped (`Caps`), and each kind also has a report-wide
row budget; when the groups' totals would exceed it, the cap is lowered for the biggest
groups only (`fit_cap`), so 10 000 groups or 100 000 episodes still bring a bounded number
of rows to the driver. The stats row of each group carries the full totals, so a page
says what it leaves out.

Tables that are absent from the lake are reported in `LakeTables.missing` and their
sections say "not computed"; nothing here fails because a job has not run yet.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dashboards.safe import group_hash
from pipelines import stages
from pipelines.spark import local_frame

GROUP_KEYS = ("cluster", "group_id")

# Tables the report reads (pipelines/stages.py, stages.REPORT), by the stage writing them.
# The silver ones: those every group appears in. Gold and what-if ones may be absent.
GOLD = tuple(t for t in stages.REPORT.reads if t in stages.GOLD.outputs)
WHATIF = tuple(t for t in stages.REPORT.reads if t in stages.WHATIF.outputs)
SILVER = tuple(t for t in stages.REPORT.reads if t not in GOLD + WHATIF)


@dataclass(frozen=True)
class Caps:
    """How much of one group's history a page draws, and of the whole report the driver holds.

    Per group: the latest `intervals`/`episodes`/`gaps`/`lag` samples, the top `windows` duplicate and skip
    windows (most records first), `idle` longest idle spans, `storms` longest storms,
    `anomalies` longest anomalies, the `rate_partitions` busiest partitions' commit rates in
    at most `rate_buckets` time buckets, the what-if rows of the latest incarnation.
    Report-wide (`budget_*`): at most that many rows of each kind reach the driver; a cap is
    lowered (never below `floor`) for the groups that hold more, see `fit_cap`."""

    intervals: int = 1500
    episodes: int = 400
    windows: int = 500
    idle: int = 300
    storms: int = 200
    anomalies: int = 500
    gaps: int = 200
    lag: int = 400
    whatif: int = 64
    rate_partitions: int = 24
    rate_buckets: int = 150
    budget_intervals: int = 600_000
    budget_episodes: int = 300_000
    budget_findings: int = 200_000  # per finding kind (duplicate, skip, idle, storm, anomaly, gap, lag)
    budget_rate_points: int = 600_000
    floor: int = 10


@dataclass
class LakeTables:
    """The lake's tables the report can use, read once (lazy Spark DataFrames)."""

    frames: dict[str, DataFrame]
    missing: list[str]
    # Where the frames were read (`read`): the lake and each table's version, so that
    # `restricted` reads the same versions again, only the wanted clusters' files.
    lake: Any = None
    versions: dict[str, int] = field(default_factory=dict)

    @classmethod
    def read(cls, lake) -> "LakeTables":
        frames, missing, versions = {}, [], {}
        for name in (*SILVER, *GOLD, *WHATIF):
            if lake.exists(name):
                versions[name] = lake.version(name)
                frames[name] = lake.read(name, versions[name])
            else:
                missing.append(name)
        return cls(frames, missing, lake, versions)

    def get(self, name: str) -> DataFrame | None:
        return self.frames.get(name)

    def restricted(self, keys: list[tuple[str, str]]) -> "LakeTables":
        """The same tables holding only the groups `keys` ((cluster, group_id) pairs): the
        clusters' files alone (chosen in the Delta log: a filter on the frames' `cluster`
        column prunes no file, it is computed per row from the file's name), then a
        broadcast semi join for the groups. Every query of the report is per group, so its
        results on these tables are exactly those groups' rows of the results on the whole
        tables."""
        spark = next(iter(self.frames.values())).sparkSession
        k = F.broadcast(local_frame(spark, sorted(set(keys)), "cluster string, group_id string"))
        clusters = sorted({c for c, _ in keys})
        frames = {n: (self.lake.read(n, self.versions[n], clusters=clusters) if n in self.versions
                      else df.where(F.col("cluster").isin(clusters))).join(k, list(GROUP_KEYS), "left_semi")
                  for n, df in self.frames.items()}
        return LakeTables(frames, list(self.missing))

    def has(self, name: str) -> bool:
        return name in self.frames


def group_key_col() -> F.Column:
    """sha256 hex of cluster NUL group_id: the same value as `dashboards.safe.group_hash`."""
    return F.sha2(F.concat(F.col("cluster"), F.lit("\u0000"), F.col("group_id")), 256)


def _present(df: DataFrame, *names: str) -> list[str]:
    have = set(df.columns)
    return [n for n in names if n in have]


def _is_time(df: DataFrame, name: str) -> bool:
    return isinstance(df.schema[name].dataType, (T.TimestampType, T.TimestampNTZType))


def _fewer_tasks(union: DataFrame) -> DataFrame:
    """A union of a dozen tables scans at least one task per table (more per table with
    several files): on a small lake that is dozens of tasks of a few rows each, and per-task
    overhead is the cost. Coalescing (no shuffle) to the cluster's cores keeps every core
    busy and no more tasks than that; the partial aggregation still runs before the shuffle."""
    cores = max(1, union.sparkSession.sparkContext.defaultParallelism)
    return union.coalesce(cores)


# -- headline figures per group (one query) -----------------------------------------------

# Every figure is gold's `group_summary` (pipelines/gold/summary.py defines each once, and
# `sql` users read the same table); the report only renames a few to its own short names.
SUMMARY = "group_summary"
OVERVIEW_COLUMNS = (
    "cluster", "group_id", "protocol_kind", "rebalances", "generations", "incomplete_rebalances",
    "rebalancing_ms", "last_rebalance_ms", "duplicate_windows", "duplicate_records", "skip_windows",
    "idle_members", "transient_idle_members", "storms", "anomalies", "coverage_gaps", "ownership_intervals",
)
# Totals the pages quote next to a capped list, and what the commit-rate buckets need.
EXTRA_COLUMNS = ("skip_records", "idle_spans", "commit_partitions", "commit_t0", "commit_t1", "lag_rows",
                 "unconsumed_ms", "partitions_moved", "partitions_revoked",
                 "rebalances_without_duration", "max_lag")
# report name → group_summary column (the others have the same name in both).
RENAMED = {"generations": "episodes", "duplicate_records": "records_at_risk", "anomalies": "commit_anomalies",
           "skip_records": "skipped_records", "commit_partitions": "committed_partitions", "lag_rows": "lag_samples"}
AS_MS = {"last_rebalance_ms": "last_rebalance_at", "commit_t0": "first_commit_at", "commit_t1": "last_commit_at"}


def _stats_frame(t: LakeTables) -> DataFrame | None:
    """The report's headline rows: gold's `group_summary` as it is. Before gold has run, the
    groups silver holds, every figure null (the pages print "not computed")."""
    names = (*OVERVIEW_COLUMNS, *EXTRA_COLUMNS)
    s = t.get(SUMMARY)
    if s is not None:
        cols = [F.col(c) for c in GROUP_KEYS]
        for n in names[len(GROUP_KEYS):]:
            if n in AS_MS:
                cols.append(F.unix_millis(F.col(AS_MS[n])).alias(n))
            else:
                cols.append(F.col(RENAMED.get(n, n)).alias(n))
        return s.select(group_key_col().alias("key"), *cols)
    keys = [df.select(*GROUP_KEYS) for n in SILVER if (df := t.get(n)) is not None]
    if not keys:
        return None
    groups = keys[0]
    for k in keys[1:]:
        groups = groups.unionByName(k)
    groups = _fewer_tasks(groups).distinct()
    nulls = [F.lit(None).cast("string" if n == "protocol_kind" else "long").alias(n) for n in names[len(GROUP_KEYS):]]
    return groups.select(group_key_col().alias("key"), *GROUP_KEYS, *nulls)


def group_stats(t: LakeTables) -> pa.Table | None:
    """One row per (cluster, group_id) seen in the silver tables (every gold row derives from
    them), with its headline figures; ranked (see `rank_sort_keys`). A figure whose table is
    absent is null (the page prints "not computed"). One Spark query, collected as Arrow."""
    df = _stats_frame(t)
    if df is None:
        return None
    table = df.toArrow()
    return table.sort_by(rank_sort_keys()) if table.num_rows else table


def rank_sort_keys() -> list[tuple[str, str]]:
    """Rebalances, then time rebalancing, then records at risk (each highest first, missing
    last), then cluster and group id."""
    return [("rebalances", "descending"), ("rebalancing_ms", "descending"), ("duplicate_records", "descending"),
            ("cluster", "ascending"), ("group_id", "ascending")]


# -- bounds ------------------------------------------------------------------------------


def fit_cap(counts, cap: int, budget: int, floor: int = 10) -> int:
    """The largest k ≤ cap with Σ min(count, k) ≤ budget: groups with fewer rows than k are
    untouched, only the biggest ones are cut. Never below `floor` (so with very many groups
    the budget can be exceeded by at most groups × floor rows)."""
    c = np.asarray([x or 0 for x in counts], dtype=np.int64)
    if cap <= floor or int(np.minimum(c, cap).sum()) <= budget:
        return cap
    lo, hi = floor, cap  # invariant: answer in [lo, hi]; sum(min(c, lo)) may exceed budget only if lo == floor
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if int(np.minimum(c, mid).sum()) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def effective_caps(stats: pa.Table, caps: Caps) -> Caps:
    """`caps` lowered where the report-wide budgets need it (see `fit_cap`)."""
    def counts(col):
        return stats.column(col).to_pylist()

    fc = caps.floor
    out = replace(
        caps,
        intervals=fit_cap(counts("ownership_intervals"), caps.intervals, caps.budget_intervals, fc),
        episodes=fit_cap(counts("generations"), caps.episodes, caps.budget_episodes, fc),
        windows=min(fit_cap(counts("duplicate_windows"), caps.windows, caps.budget_findings, fc),
                    fit_cap(counts("skip_windows"), caps.windows, caps.budget_findings, fc)),
        idle=fit_cap(counts("idle_spans"), caps.idle, caps.budget_findings, fc),
        storms=fit_cap(counts("storms"), caps.storms, caps.budget_findings, fc),
        anomalies=fit_cap(counts("anomalies"), caps.anomalies, caps.budget_findings, fc),
        gaps=fit_cap(counts("coverage_gaps"), caps.gaps, caps.budget_findings, fc),
        lag=fit_cap(counts("lag_rows"), caps.lag, caps.budget_findings, fc),
    )
    # Commit rates: (busiest partitions) x (time buckets) points per group; fewer buckets
    # for every group when the report would hold too many points.
    parts = sum(min(p or 0, caps.rate_partitions) for p in counts("commit_partitions"))
    if parts:
        buckets = max(caps.floor, min(caps.rate_buckets, caps.budget_rate_points // parts))
        out = replace(out, rate_buckets=buckets)
    return out


# -- per-group page detail (one query) ----------------------------------------------------

# kind: (table, columns, display order (time) column, selection order (highest kept), `Caps` attribute)
DETAIL = {
    "episode": ("rebalance_episodes",
                ("incarnation", "protocol_kind", "protocol", "from_generation", "to_generation", "started_at",
                 "started_after_ts", "joined_at", "completed_at", "duration_ms", "trigger", "trigger_member", "reason",
                 "members_before", "members_after", "partitions_moved", "partitions_revoked", "logical_rebalance_id",
                 "phase", "empty_transition", "start_source", "unconsumed_ms", "lag_at_start", "lag_sampled_at"),
                "started_at", ("started_at",), "episodes"),
    "interval": ("ownership_intervals",
                 ("incarnation", "topic", "partition", "member_id", "group_instance_id", "client_id", "client_host",
                  "owner_kind", "from_ts", "to_ts", "start_generation", "end_generation", "owner_left"),
                 "from_ts", ("from_ts",), "intervals"),
    "duplicate": ("duplicate_windows",
                  ("topic", "partition", "from_member", "to_member", "handover_ts", "start_offset", "end_offset_estimate",
                   "end_offset_high", "estimated_records", "cause"),
                  "handover_ts", ("estimated_records", "handover_ts"), "windows"),
    "skip": ("skip_windows",
             ("topic", "partition", "member_id", "commit_ts", "start_offset", "end_offset", "records", "cause"),
             "commit_ts", ("records", "commit_ts"), "windows"),
    "idle": ("idle_consumers",
             ("incarnation", "member_id", "group_instance_id", "client_id", "generation", "from_ts", "to_ts",
              "duration_ms", "cause", "transient"),
             "from_ts", ("duration_ms", "from_ts"), "idle"),
    "storm": ("rebalance_storms",
              ("incarnation", "started_at", "ended_at", "episodes", "generations", "time_rebalancing_ms",
               "dominant_trigger", "flapping_members"),
              "started_at", ("time_rebalancing_ms", "started_at"), "storms"),
    "anomaly": ("commit_anomalies",
                ("topic", "partition", "kind", "started_at", "ended_at", "span_ms", "offset_from", "offset_to", "commits",
                 "member_id"),
                "started_at", ("span_ms", "started_at"), "anomalies"),
    "gap": ("coverage_gaps",
            ("topic", "partition", "kind", "from_ts", "to_ts", "log_from", "log_to", "detail"),
            "from_ts", ("from_ts",), "gaps"),
    "lag": ("consumer_lag",
            ("topic", "partition", "sampled_at", "end_offset", "committed_offset", "committed_at", "lag"),
            "sampled_at", ("sampled_at", "lag"), "lag"),
}
WHATIF_COLUMNS = (
    "incarnation", "segment", "group_kind", "real_assignor", "assignor", "protocol", "steps", "rounds", "moved", "revoked",
    "stw_partition_seconds", "max_balance", "final_balance", "idle_member_rounds", "dup_exposure_records", "errors",
    "divergences", "actual_rounds", "actual_moved", "actual_revoked", "actual_stw_partition_seconds",
    "actual_max_balance", "actual_idle_member_rounds", "actual_dup_exposure_records", "notes")


def _num(df: DataFrame, c: str) -> F.Column:
    col = F.col(f"`{c}`")
    return (F.unix_millis(col) if _is_time(df, c) else col).cast("double")


def _branch(df: DataFrame, kind: str, cols: tuple[str, ...], sort: str | None, order: tuple[str, ...], cap: int,
            dense: bool = False) -> DataFrame:
    """(key, kind, _cap, _dense, _o1, _o2, sort, json) rows: one shape for every kind, so one
    union and one window rank them all. `order` picks which rows a page keeps (highest
    first); `sort` is the order the page draws them in; times travel as epoch ms."""
    present = _present(df, *cols)
    o = [_num(df, c) if c in df.columns else F.lit(None).cast("double") for c in order]
    o += [F.lit(None).cast("double")] * (2 - len(o))
    return df.select(
        group_key_col().alias("key"), F.lit(kind).alias("kind"), F.lit(cap).alias("_cap"), F.lit(dense).alias("_dense"),
        o[0].alias("_o1"), o[1].alias("_o2"),
        (_num(df, sort) if sort and sort in df.columns else F.lit(0.0)).alias("sort"),
        F.to_json(F.struct(*[_ms_col(df, c) for c in present])).alias("json"),
    )


def _ms_col(df: DataFrame, c: str) -> F.Column:
    col = F.col(f"`{c}`")
    return (F.unix_millis(col) if _is_time(df, c) else col).alias(c)


def _detail_frame(t: LakeTables, caps: Caps) -> DataFrame | None:
    branches = []
    for kind, (table, cols, sort, order, cap_attr) in DETAIL.items():
        df = t.get(table)
        if df is None or sort not in df.columns or not set(GROUP_KEYS) <= set(df.columns):
            continue  # absent (the page says "not computed"), or an older table without the column
        branches.append(_branch(df, kind, cols, sort, order, getattr(caps, cap_attr)))
    whatif = t.get("whatif_summary")
    if whatif is not None and "incarnation" in whatif.columns:
        # Every assignor row of the latest history (dense rank 1 on incarnation, segment).
        branches.append(_branch(whatif, "whatif", WHATIF_COLUMNS, None, ("incarnation", "segment"), caps.whatif,
                                    dense=True))
    if not branches:
        return None
    union = branches[0]
    for b in branches[1:]:
        union = union.unionByName(b)
    union = _fewer_tasks(union)
    w = Window.partitionBy("key", "kind").orderBy(F.col("_o1").desc_nulls_last(), F.col("_o2").desc_nulls_last())
    ranked = union.withColumn("_n", F.row_number().over(w)).withColumn("_d", F.dense_rank().over(w))
    keep = F.when(F.col("_dense"), (F.col("_d") == 1) & (F.col("_n") <= F.col("_cap"))).otherwise(F.col("_n") <= F.col("_cap"))
    return ranked.where(keep).select("key", "kind", "sort", "json")


# -- commit rates (one query) -------------------------------------------------------------


def _commit_rates_frame(t: LakeTables, stats: pa.Table, caps: Caps) -> DataFrame | None:
    """Records per second committed on each partition, in at most `rate_buckets` time buckets
    per group, for the `rate_partitions` busiest partitions of the group.

    From gold's `commit_attribution` where gold has run: its times are on the cluster's
    clock (pipelines/gold/clocks.py), as are the group's first and last commit the buckets
    start from, and aborted transactional commits are out of it. Before gold, silver's
    commits as the brokers wrote them."""
    commits = t.get("commit_attribution")
    if commits is None:
        commits = t.get("offset_commits")
    if commits is None:
        return None
    spark = commits.sparkSession
    # Bucket width per group from the stats' first and last commit: at least a second per
    # bucket, since commits are seconds apart (auto-commit defaults to 5 s) and finer
    # buckets would show gaps rather than a rate.
    t0 = stats.column("commit_t0").to_pylist()
    t1 = stats.column("commit_t1").to_pylist()
    rows = [(c, g, a, max(1_000, -(-(b - a + 1) // caps.rate_buckets)))
            for c, g, a, b in zip(stats.column("cluster").to_pylist(), stats.column("group_id").to_pylist(), t0, t1)
            if a is not None and b is not None]
    if not rows:
        return None
    # A few thousand rows at most, broadcast to every task of the scan below.
    bounds = local_frame(spark, rows, "cluster string, group_id string, _t0 long, _w long")
    c = commits
    if "is_deletion" in c.columns:
        c = c.where(~F.coalesce(F.col("is_deletion"), F.lit(False)))
    c = c.where(F.col("offset").isNotNull()).select(*GROUP_KEYS, "topic", "partition", "offset",
                                                     F.unix_millis(F.col("record_ts")).alias("t"))
    c = c.join(F.broadcast(bounds), list(GROUP_KEYS))
    c = c.withColumn("_b", F.floor((F.col("t") - F.col("_t0")) / F.col("_w")))
    b = c.groupBy(*GROUP_KEYS, "topic", "partition", "_b", "_w", "_t0").agg(
        F.max("offset").alias("offset"), F.count("*").alias("commits"))
    # One shuffle by group serves both windows below (their keys start with the group's).
    b = b.repartition(*GROUP_KEYS)
    part = Window.partitionBy(*GROUP_KEYS, "topic", "partition")
    b = b.withColumn("_all", F.sum("commits").over(part))
    rank = Window.partitionBy(*GROUP_KEYS).orderBy(F.col("_all").desc(), "topic", "partition")
    b = b.withColumn("_r", F.dense_rank().over(rank)).where(F.col("_r") <= caps.rate_partitions)
    wp = part.orderBy("_b")
    b = b.withColumn("_pb", F.lag("_b").over(wp)).withColumn("_po", F.lag("offset").over(wp))
    rate = F.when(F.col("_pb").isNotNull(),
                  F.greatest(F.col("offset") - F.col("_po"), F.lit(0)) / ((F.col("_b") - F.col("_pb")) * F.col("_w") / 1000.0))
    return b.select(group_key_col().alias("key"), "topic", "partition",
                    ((F.col("_b") + 1) * F.col("_w") + F.col("_t0")).alias("t"), "offset", "commits", rate.alias("rate"))


# -- driver side ---------------------------------------------------------------------------


@dataclass
class GroupData:
    """Everything one group page draws (each list already capped)."""

    key: str
    cluster: str = ""
    group_id: str = ""
    stats: dict = field(default_factory=dict)
    parts: dict[str, list[dict]] = field(default_factory=dict)

    def rows(self, kind: str) -> list[dict]:
        return self.parts.get(kind, [])


def _index(table: pa.Table, sort_keys: list[tuple[str, str]]) -> tuple[pa.Table, dict[str, tuple[int, int]]]:
    """`table` sorted (by key first) and each key's (offset, length) in it."""
    if table.num_rows == 0:
        return table, {}
    table = table.sort_by(sort_keys)
    keys = table.column("key").combine_chunks()
    enc = pc.dictionary_encode(keys).indices.to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.r_[True, enc[1:] != enc[:-1]])
    ends = np.r_[starts[1:], len(enc)]
    names = pc.take(keys, pa.array(starts)).to_pylist()
    return table, {k: (int(s), int(e - s)) for k, s, e in zip(names, starts, ends)}


@dataclass
class ReportData:
    """The report's three query results on the driver, and the caps they were cut with."""

    stats: pa.Table | None
    caps: Caps
    detail: pa.Table | None = None
    rates: pa.Table | None = None
    _detail_at: dict[str, tuple[int, int]] = field(default_factory=dict)
    _rates_at: dict[str, tuple[int, int]] = field(default_factory=dict)
    pages_for: set[str] | None = None  # group keys whose pages to render (None: every group)

    @property
    def groups(self) -> int:
        return 0 if self.stats is None else self.stats.num_rows

    def driver_rows(self) -> dict[str, int]:
        return {name: 0 if t is None else t.num_rows
                for name, t in (("stats", self.stats), ("detail", self.detail), ("rates", self.rates))}

    def overview_rows(self) -> list[dict]:
        """Every group's headline row, best-ranked first."""
        return [] if self.stats is None else self.stats.select(list(OVERVIEW_COLUMNS)).to_pylist()

    def coverage(self) -> list[dict]:
        """Per cluster, in name order: its groups and the first and last offset commit the
        lake holds of them (epoch ms; None when it holds none), i.e. what the report covers."""
        if self.stats is None or not self.stats.num_rows:
            return []
        per = self.stats.group_by("cluster").aggregate(
            [("group_id", "count"), ("commit_t0", "min"), ("commit_t1", "max")])
        rows = [{"cluster": r["cluster"], "groups": r["group_id_count"], "first_commit_ms": r["commit_t0_min"],
                 "last_commit_ms": r["commit_t1_max"]} for r in per.to_pylist()]
        return sorted(rows, key=lambda r: r["cluster"])

    def group_pages(self):
        """One `GroupData` per group, in rank order; rows are decoded one group at a time."""
        if self.stats is None:
            return
        for s in self.stats.to_pylist():
            if self.pages_for is not None and s["key"] not in self.pages_for:
                continue
            g = GroupData(key=s["key"], cluster=s["cluster"], group_id=s["group_id"], stats=s)
            if s["key"] in self._detail_at:
                off, n = self._detail_at[s["key"]]
                chunk = self.detail.slice(off, n)
                for kind, payload in zip(chunk.column("kind").to_pylist(), chunk.column("json").to_pylist()):
                    g.parts.setdefault(kind, []).append(json.loads(payload))
            if s["key"] in self._rates_at:
                off, n = self._rates_at[s["key"]]
                g.parts["rate"] = self.rates.slice(off, n).drop_columns(["key"]).to_pylist()
            yield g


def load(t: LakeTables, caps: Caps = Caps()) -> ReportData:
    """Run the report's queries (stats first: the others are cut to budgets it gives)."""
    stats = group_stats(t)
    if stats is None or stats.num_rows == 0:
        return ReportData(stats, caps)
    return _load_pages(t, stats, ReportData(stats, effective_caps(stats, caps)))


def load_changed(t: LakeTables, caps: Caps, keys: list[tuple[str, str]], previous: pa.Table,
                 previous_caps: Caps) -> ReportData | None:
    """The report's data when only the groups `keys` changed since the report whose headline
    rows were `previous` (cut with `previous_caps`): those groups' rows are recomputed and
    merged into `previous`, and only their pages are to be rendered (`pages_for`). None when
    the merged figures give other caps than before: every page may then differ."""
    sub = t.restricted(keys)
    fresh = group_stats(sub)
    touched = pa.array(sorted({group_hash(c, g) for c, g in keys}))
    kept = previous.filter(pc.invert(pc.is_in(previous.column("key"), value_set=touched)))
    parts = [x for x in (kept, fresh) if x is not None and x.num_rows]
    if not parts:
        return ReportData(previous.slice(0, 0), caps)
    stats = pa.concat_tables([p.select(kept.column_names).cast(kept.schema) for p in parts])
    stats = stats.sort_by(rank_sort_keys())
    eff = effective_caps(stats, caps)
    if eff != previous_caps:
        return None
    data = ReportData(stats, eff, pages_for=set(touched.to_pylist()))
    if fresh is None or fresh.num_rows == 0:
        return data
    return _load_pages(sub, fresh, data)


def _load_pages(t: LakeTables, stats: pa.Table, data: ReportData) -> ReportData:
    """`data` with the page detail and commit rates of the groups of `stats`."""
    eff = data.caps
    detail = _detail_frame(t, eff)
    if detail is not None:
        data.detail, data._detail_at = _index(detail.toArrow(), [("key", "ascending"), ("kind", "ascending"),
                                                                 ("sort", "ascending")])
    rates = _commit_rates_frame(t, stats, eff)
    if rates is not None:
        data.rates, data._rates_at = _index(rates.toArrow(), [("key", "ascending"), ("topic", "ascending"),
                                                              ("partition", "ascending"), ("t", "ascending")])
    return data
