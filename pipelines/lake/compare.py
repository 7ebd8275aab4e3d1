"""Two lakes compared row for row: what a re-run, a recovery after a kill, another Spark
master or another arrival order must reproduce.

Rows are compared as sorted canonical strings, without the columns that by nature differ
between two lakes fed the same data (when a row arrived, which file Spark wrote it to).
"""
from __future__ import annotations

from collections.abc import Iterable

from .lake import Lake

# When a row arrived, or an identity was first seen: two lakes of the same data differ there.
ARRIVAL = frozenset({"ingested_at", "first_seen_at"})


def table_rows(lake: Lake, name: str, ignore: Iterable[str] = ARRIVAL) -> list[str]:
    """The rows of table `name` without the `ignore` columns, as sorted canonical strings."""
    skip = set(ignore)
    table = lake.read_arrow(name)
    keep = [c for c in table.column_names if c not in skip]
    return sorted(repr(sorted(r.items())) for r in table.select(keep).to_pylist())


def differing_tables(a: Lake, b: Lake, ignore: Iterable[str] = ARRIVAL) -> list[str]:
    """The tables whose rows differ between lakes `a` and `b`, or that only one has."""
    skip = frozenset(ignore)
    names_a, names_b = set(a.tables()), set(b.tables())
    out = sorted(names_a ^ names_b)
    out += [n for n in sorted(names_a & names_b) if table_rows(a, n, skip) != table_rows(b, n, skip)]
    return sorted(out)
