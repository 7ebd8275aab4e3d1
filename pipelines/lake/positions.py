"""Positions: what a table has consumed of its inputs, committed together with its rows.

A writer that reads inputs incrementally (bronze from Kafka offsets, silver from bronze
versions, gold and what-if from silver versions, quality from every table) keeps, per
table it writes, a map {key: value} of how far it has read. The map must move in the
same atomic commit as the rows, or a crash between the two loses or doubles rows.

Delta's way to tie a position to a commit is a transaction identifier (`txn`: app id,
version), and delta-spark writes exactly one per commit (its idempotent writes,
`txnAppId`/`txnVersion`); a writer tracks several inputs. So, as Structured Streaming does
with its offsets log beside a Delta sink:

1. the writer's positions are recorded as run N in the ledger (`_positions`, a small
   Delta table under the lake root) first;
2. the table's commit then carries `txn(app id = writer, version = N)`: delta-spark's
   idempotent-write options on the Spark side, delta-rs's commit properties on the Arrow
   side (bronze ingestion, which starts no JVM).

A crash between 1 and 2 leaves run N named by no table: the table's positions stay those
of its last commit and the work is done again. After 2, run N is in both. Run numbers
grow per writer (above the table's own last run, so delta-spark never skips the write as
already done), and a `txn` lives in every checkpoint of the table, so a position outlasts
any log clean-up.

What moved in a writer's inputs since its positions is decided by one rule for every
incremental stage (silver, gold, what-if, quality, the report): `changes`, from the Delta
logs only (no Spark job).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import DeltaTable

from pipelines.lake.native_stderr import write_deltalake

LEDGER = "_positions"
SCHEMA = pa.schema([
    pa.field("writer", pa.string()),
    pa.field("run", pa.int64()),
    pa.field("key", pa.string()),
    pa.field("value", pa.int64()),
    pa.field("recorded_at", pa.timestamp("us", tz="UTC")),
])
# Every record is one small file; past this many the ledger is compacted (a lookup reads
# every file's footer).
COMPACT_AFTER_FILES = 64


@dataclass(frozen=True)
class Positions:
    """The positions a commit moves: `writer` (one per job, e.g. "gold" or "kafka:prod";
    a table keeps each writer's positions apart) and its {key: value} map."""

    writer: str
    values: Mapping[str, int] = field(default_factory=dict)
    # True: `values` updates the writer's last positions on the table (keys not named keep
    # theirs), as a Kafka read that moved some partitions; False: `values` is the whole map.
    partial: bool = False


class PositionsLost(RuntimeError):
    """A table names a run the ledger does not hold: its positions cannot be known."""


class Ledger:
    """The `_positions` table of one lake (delta-rs: recorded before any JVM starts)."""

    def __init__(self, root: str, storage_options: Mapping[str, str] | None):
        self.uri = f"{root}/{LEDGER}"
        self.storage_options = dict(storage_options) if storage_options else None
        self._last: dict[str, int] = {}
        # Tables written from several threads at once (pipelines.spark.write_concurrently)
        # record their runs here: one at a time, so that each gets a number of its own.
        self._recording = threading.Lock()

    def _table(self) -> DeltaTable:
        if not DeltaTable.is_deltatable(self.uri, storage_options=self.storage_options):
            DeltaTable.create(self.uri, schema=SCHEMA, mode="ignore", name=LEDGER,
                              description="rebalance-audit: positions of each writer's runs (see pipelines/lake/positions.py)",
                              storage_options=self.storage_options)
        return DeltaTable(self.uri, storage_options=self.storage_options)

    def record(self, positions: Positions, after: int | None) -> int:
        """Record `positions` as a new run of its writer, numbered above `after` (the
        table's last run of this writer) and above any earlier run of this process."""
        with self._recording:
            return self._record(positions, after)

    def _record(self, positions: Positions, after: int | None) -> int:
        run = max(time.time_ns() // 1000, (after if after is not None else -1) + 1,
                  self._last.get(positions.writer, -1) + 1)
        now = time.time_ns() // 1000
        # An empty map is still one row (key null): a run must be findable to be trusted.
        keys: list[str | None] = [*sorted(positions.values)] or [None]
        rows = pa.table({
            "writer": pa.array([positions.writer] * len(keys), pa.string()),
            "run": pa.array([run] * len(keys), pa.int64()),
            "key": pa.array(keys, pa.string()),
            "value": pa.array([None if k is None else int(positions.values[k]) for k in keys], pa.int64()),
            "recorded_at": pa.array([now] * len(keys), pa.timestamp("us", tz="UTC")),
        }, schema=SCHEMA)
        dt = self._table()
        write_deltalake(dt, rows, mode="append")
        if len(dt.file_uris()) > COMPACT_AFTER_FILES:
            dt.optimize.compact()
        self._last[positions.writer] = run
        return run

    def writers(self) -> set[str]:
        return set(self._table().to_pyarrow_dataset().to_table(columns=["writer"]).column("writer").to_pylist())

    def prune(self, keep: set[tuple[str, int]], recorded_before_us: int, retain_hours: float | None = None) -> int:
        """Drop the runs that no table names any more (`keep`: every (writer, run) a
        table's latest snapshot carries) and that were recorded before `recorded_before_us`
        (younger ones may belong to a writer between its two steps, or to a table version
        still within time travel), then compact and vacuum the ledger. Returns runs dropped."""
        dt = self._table()
        rows = dt.to_pyarrow_dataset().to_table()
        old = list(zip(rows.column("writer").to_pylist(), rows.column("run").to_pylist(),
                       rows.column("recorded_at").cast(pa.int64()).to_pylist()))
        drop = {(w, r) for w, r, at in old if (w, r) not in keep and at < recorded_before_us}
        if drop:
            mask = pa.array([(w, r) not in drop for w, r, _ in old])
            # An overwrite removes only the files it read: a run recorded meanwhile stays.
            write_deltalake(dt, rows.filter(mask), mode="overwrite")
        dt = self._table()
        dt.optimize.compact()
        dt.vacuum(retention_hours=None if retain_hours is None else int(retain_hours), dry_run=False)
        return len(drop)

    def values(self, writer: str, run: int) -> dict[str, int]:
        """The positions recorded as `writer`'s run `run`."""
        found = self._table().to_pyarrow_dataset().to_table(
            columns=["key", "value"], filter=(ds.field("writer") == writer) & (ds.field("run") == run))
        if not found.num_rows:
            raise PositionsLost(f"the lake's {LEDGER} table holds no run {run} of {writer!r}: "
                                f"positions lost (restore {LEDGER} or rebuild the tables it fed)")
        return {k: v for k, v in zip(found.column("key").to_pylist(), found.column("value").to_pylist()) if k is not None}


def no_rewrites(table: str, removed: Mapping[str, Mapping]) -> bool:
    """The default of `changes`: rows removed from an input cannot be followed."""
    return False


@dataclass
class Changes:
    """A writer's inputs between the versions it consumed (`since`) and `now`: the data files
    added and removed in each input that gained or lost rows (`files`, as
    `Lake.file_changes` gives them); `rebuild` says why an increment cannot follow ("": it
    can). Versions that moved by compactions or commits of positions alone add no entry."""

    since: dict[str, int]
    now: dict[str, int]
    files: dict[str, tuple[dict, dict]] = field(default_factory=dict)
    rebuild: str = ""

    def rebuilding(self, reason: str) -> Changes:
        self.rebuild, self.files = reason, {}
        return self

    @property
    def nothing(self) -> bool:
        """No row came or went in any input (an increment would do nothing)."""
        return not self.rebuild and not self.files


def changes(lake, consumed: Mapping[str, int], now: Mapping[str, int],
            follows_rewrite: Callable[[str, Mapping[str, Mapping]], bool] = no_rewrites) -> Changes:
    """What moved in the inputs between the versions a writer `consumed` and `now` ({table:
    Delta version}, tables absent from the lake left out). An increment cannot follow
    (`rebuild` says why) when an input appeared (a builder may branch on whether an input
    exists at all, which can change groups it has no rows for) or vanished, went back to an
    older version (recreated), or lost rows (an overwrite, a delete, a MERGE: files removed)
    unless `follows_rewrite(table, removed files)` says the writer can replay them (it reads
    its input by version stamps, or replays the groups of the removed files while they are
    still stored)."""
    out = Changes(dict(consumed), dict(now))
    for t in now:
        if t not in consumed:
            return out.rebuilding(f"input {t} appeared since")
    for t in consumed:
        if t not in now:
            return out.rebuilding(f"input {t} is gone")
        if consumed[t] > now[t]:
            return out.rebuilding(f"{t} went back to version {now[t]} (read {consumed[t]})")
    for t, v in now.items():
        if consumed[t] == v:
            continue
        added, removed = lake.file_changes(t, consumed[t])
        if removed and not follows_rewrite(t, removed):
            return out.rebuilding(f"{t} was rewritten since version {consumed[t]} (not only appended to)")
        if added or removed:
            out.files[t] = (added, removed)
    return out
