"""Check what changed, not the whole history: which rows a table's check must look at.

A check that rescans every table on every run costs more as history grows, and a
15-minute schedule on a quiet cluster would rescan everything for nothing. So each
check remembers what it verified, as positions (writer `quality`) in the same `quality_results`
commit as its results:

* `quality:<table>` = the table version the last check passed at (-1: it did not pass),
* `quality:<table>#suite` = a fingerprint of the suite (invariants, parameters),
* `quality:<table>@<other>` = the version of each other table the suite reads (-1: absent),
* `quality:<table>#absent` = 1 when the table did not exist, else 0 (so that a check of a
  table still absent says nothing new, see quality.results).

The next check of the table then takes one of four modes:

* **empty**: the table has no rows (row counts from the Delta log): every invariant holds
  on zero rows, no Spark job;
* **unchanged**: the table and what it reads are at the versions of the last passing
  check: the same data passes the same suite, no Spark job;
* **incremental**: the last check passed at an older version of this suite: each
  invariant looks only at what can have changed (`Invariant.scope`): a row-level invariant
  at the rows of the files added since; a scoped one (per group, per partition...) at the
  rows of the scope values that the added *or removed* files carry, so a replaced group is
  judged on its new rows as a whole; an invariant whose other inputs changed, at the scope
  values of their new rows too; an unscoped one at the whole table. Because the previous
  version passed and no other scope value has changed rows, this finds exactly the
  violations a full check would;
* **full**: anything else (first check, a failed last check, a new suite, removed files
  that were vacuumed since, a table version that went back, a table it reads that appeared,
  vanished or lost rows: `pipelines.lake.positions.changes`, the rule every stage decides by).

A change to an invariant's *logic* that keeps its name, description and scope is not
seen by the fingerprint: bump `LOGIC_VERSION` with such a change.
"""
from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

from pipelines.lake.positions import changes as input_changes

from .model import Invariant, Suite

WRITER = "quality"  # the writer of quality_results' positions (pipelines/lake/positions.py)
APP = "quality:"
SUITE_SUFFIX = "#suite"
ABSENT_SUFFIX = "#absent"
READ_SEP = "@"
LOGIC_VERSION = 1

EMPTY, UNCHANGED, INCREMENTAL, FULL = "empty", "unchanged", "incremental", "full"


def fingerprint(suite: Suite, params: Mapping[str, float]) -> int:
    """crc32 of the suite's definition and the parameters, as canonical JSON."""
    doc = {
        "logic": LOGIC_VERSION, "suite": suite.name, "params": {k: params[k] for k in sorted(params)},
        "invariants": [[i.name, i.description, i.severity, list(i.columns), i.scope is None,
                        list(i.scope or ()), list(i.reads), i.row is not None] for i in suite.invariants],
    }
    return zlib.crc32(json.dumps(doc, sort_keys=True, default=str).encode("utf-8"))


@dataclass(frozen=True)
class Checked:
    """What the last check of one table verified (from the positions)."""

    version: int                    # table version of the last passing check, -1: it failed
    suite: int                      # suite fingerprint
    reads: dict[str, int] = field(default_factory=dict)


def load(lake, results_table: str) -> dict[str, Checked]:
    """Every table's last check, from `results_table`'s positions (no scan)."""
    if not lake.exists(results_table):
        return {}
    apps = lake.positions(results_table, WRITER)
    out: dict[str, Checked] = {}
    for key, version in apps.items():
        name = key[len(APP):]
        if SUITE_SUFFIX in name or ABSENT_SUFFIX in name or READ_SEP in name:
            continue
        reads = {k[len(APP) + len(name) + 1:]: v for k, v in apps.items() if k.startswith(f"{APP}{name}{READ_SEP}")}
        out[name] = Checked(int(version), int(apps.get(f"{APP}{name}{SUITE_SUFFIX}", -1)), reads)
    return out


def positions(table: str, passed: bool, version: int, suite: int, reads: Mapping[str, int]) -> dict[str, int]:
    """The positions recording one table's check."""
    out = {f"{APP}{table}": version if passed else -1, f"{APP}{table}{SUITE_SUFFIX}": suite,
           f"{APP}{table}{ABSENT_SUFFIX}": 0}
    out.update({f"{APP}{table}{READ_SEP}{other}": v for other, v in reads.items()})
    return out


def absent_positions(table: str) -> dict[str, int]:
    """The position recording that `table` did not exist when it was checked."""
    return {f"{APP}{table}{ABSENT_SUFFIX}": 1}


@dataclass
class TableScan:
    """What one table's check looks at this run. `frame(inv)` gives the rows to evaluate an
    invariant on, or None to skip it (it cannot have new violations)."""

    table: str
    version: int
    mode: str
    since: int | None = None        # the version the incremental check starts from
    reads: dict[str, int] = field(default_factory=dict)   # other tables' versions (-1: absent)
    columns: tuple[str, ...] = ()   # the table's columns (from the Delta log)
    load: Callable[[], DataFrame] | None = None  # () -> the table at `version` as a Spark DataFrame
    # clusters -> the table at `version`, only those clusters' files (chosen in the Delta log)
    load_clusters: Callable[[set], DataFrame] | None = None
    added: DataFrame | None = None     # rows of the files added since `since`
    removed: DataFrame | None = None   # rows of the files removed since `since`
    changed_reads: dict[str, DataFrame] = field(default_factory=dict)  # other table -> its new rows
    clusters: set | None = None     # clusters with changed rows (own table and changed reads)
    # None of `clusters` had rows in the table when it was last checked (a new cluster): a
    # scope holding the cluster is then judged on those clusters' rows alone, no key join.
    fresh: bool = False
    files: tuple[int, int] = (0, 0)  # files added, removed

    _whole: object | None = None

    @property
    def whole(self):
        """The table at `version` (a Spark DataFrame, made on first use: an empty or
        unchanged table's check needs no SparkSession at all)."""
        if self._whole is None:
            self._whole = self.load()
        return self._whole

    @property
    def describe(self) -> str:
        if self.mode == INCREMENTAL:
            return (f"incremental since version {self.since} ({self.files[0]} file(s) added, "
                    f"{self.files[1]} removed{', new clusters only' if self.fresh else ''})")
        if self.mode == UNCHANGED:
            return f"unchanged since version {self.since if self.since is not None else self.version}"
        return self.mode

    def frame(self, inv: Invariant):
        if self.mode == FULL:
            return self.whole
        if self.mode in (EMPTY, UNCHANGED):
            return None
        reads_changed = [t for t in inv.reads if t in self.changed_reads]
        own_changed = self.added is not None
        if not own_changed and not reads_changed:
            return None
        if inv.row_local and not reads_changed:
            return self.added
        if inv.scope is None or (reads_changed and not inv.scope):
            return self.whole
        sources = ([self.added, self.removed] if own_changed else []) + [self.changed_reads[t] for t in reads_changed]
        if any(not set(inv.scope) <= set(s.columns) for s in sources if s is not None):
            return self.whole
        if self.fresh and "cluster" in inv.scope:
            # Every scope value names a cluster of `clusters`, whose rows are all new: the
            # rows of those clusters are exactly the scopes to judge, without the distinct
            # keys and the join.
            return _in_clusters(self.in_clusters(), self.clusters)
        keys = reduce(lambda a, b: a.unionByName(b), [s.select(*inv.scope) for s in sources if s is not None]).distinct()
        return _semi_join(self.in_clusters(), keys, inv.scope, self.clusters)

    def in_clusters(self):
        """The table's rows in the files of `clusters` alone, or the whole table when they
        are unknown. A filter on `cluster` prunes no file (the column is computed per row
        from the file's name, pipelines/lake/sparkio.py): a check of one cluster's new rows
        would read every cluster's."""
        if self.clusters is None or None in self.clusters or self.load_clusters is None:
            return self.whole
        return self.load_clusters(self.clusters)


def _semi_join(df, keys, scope: tuple[str, ...], clusters: set | None):
    """Rows of `df` whose `scope` values (nulls equal) appear in `keys`, in `clusters`."""
    from pyspark.sql import functions as F

    df = _in_clusters(df, clusters)
    k = keys.select(*[F.col(c).alias(f"_k_{c}") for c in scope])
    cond = reduce(lambda a, b: a & b, [df[c].eqNullSafe(k[f"_k_{c}"]) for c in scope])
    return df.join(k, cond, "left_semi")


def _in_clusters(df, clusters: set | None):
    """`df`'s rows of `clusters` (None: all): for a table not partitioned by cluster, read whole."""
    from pyspark.sql import functions as F

    if clusters is None or "cluster" not in df.columns:
        return df
    return df.where(F.col("cluster").isin(sorted(c for c in clusters if c is not None))
                    | (F.col("cluster").isNull() if None in clusters else F.lit(False)))


def _rows(lake, name: str, version: int) -> int | None:
    """Rows of a table version from its files' statistics; None when a file has none."""
    n = lake.table(name, version).get_add_actions(flatten=True).column("num_records").to_pylist()
    return None if any(x is None for x in n) else sum(int(x) for x in n)


def plan_scan(lake, suite: Suite, suite_fp: int, last: Checked | None) -> TableScan:
    """Decide how `suite.table` is checked this run (see the module doc)."""
    name = suite.table
    version = lake.version(name)
    reads = {t: (lake.version(t) if lake.exists(t) else -1) for t in sorted({r for i in suite.invariants for r in i.reads})}
    scan = TableScan(name, version, FULL, reads=reads, columns=tuple(lake.schema(name).names),
                     load=lambda: lake.read(name, version),
                     load_clusters=lambda clusters: lake.read(name, version, clusters=clusters))
    if _rows(lake, name, version) == 0:
        scan.mode = EMPTY
        return scan
    if last is None or last.version < 0 or last.suite != suite_fp or last.version > version:
        return scan
    if any(last.reads.get(t, -1) > v for t, v in reads.items()):
        return scan  # something it reads went back (recreated): start over
    from deltalake.exceptions import DeltaError

    from pipelines.lake import LakeError

    try:
        return _since(lake, scan, last)
    except (DeltaError, LakeError):
        # The log of the version last checked is gone (log retention) or unreadable: what
        # changed cannot be told, so the whole table is checked.
        return TableScan(name, version, FULL, reads=reads, columns=scan.columns, load=scan.load,
                         load_clusters=scan.load_clusters)


def _since(lake, scan: TableScan, last: Checked) -> TableScan:
    """`scan` made an incremental or unchanged check from `last`, or left full when the
    changes cannot be told."""
    name, version, reads = scan.table, scan.version, scan.reads
    clusters: set | None = set()

    def add_clusters(table: str, since: int) -> None:
        nonlocal clusters
        found = lake.changed_partition_values(table, since, "cluster")
        clusters = None if found is None or clusters is None else clusters | found

    # The checked table's removed rows are checked again while their files are stored (a
    # vacuumed file's scope values are unknown); a table it reads that lost rows, appeared
    # or vanished changes every row's verdict.
    own = input_changes(lake, {name: last.version}, {name: version},
                        follows_rewrite=lambda _, removed: all(lake.file_exists(f) for f in removed))
    read = input_changes(lake, {t: v for t, v in last.reads.items() if t in reads and v >= 0},
                         {t: v for t, v in reads.items() if v >= 0})
    if own.rebuild or read.rebuild:
        return scan
    # Commits that only moved a position or compacted (no file in `files`) change no row.
    if name in own.files:
        added, removed = own.files[name]
        scan.added = lake.rows_of_files(name, added)
        if removed:
            scan.removed = lake.rows_of_files(name, removed)
        scan.files = (len(added), len(removed))
        add_clusters(name, last.version)
    for t in read.files:
        scan.changed_reads[t] = lake.added_since(t, last.reads[t])
        add_clusters(t, last.reads[t])
    if scan.added is None and not scan.changed_reads:
        scan.mode, scan.since = UNCHANGED, last.version
        return scan
    scan.mode, scan.since, scan.clusters = INCREMENTAL, last.version, clusters
    if clusters is not None:
        before = lake.partition_values(name, "cluster", last.version)
        scan.fresh = before is not None and not (clusters & before)
    return scan
