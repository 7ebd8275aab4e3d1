"""Materialize every asset and run its quality checks in this process (what `rebalance-audit
run` and `demo` do).

No Dagster instance, daemon or webserver is needed: one job of every asset (what
`dagster.materialize` builds, with a logger of the steps for the command line) runs the assets
and the asset checks (`ALL_CHECKS`, quality/) with the in-process executor on an ephemeral
instance, so one SparkSession serves every asset and every check. The outcome is read back
from the materialization and check-evaluation events.

A failed *blocking* check (severity ERROR: the table is wrong) fails its check step, and
Dagster then does not materialize the assets downstream of that table; that is reported
in the outcome (`blocked`, `not_materialized`), not raised: the caller prints the checks
and exits non-zero. Any other step failure raises `MaterializeError`.
"""
from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Callable, Mapping, Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

from dagster import (AssetCheckSeverity, DagsterEventType, DagsterInstance, Definitions, LoggerDefinition,
                     colored_console_logger, define_asset_job, logger)

from assets.definitions import ALL_ASSETS, ALL_CHECKS


def dagster_instance() -> DagsterInstance:
    """The instance of `DAGSTER_HOME` when it is set (`dagster dev` and the daemon show its
    runs), else an ephemeral one.

    Dagster creates the SQLite storages of a new `DAGSTER_HOME` (runs, event log, schedules)
    as it opens the instance, with no lock: two processes starting at once on a new home both create the
    schema, and one dies in alembic ("more than one head"). So the instance is opened under
    an exclusive lock on a file in the home."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        return DagsterInstance.ephemeral()
    if not Path(home).is_dir():
        return DagsterInstance.get()  # Dagster's own error, naming the setting
    lock = Path(home) / ".rebalance-audit-instance.lock"
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        return DagsterInstance.get()  # makes every storage's schema


@dataclass
class TableOutcome:
    asset: str
    rows_written: int | None
    rows_total: int | None
    delta_version: int | None
    uri: str | None
    columns: list[str] | None = None  # as Dagster's UI lists them (dagster/column_schema)


@dataclass
class CheckOutcome:
    asset: str
    check: str
    passed: bool
    severity: str          # "ERROR" (blocking: the data is wrong) or "WARN"
    violations: int        # offending keys over the failed expectations (exact counts)
    failed: dict[str, int]  # failed expectation -> its violations
    seconds: float | None
    suite: str | None = None      # the Great Expectations suite that ran
    data_docs: str | None = None  # file:// link to the rendered validation results
    checked: str | None = None    # full, incremental since version N, unchanged since version N, empty

    @property
    def name(self) -> str:
        return f"{self.asset}:{self.check}"

    @property
    def blocking_failure(self) -> bool:
        return not self.passed and self.severity == "ERROR"


@dataclass
class RunOutcome:
    """What one in-process run did: the tables it materialized and the checks it ran.
    Iterating it gives the tables (the figures `summary_table` prints)."""

    tables: list[TableOutcome]
    checks: list[CheckOutcome]
    not_materialized: list[str]  # assets skipped because a blocking check upstream failed
    step_seconds: dict[str, float]  # wall time of each step that ran (asset and check steps)
    check_steps: frozenset[str] = frozenset()
    # The Spark JVM's start, taken out of the step that happened to pay it (the first one to
    # need Spark): a cost of the run, not of that step.
    startup_seconds: float = 0.0
    report: str | None = None  # the SRE report's index.html, when the run wrote or kept it

    @property
    def check_seconds(self) -> float:
        return sum(v for k, v in self.step_seconds.items() if k in self.check_steps)

    @property
    def asset_seconds(self) -> float:
        return sum(v for k, v in self.step_seconds.items() if k not in self.check_steps)

    def __iter__(self):
        return iter(self.tables)

    def __len__(self) -> int:
        return len(self.tables)

    @property
    def blocked(self) -> list[CheckOutcome]:
        return [c for c in self.checks if c.blocking_failure]

    @property
    def warnings(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.passed and not c.blocking_failure]

    @property
    def passed(self) -> list[CheckOutcome]:
        return [c for c in self.checks if c.passed]


class MaterializeError(RuntimeError):
    """An asset failed; the message names it and gives the underlying error."""


def _columns(meta) -> list[str] | None:
    schema = meta.get("dagster/column_schema")
    return None if schema is None else [c.name for c in schema.schema.columns]


def _value(meta: Mapping, key: str):
    v = meta.get(key)
    return None if v is None else getattr(v, "value", v)


def _step_lines(say: Callable[[str], None]) -> LoggerDefinition:
    """A Dagster logger that says when each step starts and how long it took: a run takes
    minutes, and Dagster's own console logger says far more than that or nothing."""

    class _Steps(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.started: dict[str, float] = {}

        def emit(self, record: logging.LogRecord) -> None:
            event = getattr(record, "dagster_event", None)
            if event is None or event.step_key is None:
                return
            if event.event_type == DagsterEventType.STEP_START:
                self.started[event.step_key] = record.created
                say(f"{event.step_key}: started")
            elif event.event_type in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
                took = record.created - self.started.pop(event.step_key, record.created)
                ended = "done" if event.event_type == DagsterEventType.STEP_SUCCESS else "failed"
                say(f"{event.step_key}: {ended} in {took:.1f} s")

    @logger(config_schema=None, description="one line per step started and ended")
    def steps(_init_context) -> logging.Logger:
        out = logging.Logger("rebalance-audit.steps", logging.DEBUG)
        out.addHandler(_Steps())
        return out

    return steps


RUN_JOB = "__rebalance_audit_run"


def materialize_all(resources: Mapping[str, object], ingest: Mapping | None = None,
                    log_level: str = "WARNING", checks: bool = True,
                    progress: Callable[[str], None] | None = None) -> RunOutcome:
    """Run every asset, and with `checks` every asset check, with `resources`; `ingest` is
    the bronze asset's run config (segment_paths, log_paths, skip_kafka); `progress`, when
    given, is called with a line as each step starts and ends. Returns the tables in run
    order and the checks' results."""
    run_config: dict = {"loggers": {"console": {"config": {"log_level": log_level}}}}
    loggers: dict[str, LoggerDefinition] = {"console": colored_console_logger}
    if progress is not None:
        loggers["steps"] = _step_lines(progress)
        run_config["loggers"]["steps"] = {}
    if ingest:
        run_config["ops"] = {"bronze_ingest": {"config": dict(ingest)}}
    # What `dagster.materialize` builds (one job of every asset and check), with the loggers.
    defs = Definitions(assets=[*ALL_ASSETS, *ALL_CHECKS] if checks else ALL_ASSETS,
                       jobs=[define_asset_job(RUN_JOB)], resources=dict(resources), loggers=loggers)
    # The instance `dagster dev` uses when DAGSTER_HOME is set, so the UI shows this run's
    # materializations and checks beside its own runs'; else a throwaway one (what
    # `materialize` would make). Either way the event log, with its timestamps, is read back
    # for the steps' wall times.
    instance = dagster_instance()
    result = defs.resolve_job_def(RUN_JOB).execute_in_process(run_config=run_config, instance=instance,
                                                             raise_on_error=False)
    check_steps = {c.node_def.name for c in ALL_CHECKS} if checks else set()
    if not result.success:
        failure = _failure(result, ignore=check_steps)
        if failure is not None:
            raise MaterializeError(failure)
    tables = []
    report = None
    for event in result.all_events:
        if event.event_type != DagsterEventType.ASSET_MATERIALIZATION:
            continue
        m = event.step_materialization_data.materialization
        meta = m.metadata
        report = _value(meta, "report_path") or report
        uri = _value(meta, "table_uri")
        tables.append(TableOutcome(
            asset=m.asset_key.to_user_string(),
            rows_written=_value(meta, "rows_written"),
            rows_total=_value(meta, "rows_total"),
            delta_version=_value(meta, "delta_version"),
            uri=None if uri is None else str(uri),
            columns=_columns(meta),
        ))
    evaluations = [_check_outcome(e) for e in result.get_asset_check_evaluations()] if checks else []
    done = {t.asset for t in tables}
    expected = [k.to_user_string() for a in ALL_ASSETS for k in a.keys]
    missing = [a for a in expected if a not in done]
    if missing and not any(c.blocking_failure for c in evaluations):
        # Not materialized and no blocking check to explain it: report it, never hide it.
        raise MaterializeError(f"assets not materialized: {', '.join(missing)}")
    steps, startup = _step_seconds(instance, result.run_id)
    return RunOutcome(tables, evaluations, missing, steps, frozenset(check_steps), startup,
                      None if report is None else str(report))


def _step_seconds(instance, run_id: str) -> tuple[dict[str, float], float]:
    """Each step's wall time, from its start to its success or failure event, and the
    seconds of the Spark start-up taken out of the step during which it happened."""
    from pipelines.spark import startup

    start, out, spans = {}, {}, {}
    for entry in instance.all_logs(run_id):
        e = entry.dagster_event
        if e is None:
            continue
        if e.event_type == DagsterEventType.STEP_START:
            start[e.step_key] = entry.timestamp
        elif e.event_type in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE) and e.step_key in start:
            out[e.step_key] = entry.timestamp - start[e.step_key]
            spans[e.step_key] = (start[e.step_key], entry.timestamp)
    jvm = startup()
    if jvm is not None:
        at, seconds = jvm
        for step, (t0, t1) in spans.items():
            if t0 <= at <= t1:
                out[step] = max(0.0, out[step] - seconds)
                return out, seconds
    return out, 0.0


def _check_outcome(e) -> CheckOutcome:
    meta = e.metadata or {}
    failed = {k[: -len(".violations")]: int(_value(meta, k)) for k in meta if k.endswith(".violations")}
    seconds = _value(meta, "check_seconds")
    return CheckOutcome(
        asset=e.asset_key.to_user_string(), check=e.check_name, passed=bool(e.passed),
        severity="ERROR" if e.severity == AssetCheckSeverity.ERROR else "WARN",
        violations=sum(failed.values()), failed=failed, seconds=None if seconds is None else float(seconds),
        suite=_text(meta, "suite"), data_docs=_text(meta, "data_docs"), checked=_text(meta, "checked"),
    )


def _text(meta: Mapping, key: str) -> str | None:
    v = _value(meta, key)
    return None if v is None else str(v)


def check_summary(outcome: RunOutcome) -> list[str]:
    """One line per failed check (name, severity, offending keys, the failed expectations),
    then the total: "N checks passed, M warnings, K failed"."""
    lines = []
    for c in sorted(outcome.checks, key=lambda c: (c.passed, c.severity != "ERROR", c.name)):
        if c.passed:
            continue
        what = ", ".join(f"{name} ({n:,})" for name, n in sorted(c.failed.items())) or "see the check's metadata"
        lines.append(f"check {c.name} {'FAILED' if c.blocking_failure else 'WARNING'} [{c.severity}]: "
                     f"{c.violations:,} offending key(s): {what}")
    lines.append(f"{len(outcome.passed)} checks passed, {len(outcome.warnings)} warnings, {len(outcome.blocked)} failed "
                 f"(checks {outcome.check_seconds:.1f} s, assets {outcome.asset_seconds:.1f} s, "
                 f"Spark start-up {outcome.startup_seconds:.1f} s)")
    return lines


def step_timings(outcome: RunOutcome) -> str:
    """Where the run's wall time went: one line per step, slowest first, checks marked."""
    lines = ["step seconds:"]
    for step, secs in sorted(outcome.step_seconds.items(), key=lambda kv: -kv[1]):
        kind = "check" if step in outcome.check_steps else "asset"
        lines.append(f"  {secs:8.1f}  {kind:<5}  {step}")
    if outcome.startup_seconds:
        lines.append(f"  {outcome.startup_seconds:8.1f}  start  Spark (JVM) start-up, taken out of the step that paid it")
    return "\n".join(lines)


def blocked_message(outcome: RunOutcome) -> str | None:
    """The one-line error of a run whose blocking checks failed (None if none did)."""
    if not outcome.blocked:
        return None
    names = ", ".join(c.name for c in outcome.blocked)
    skipped = f"; not materialized downstream: {', '.join(outcome.not_materialized)}" if outcome.not_materialized else ""
    return (f"{len(outcome.blocked)} blocking quality check(s) failed: {names} (the data of these tables is wrong; "
            f"see quality_results and the data docs){skipped}")


def _failure(result, ignore: AbstractSet[str] = frozenset()) -> str | None:
    """The first failed step's one-line error; a check step that failed only because a
    blocking check did (DagsterAssetCheckFailedError) is not an error here (None)."""
    for event in result.all_events:
        if event.event_type == DagsterEventType.STEP_FAILURE:
            err = event.event_specific_data.error
            # The user's exception is the innermost cause; Dagster wraps it once or twice.
            while err.cause is not None:
                err = err.cause
            if event.step_key in ignore and err.cls_name == "DagsterAssetCheckFailedError":
                continue
            msg = err.message.strip().splitlines()[-1] if err.message.strip() else err.cls_name
            kind = "check" if event.step_key in ignore else "asset"
            return f"{kind} step {event.step_key} failed: {msg}"
    if any(e.event_type == DagsterEventType.STEP_FAILURE for e in result.all_events):
        return None
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
