"""`quality_results`: the history of every check, one row per (run, table, expectation, cluster).

Appended (never rewritten) so an SRE can see when a table went bad and since when it is
good again: `rebalance-audit sql "SELECT * FROM quality_results WHERE NOT success"`. A check
that passes on exactly what its last passing check verified writes no row: the rows of a
table's check are those of each change of its table, its suite or what it reads.
A table-level row (cluster null) is written for an expectation that was not evaluated or
whose table has no cluster partitions; otherwise one row per cluster the table holds.
"""
from __future__ import annotations

import json

import pyarrow as pa

from .engine import SuiteOutcome
from pipelines.lake import Positions

from .incremental import WRITER

TABLE = "quality_results"
TS = pa.timestamp("us", tz="UTC")

SCHEMA = pa.schema([
    pa.field("cluster", pa.string()),
    pa.field("run_id", pa.string()),
    pa.field("run_ts", TS),
    pa.field("suite", pa.string()),
    pa.field("table_name", pa.string()),
    pa.field("layer", pa.string()),
    pa.field("expectation", pa.string()),
    pa.field("expectation_type", pa.string()),
    pa.field("description", pa.string()),
    pa.field("severity", pa.string()),
    pa.field("evaluated", pa.bool_()),
    pa.field("success", pa.bool_()),
    pa.field("violations", pa.int64()),
    pa.field("observed_value", pa.string()),
    pa.field("failing_keys_sample", pa.string()),  # JSON list of key objects (with their detail)
    pa.field("check_seconds", pa.float64()),       # the whole suite's time, on every row of it
    pa.field("data_docs", pa.string()),
    # How the table was checked: full, incremental since version N, unchanged since version N, empty.
    pa.field("checked", pa.string()),
])


def result_rows(outcomes: list[SuiteOutcome], run_id: str, data_docs: str | None) -> list[dict]:
    rows = []
    for o in outcomes:
        for e in o.expectations:
            clusters = o.clusters if (e.evaluated and o.clusters) else [None]
            # Violations that belong to no cluster (a schema problem) go on every row.
            shared = e.by_cluster.get(None, 0)
            for cluster in clusters:
                n = e.violations if cluster is None else e.by_cluster.get(cluster, 0) + shared
                keys = [k for k in e.failing_keys if cluster is None or k.get("cluster") in (cluster, None)]
                rows.append({
                    "cluster": cluster, "run_id": run_id, "run_ts": o.run_time, "suite": o.suite,
                    "table_name": o.table, "layer": o.layer, "expectation": e.expectation,
                    "expectation_type": "expect_column_values_to_be_null", "description": e.description,
                    "severity": e.severity, "evaluated": e.evaluated,
                    "success": (n == 0) if e.evaluated else True,
                    "violations": n if e.evaluated else None,
                    "observed_value": e.observed if cluster is None else (
                        f"{n} violation(s)" + (f" ({e.note})" if e.note else "")),
                    "failing_keys_sample": json.dumps(keys, default=str) if keys else None,
                    "check_seconds": o.seconds, "data_docs": data_docs, "checked": o.checked,
                })
    return rows


def _said_already(outcome: SuiteOutcome, recorded: dict[str, int]) -> bool:
    """A passing check of a table at the versions its last passing check recorded (table,
    suite and every table it reads): its rows would only repeat that check's. A schedule
    on a quiet cluster would otherwise grow the history by a full set of rows each time."""
    return outcome.success and bool(outcome.positions) and all(
        recorded.get(k) == v for k, v in outcome.positions.items())


def append_results(lake, outcomes: list[SuiteOutcome], run_id: str, data_docs: str | None) -> int:
    """Append the outcomes to the lake's quality_results table, with what each check verified
    as positions in the same commit (quality.incremental); returns the rows written.
    Checks that say nothing new (`_said_already`) append nothing: a run with nothing new
    leaves the table at its version."""
    lake.create(TABLE, SCHEMA, ["cluster"], description="one quality expectation's result per run, table and cluster")
    recorded = lake.positions(TABLE, WRITER)
    outcomes = [o for o in outcomes if not _said_already(o, recorded)]
    rows = result_rows(outcomes, run_id, data_docs)
    positions = {k: v for o in outcomes for k, v in o.positions.items()}
    if rows or positions:
        # evolve: a lake written before the `checked` column gains it (older rows read null).
        lake.append(TABLE, pa.Table.from_pylist(rows, schema=SCHEMA), positions=Positions(WRITER, positions, partial=True) if positions else None,
                    evolve=True)
    return len(rows)
