"""Run tables' suites: one Spark job finds every violation, Great Expectations judges them.

Cost is the design constraint (checks must stay a small fraction of a run): all invariants
of all the tables checked together (one Dagster check step) are unioned into ONE Spark
query, which returns per (table, invariant, cluster) the number of violations and a
bounded sample of their keys. On healthy tables that is an empty result. Great Expectations then validates the collected violations frame with its
pandas engine: GE's Spark engine launches several Spark jobs per expectation (measured:
~7 s for 3 expectations on a cached 2-row frame on a loaded 2-core machine), which would
cost more than the tables' own jobs; the collected frame is small by construction.

The violation *counts* come from Spark (exact); GE's `unexpected_index_list` holds the
sample of failing keys (at most `sample` per invariant and cluster).
"""
from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import reduce

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pipelines.spark import local_frame

from . import incremental
from .incremental import Checked, TableScan
from .model import ERROR, WARN, Context, Suite, fused_row_violations

SAMPLE = 20


@dataclass
class ExpectationOutcome:
    expectation: str
    description: str
    severity: str
    success: bool
    violations: int                              # exact, from Spark (0 when not evaluated)
    failing_keys: list[dict] = field(default_factory=list)  # sample, from the GE result
    by_cluster: dict[str | None, int] = field(default_factory=dict)  # None: no cluster (a schema problem)
    evaluated: bool = True
    note: str | None = None                      # why it was not evaluated, or a schema problem

    @property
    def observed(self) -> str:
        if not self.evaluated:
            return f"not evaluated: {self.note}"
        return f"{self.violations} violation(s)" + (f" ({self.note})" if self.note else "")


@dataclass
class SuiteOutcome:
    suite: str
    table: str
    layer: str
    exists: bool
    expectations: list[ExpectationOutcome]
    run_time: datetime
    seconds: float
    clusters: list[str] = field(default_factory=list)
    ge_result: object | None = None
    checked: str = incremental.FULL              # how: full, incremental since vN, unchanged since vN, empty
    positions: dict[str, int] = field(default_factory=dict)  # positions recording this check

    @property
    def success(self) -> bool:
        return all(e.success for e in self.expectations)

    @property
    def severity(self) -> str | None:
        """ERROR if a blocking expectation failed, WARN if only warnings did, None on success."""
        failed = [e.severity for e in self.expectations if not e.success]
        if not failed:
            return None
        return ERROR if ERROR in failed else WARN

    def failed(self) -> list[ExpectationOutcome]:
        return [e for e in self.expectations if not e.success]


class TableCache:
    """Lake tables read once per run (Spark plans, not data: a read is a file listing)."""

    def __init__(self, lake):
        self.lake = lake
        self._dfs: dict[str, DataFrame | None] = {}

    def __call__(self, name: str) -> DataFrame | None:
        if name not in self._dfs:
            self._dfs[name] = self.lake.read(name) if self.lake.exists(name) else None
        return self._dfs[name]


def _clusters(lake, name: str) -> list[str]:
    """Clusters present in the table, from the Delta log's partition values (no scan)."""
    import pyarrow as pa

    actions = pa.table(lake.table(name).get_add_actions(flatten=True))
    col = "partition.cluster"
    if col not in actions.column_names:
        return []
    return sorted({c for c in actions.column(col).to_pylist() if c is not None})


def violation_plan(df: DataFrame | None, suite: Suite, ctx: Context,
                   scan: TableScan | None = None) -> tuple[DataFrame | None, dict[str, str]]:
    """The lazy union of every invariant's violations of one table: (invariant, cluster, key, detail).
    With `scan`, each invariant looks only at the rows it says can have changed (see
    quality.incremental); without, at the whole `df`.

    Returns (plan or None, notes); notes maps an invariant that could not be evaluated to the reason.
    """
    if scan is not None:
        have = set(scan.columns)
    elif df is not None:
        have = set(df.columns)
    else:
        raise ValueError("violation_plan needs the table's DataFrame or a scan of it")
    parts, notes, rowwise = [], {}, []
    row_frame: DataFrame | None = None
    for inv in suite.invariants:
        missing = [c for c in (*inv.columns, "cluster") if c not in have]
        if missing:
            # The table does not have the columns the claim is about: that is a failure of
            # the table's contract, reported as a violation keyed by the missing columns.
            if ctx.lake is not None:
                spark = ctx.lake.spark
            else:
                assert df is not None  # a scan comes with its lake
                spark = df.sparkSession
            cols = sorted(set(missing))
            row = (None, json.dumps({"missing_columns": cols}), "table lacks column(s) " + ", ".join(cols))
            parts.append(local_frame(spark, [row], "cluster string, key string, detail string")
                         .withColumn("invariant", F.lit(inv.name)))
            continue
        frame = df if scan is None else scan.frame(inv)
        if frame is None:
            # Nothing it looks at changed (or the table is empty): no new violation is
            # possible. An invariant whose input is absent stays "not evaluated".
            if inv.needs and scan is not None and any(scan.reads.get(t, -1) < 0 for t in inv.reads):
                notes[inv.name] = f"needs {inv.needs}"
            continue
        if inv.row is not None:
            rowwise.append(inv)
            row_frame = frame  # row-level invariants read no other table: one frame for all
            continue
        v = inv.violations(frame, ctx)
        if v is None:
            notes[inv.name] = f"needs {inv.needs}" if inv.needs else "not applicable"
            continue
        parts.append(v.withColumn("invariant", F.lit(inv.name)))
    if rowwise and row_frame is not None:  # (a row-level invariant was given a frame)
        parts.append(fused_row_violations(row_frame, rowwise))
    if not parts:
        return None, notes
    return reduce(DataFrame.unionByName, parts).select("invariant", "cluster", "key", "detail"), notes


def collect_violations(plans: Mapping[str, DataFrame], sample: int = SAMPLE) -> dict[str, list[dict]]:
    """ONE Spark job for the plans of several tables: per (table, invariant, cluster) the exact
    violation count and a sample of (key, detail). Returns table → rows
    {invariant, cluster, n, sample: [(key, detail)]}."""
    out: dict[str, list[dict]] = {t: [] for t in plans}
    if not plans:
        return out
    u = reduce(DataFrame.unionByName, [p.withColumn("table", F.lit(t)) for t, p in plans.items()])
    # One shuffle on (table, invariant, cluster) serves the de-duplication (a key reported
    # twice, e.g. by several rows of one member, counts once), the sample and the counts.
    w = Window.partitionBy("table", "invariant", "cluster").orderBy("key", "detail")
    u = u.withColumn("_prev", F.lag("key").over(w)).where(F.col("_prev").isNull() | (F.col("_prev") != F.col("key")))
    agg = u.withColumn("_rn", F.row_number().over(w)).groupBy("table", "invariant", "cluster").agg(
        F.count(F.lit(1)).alias("n"),
        F.collect_list(F.when(F.col("_rn") <= sample, F.struct("key", "detail"))).alias("sample"),
    )
    for r in agg.collect():
        out[r["table"]].append({"invariant": r["invariant"], "cluster": r["cluster"], "n": int(r["n"]),
                                "sample": [(x["key"], x["detail"]) for x in r["sample"]]})
    return out


def find_violations(df: DataFrame, suite: Suite, ctx: Context, sample: int = SAMPLE):
    """One table's violations (one Spark job): (rows, notes), see `collect_violations`."""
    plan, notes = violation_plan(df, suite, ctx)
    if plan is None:
        return [], notes
    return collect_violations({suite.table: plan}, sample)[suite.table], notes


def violations_frame(suite: Suite, rows: list[dict]) -> pd.DataFrame:
    """The frame GE validates: columns cluster, key and one per invariant (detail or null)."""
    names = [inv.name for inv in suite.invariants]
    records = []
    for r in rows:
        for key, detail in r["sample"]:
            rec = dict.fromkeys(names)
            rec.update(cluster=r["cluster"], key=key)
            rec[r["invariant"]] = detail if detail is not None else "violation"
            records.append(rec)
    cols = ["cluster", "key", *names]
    if not records:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
    return pd.DataFrame.from_records(records, columns=cols).astype(object)


def _failing_keys(ge_result) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in ge_result.results:
        column = r.expectation_config.kwargs.get("column")
        keys = []
        for item in (r.result or {}).get("unexpected_index_list") or []:
            try:
                key = json.loads(item.get("key") or "{}")
            except (TypeError, ValueError):
                key = {"key": item.get("key")}
            keys.append({"cluster": item.get("cluster"), **key, "detail": item.get(column)})
        out[column] = keys
    return out


def _outcome(lake, suite: Suite, gx_context, rows: list[dict], notes: dict[str, str], run_time: datetime,
             seconds: float, scan: TableScan, suite_fp: int) -> SuiteOutcome:
    """GE validation of one table's collected violations, and the outcome per expectation."""
    t0 = time.monotonic()
    ge_result = gx_context.validate(suite, violations_frame(suite, rows), run_time=run_time)
    keys = _failing_keys(ge_result)
    ge_success = {r.expectation_config.kwargs.get("column"): bool(r.success) for r in ge_result.results}
    exps = []
    for inv in suite.invariants:
        mine = [r for r in rows if r["invariant"] == inv.name]
        by_cluster = {r["cluster"]: r["n"] for r in mine}
        schema_note = None
        if any(r["cluster"] is None and '"missing_columns"' in (r["sample"][0][0] if r["sample"] else "") for r in mine):
            schema_note = "schema: " + mine[0]["sample"][0][1]
        exps.append(ExpectationOutcome(
            expectation=inv.name, description=inv.description, severity=inv.severity,
            success=ge_success.get(inv.name, True), violations=sum(by_cluster.values()),
            failing_keys=keys.get(inv.name, []), by_cluster=by_cluster,
            evaluated=inv.name not in notes, note=notes.get(inv.name) or schema_note,
        ))
    out = SuiteOutcome(suite.name, suite.table, suite.layer, True, exps, run_time,
                       seconds + time.monotonic() - t0, clusters=_clusters(lake, suite.table), ge_result=ge_result,
                       checked=scan.describe)
    out.positions = incremental.positions(suite.table, out.success, scan.version, suite_fp, scan.reads)
    return out


def _absent(suite: Suite, run_time: datetime) -> SuiteOutcome:
    exps = [ExpectationOutcome(i.name, i.description, i.severity, True, 0, evaluated=False, note="table absent")
            for i in suite.invariants]
    return SuiteOutcome(suite.name, suite.table, suite.layer, False, exps, run_time, 0.0, checked="absent",
                        positions=incremental.absent_positions(suite.table))


def run_suites(lake, suites: Iterable[Suite], gx_context, params: Mapping[str, float] | None = None,
               sample: int = SAMPLE, timings: dict | None = None, guard=None,
               previous: Mapping[str, Checked] | None = None) -> list[SuiteOutcome]:
    """Validate several tables of `lake` (one check step): ONE Spark job finds the violations of
    all of them, then GE validates each table's. An absent table passes as "absent".
    `previous` (what earlier checks verified, `quality.incremental.load`) lets a table be
    checked only where it changed; without it every table is checked whole.

    Each outcome's `seconds` is its own GE time plus an equal share of the shared Spark job.
    `gx_context` may be a callable returning the context (opened only after the Spark job);
    `guard()`, when given, is entered around the GE work (a lock shared with other processes)."""
    suites = list(suites)
    tables = TableCache(lake)
    ctx = Context(tables, dict(params or {}), lake)
    run_time = datetime.now(timezone.utc)
    t0 = time.monotonic()
    plans, notes, scans, fps = {}, {}, {}, {}
    for s in suites:
        if not lake.exists(s.table):
            continue
        fps[s.table] = incremental.fingerprint(s, ctx.params)
        last = (previous or {}).get(s.table)
        scans[s.table] = scan = incremental.plan_scan(lake, s, fps[s.table], last if previous is not None else None)
        plan, notes[s.table] = violation_plan(None, s, ctx, scan)
        if plan is not None:
            plans[s.table] = plan
    found = collect_violations(plans, sample)
    present = [s for s in suites if s.table in notes]
    spark_s = time.monotonic() - t0
    share = spark_s / max(len(present), 1)
    with guard() if guard is not None else contextlib.nullcontext():
        if callable(gx_context):
            gx_context = gx_context()
        out = [_outcome(lake, s, gx_context, found.get(s.table, []), notes[s.table], run_time, share,
                        scans[s.table], fps[s.table])
               if s.table in notes else _absent(s, run_time) for s in suites]
    if timings is not None:
        timings.update(spark=spark_s, ge=time.monotonic() - t0 - spark_s)
    return out


def run_suite(lake, suite: Suite, gx_context, params: Mapping[str, float] | None = None,
              sample: int = SAMPLE) -> SuiteOutcome:
    """Validate one table of `lake` with its suite."""
    return run_suites(lake, [suite], gx_context, params, sample)[0]
