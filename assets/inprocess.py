"""Materialize every asset in this process (what `rebalance-audit run` and `demo` do).

No Dagster instance, daemon or webserver is needed: `dagster.materialize` runs the assets
with the in-process executor on an ephemeral instance, so one SparkSession serves every
asset. The outcome is read back from the materialization events' metadata.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dagster import DagsterEventType, materialize

from assets.definitions import ALL_ASSETS


@dataclass
class TableOutcome:
    asset: str
    rows_written: int | None
    rows_total: int | None
    delta_version: int | None
    uri: str | None


class MaterializeError(RuntimeError):
    """An asset failed; the message names it and gives the underlying error."""


def _value(meta: Mapping, key: str):
    v = meta.get(key)
    return None if v is None else getattr(v, "value", v)


def materialize_all(resources: Mapping[str, object], ingest: Mapping | None = None,
                    log_level: str = "WARNING") -> list[TableOutcome]:
    """Run every asset with `resources`; `ingest` is the bronze asset's run config
    (segment_paths, log_paths, skip_kafka). Returns one outcome per table, in run order."""
    run_config: dict = {"loggers": {"console": {"config": {"log_level": log_level}}}}
    if ingest:
        run_config["ops"] = {"bronze_ingest": {"config": dict(ingest)}}
    result = materialize(ALL_ASSETS, resources=dict(resources), run_config=run_config, raise_on_error=False)
    if not result.success:
        raise MaterializeError(_failure(result))
    outcomes = []
    for event in result.all_events:
        if event.event_type != DagsterEventType.ASSET_MATERIALIZATION:
            continue
        m = event.event_specific_data.materialization
        meta = m.metadata
        uri = _value(meta, "table_uri")
        outcomes.append(TableOutcome(
            asset=m.asset_key.to_user_string(),
            rows_written=_value(meta, "rows_written"),
            rows_total=_value(meta, "rows_total"),
            delta_version=_value(meta, "delta_version"),
            uri=None if uri is None else str(uri),
        ))
    return outcomes


def _failure(result) -> str:
    for event in result.all_events:
        if event.event_type == DagsterEventType.STEP_FAILURE:
            err = event.event_specific_data.error
            # The user's exception is the innermost cause; Dagster wraps it once or twice.
            while err.cause is not None:
                err = err.cause
            msg = err.message.strip().splitlines()[-1] if err.message.strip() else err.cls_name
            return f"asset step {event.step_key} failed: {msg}"
    return "materialization failed"


def summary_table(outcomes: list[TableOutcome]) -> str:
    """Plain-text table: asset, rows written by this run, rows in the table, Delta version."""
    head = ("asset", "new rows", "rows", "version")
    rows = [(o.asset, _fmt(o.rows_written), _fmt(o.rows_total), _fmt(o.delta_version)) for o in outcomes]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in [head, *rows]]
    return "\n".join(lines)


def _fmt(v) -> str:
    return "-" if v is None else f"{v:,}" if isinstance(v, int) else str(v)
