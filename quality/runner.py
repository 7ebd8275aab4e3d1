"""Check lake tables: run their suites, keep the results, render the data docs."""
from __future__ import annotations

import importlib
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .engine import SuiteOutcome, run_suites
from .results import append_results
from .suites import suite_for

QUALITY_DIR_ENV = "REBALANCE_AUDIT_QUALITY_DIR"


def quality_dir(lake) -> Path:
    """Where the GE project and data docs live: `<lake>/_quality` for a local lake (the
    leading underscore keeps it out of the lake's table names), else $REBALANCE_AUDIT_QUALITY_DIR
    or ./_quality (data docs are local HTML files)."""
    if os.environ.get(QUALITY_DIR_ENV):
        return Path(os.environ[QUALITY_DIR_ENV])
    if lake.is_local:
        root = lake.root[len("file://"):] if lake.root.startswith("file://") else lake.root
        return Path(root) / "_quality"
    return Path("_quality")


def _gx_module_meanwhile() -> Callable[[], ModuleType]:
    """`quality.gx`, imported on a thread: Great Expectations takes seconds to import (4.9 s
    of a run's profile on 2 cores), and the check step that first needs it spends longer
    than that waiting on the JVM for its violations job, the GIL released. Returns the call
    that waits for the module (raising what its import raised); once imported, at once."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-great-expectations")
    future = pool.submit(importlib.import_module, f"{__package__}.gx")
    pool.shutdown(wait=False)
    return future.result


@dataclass
class QualityReport:
    outcomes: list[SuiteOutcome]
    run_id: str
    data_docs: str | None
    results_rows: int
    seconds: float
    # Where the time went: "spark" (the violations job), "ge" (validations), "docs", "results".
    timings: dict[str, float] | None = None

    def by_table(self) -> dict[str, SuiteOutcome]:
        return {o.table: o for o in self.outcomes}


def check_tables(lake, tables: Iterable[str], params: Mapping[str, float] | None = None,
                 run_id: str | None = None, folder: str | os.PathLike | None = None,
                 record: bool = True, docs: bool = True, incremental: bool = True) -> QualityReport:
    """Validate `tables` of `lake`; append to quality_results (`record`) and render data docs (`docs`).

    With `incremental` (and `record`), a table is checked only where it changed since its last
    passing check (quality.incremental); `incremental=False` checks every table whole."""
    from . import incremental as inc
    from .results import TABLE

    gx_module = _gx_module_meanwhile()
    t0 = time.monotonic()
    folder = folder or quality_dir(lake)
    timings: dict[str, float] = {}
    # The GE context is opened after the Spark job and under the folder's lock: check steps
    # of other processes may share the folder (see quality.gx.folder_lock).
    # The positions are only trusted when this run records its own (else the next run would
    # start from a check that left no trace).
    previous = inc.load(lake, TABLE) if incremental and record else None
    outcomes = run_suites(lake, [suite_for(t) for t in tables], lambda: gx_module().QualityContext.at(folder),
                          params, timings=timings, guard=lambda: gx_module().folder_lock(folder), previous=previous)
    run_id = run_id or uuid.uuid4().hex
    validated = [o.ge_result for o in outcomes if o.ge_result is not None]
    t1 = time.monotonic()
    with gx_module().folder_lock(folder):
        gx_context = gx_module().QualityContext.at(folder)
        url = gx_context.build_docs(validated) if docs and validated else (gx_context.index_url if docs else None)
    t2 = time.monotonic()
    rows = append_results(lake, outcomes, run_id, url) if record else 0
    timings.update(docs=t2 - t1, results=time.monotonic() - t2)
    return QualityReport(outcomes, run_id, url, rows, time.monotonic() - t0, timings)


def prune_results(lake, retain_hours: float | None = None, dry_run: bool = False,
                  folder: str | os.PathLike | None = None) -> int:
    """Drop GE's validation results of checks older than the retention (`retain_hours`, else
    the lake's default, 7 days) and their pages in the data docs (`maintain` calls this);
    returns how many went (with `dry_run`, how many would). Every check's outcome stays in the
    lake's `quality_results` table: GE's store only feeds the docs, which otherwise grow by a
    result per table and run, and cost more to render with every run (quality.gx.INDEX_RESULTS)."""
    from datetime import datetime, timedelta, timezone

    from pipelines.lake.maintenance import DEFAULT_RETAIN_HOURS

    from .gx import QualityContext, folder_lock

    folder = Path(folder or quality_dir(lake))
    if not (folder / "gx").is_dir():
        return 0
    hours = DEFAULT_RETAIN_HOURS if retain_hours is None else retain_hours
    before = datetime.now(timezone.utc) - timedelta(hours=hours)
    with folder_lock(folder):
        return QualityContext.at(folder).prune(before, dry_run)
