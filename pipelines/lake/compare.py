"""Two lakes compared row for row: what a re-run, a recovery after a kill, another Spark
master or another arrival order must reproduce.

Rows are compared as sorted canonical strings, without the columns that by nature differ
between two lakes fed the same data (when a row arrived, which file Spark wrote it to). A
whole lake is compared by each row's 16-byte digest, read in batches: a benchmark-sized lake
(12 M commits) held as Python strings took 23.7 GB.

    .venv/bin/python -m pipelines.lake.compare LAKE_A LAKE_B [--ignore quality_results,...]

prints each table and whether its rows are equal, and exits 1 when any differs (a refactor's
before and after over the same input, a lake against a reference).
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Iterable

import numpy as np

from .lake import Lake

# When a row arrived, or an identity was first seen: two lakes of the same data differ there.
ARRIVAL = frozenset({"ingested_at", "first_seen_at"})


def _canonical(row: dict) -> str:
    return repr(sorted(row.items()))


def table_rows(lake: Lake, name: str, ignore: Iterable[str] = ARRIVAL) -> list[str]:
    """The rows of table `name` without the `ignore` columns, as sorted canonical strings:
    for tables small enough to show where they differ."""
    skip = set(ignore)
    table = lake.read_arrow(name)
    keep = [c for c in table.column_names if c not in skip]
    return sorted(_canonical(r) for r in table.select(keep).to_pylist())


def row_digests(lake: Lake, name: str, ignore: Iterable[str] = ARRIVAL, batch_rows: int = 65_536) -> np.ndarray:
    """The sorted 16-byte digests of table `name`'s canonical rows (as `table_rows`), read a
    batch at a time: memory stays at 16 bytes a row whatever the row's width."""
    skip = set(ignore)
    dataset = lake.table(name).to_pyarrow_dataset()
    keep = [c for c in dataset.schema.names if c not in skip]
    chunks = [np.frombuffer(b"".join(hashlib.blake2b(_canonical(r).encode(), digest_size=16).digest()
                                     for r in batch.to_pylist()), dtype="V16")
              for batch in dataset.to_batches(columns=keep, batch_size=batch_rows) if batch.num_rows]
    # Any total order will do for comparing two multisets: two 64-bit halves, sorted as such.
    halves = np.dtype([("hi", "<u8"), ("lo", "<u8")])
    digests = np.concatenate(chunks).view(halves) if chunks else np.empty(0, dtype=halves)
    return np.sort(digests, order=["hi", "lo"])


def differing_tables(a: Lake, b: Lake, ignore: Iterable[str] = ARRIVAL) -> list[str]:
    """The tables whose rows differ between lakes `a` and `b`, or that only one has."""
    skip = frozenset(ignore)
    names_a, names_b = set(a.tables()), set(b.tables())
    out = sorted(names_a ^ names_b)
    out += [n for n in sorted(names_a & names_b)
            if not np.array_equal(row_digests(a, n, skip), row_digests(b, n, skip))]
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Two lakes compared row for row, arrival stamps aside.")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--ignore", default="", help="tables left out (comma-separated), e.g. quality_results, "
                                                 "a log of every check made")
    args = ap.parse_args(argv)
    a, b = Lake(args.a), Lake(args.b)
    # A mistyped path (or a run that failed before it wrote) is no lake: two of them would
    # compare "equal", a comparison of nothing.
    empty = [path for path, lake in ((args.a, a), (args.b, b)) if not lake.tables()]
    if empty:
        print(f"compare: no table in {', '.join(empty)}: not a lake", file=sys.stderr)
        return 2
    left_out = {t for t in args.ignore.split(",") if t}
    differs = [t for t in differing_tables(a, b) if t not in left_out]
    for name in sorted((set(a.tables()) | set(b.tables())) - left_out):
        print(f"{name}: {'DIFFERS' if name in differs else 'equal'}")
    print(f"{len(differs)} of {len((set(a.tables()) | set(b.tables())) - left_out)} tables differ")
    return 1 if differs else 0


if __name__ == "__main__":
    from pipelines.process_exit import exit_now

    exit_now(main())
