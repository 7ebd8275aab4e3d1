"""Lake maintenance: OPTIMIZE and VACUUM every table with delta-spark, prune the positions ledger.

Every run appends a few small files to each table it touches (one per Delta partition), and
every replace leaves the files it superseded behind for time travel. Over weeks a table is
thousands of small files, each a footer to read: OPTIMIZE compacts them (a rewrite that
changes no row, which the incremental steps recognise and skip, see txlog.data_changes),
VACUUM deletes the files no version within the retention needs. The ledger of positions
(positions.py) keeps every run ever recorded; runs no table names any more are dropped once
they are older than the retention.

The caller holds the lake's writer lock: VACUUM is safe beside readers within the retention,
but a run starting between a ledger record and its commit must not see its run pruned (the
retention protects it too; the lock makes it certain).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from pipelines.lake.lake import Lake

DEFAULT_RETAIN_HOURS = 168.0  # Delta's own default (delta.deletedFileRetentionDuration)


@dataclass
class TableMaintenance:
    table: str
    files_before: int
    files_after: int
    files_vacuumed: int
    seconds: float


def maintain(lake: Lake, retain_hours: float | None = None, tables: list[str] | None = None,
             dry_run: bool = False, say=lambda text: None) -> tuple[list[TableMaintenance], int]:
    """OPTIMIZE then VACUUM each table (default every table of the lake), then prune the
    ledger. `retain_hours` None: each table's own retention (7 days unless set).
    `dry_run`: compact nothing, delete nothing; report what VACUUM would delete.
    Returns each table's figures and the ledger runs dropped."""
    done = []
    for name in tables or lake.tables():
        t0 = time.perf_counter()
        before = len(lake.table(name).file_uris())
        if not dry_run:
            lake.optimize(name)
        vacuumed = lake.vacuum(name, retain_hours, dry_run=dry_run)
        after = len(lake.table(name).file_uris())
        done.append(TableMaintenance(name, before, after, len(vacuumed), round(time.perf_counter() - t0, 1)))
        say(f"{name}: {before} → {after} files, {len(vacuumed)} {'to vacuum' if dry_run else 'vacuumed'}")
    pruned = 0
    if not dry_run and tables is None:
        hours = DEFAULT_RETAIN_HOURS if retain_hours is None else retain_hours
        writers = lake.ledger.writers()
        keep = set()
        for name in lake.tables():
            dt = lake.table(name)
            keep |= {(w, run) for w in writers if (run := dt.transaction_version(w)) is not None}
        cutoff = time.time_ns() // 1000 - int(hours * 3600e6)
        pruned = lake.ledger.prune(keep, cutoff, retain_hours)
        say(f"positions ledger: {pruned} runs no table names dropped")
    return done, pruned
