"""Every table's suite, by table name."""
from __future__ import annotations

from . import bronze, gold, kip848, silver, whatif
from .model import Suite

SUITES: dict[str, Suite] = {s.table: s for s in (*bronze.SUITES, *silver.SUITES, *kip848.SUITES, *gold.SUITES, *whatif.SUITES)}


def suite_for(table: str) -> Suite:
    try:
        return SUITES[table]
    except KeyError:
        raise KeyError(f"no quality suite for table {table!r}; known: {', '.join(sorted(SUITES))}") from None
