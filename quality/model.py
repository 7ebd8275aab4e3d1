"""What a quality suite is made of: invariants of one table, each a Spark query of its violations.

An `Invariant` is one claim a table makes ("generations never decrease within a group
incarnation"). Its `violations` function returns a Spark DataFrame with one row per
offending entity, in the common shape `(cluster, key, detail)`:

* `key`: the offending row's identifying columns as a JSON object (what an SRE looks up),
* `detail`: one human sentence saying what is wrong with it.

The engine (`quality.engine`) unions every invariant of a table into one Spark job and
hands the (small) result to Great Expectations, one `expect_column_values_to_be_null`
per invariant, so the validation result carries the offending keys.

Severity: ERROR means the table is wrong (a blocking asset check), WARN means it is
incomplete or suspicious but still usable (a warning).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

ERROR = "ERROR"
WARN = "WARN"

VIOLATION_COLUMNS = ("cluster", "key", "detail")


@dataclass(frozen=True)
class Context:
    """What an invariant may look at besides its own table: other lake tables and settings."""

    tables: Callable[[str], DataFrame | None]  # name → DataFrame, or None when the table is absent
    params: Mapping[str, float] = field(default_factory=dict)
    lake: Any = None  # the Lake (pipelines.lake.Lake), for what its Delta log answers without a scan
    def other(self, name: str) -> DataFrame | None:
        return self.tables(name)


@dataclass(frozen=True)
class Invariant:
    name: str                 # identifier: the GE column and expectation name
    description: str          # what the table claims, in one sentence
    severity: str             # ERROR (data wrong) or WARN (incomplete / suspicious)
    columns: tuple[str, ...]  # columns of the table the query needs
    violations: Callable[[DataFrame, Context], DataFrame | None]
    # None from `violations`: the invariant cannot be evaluated here (e.g. no sampled
    # high watermarks yet); the result says so instead of claiming a pass on nothing.
    needs: str | None = None  # human name of what it needs when it returns None
    # A row-level invariant also gives (condition, key columns, detail) so the engine can
    # evaluate every row-level invariant of a table in ONE pass over it instead of one each.
    row: Callable[[], tuple[Column, list[str], Column]] | None = None
    # What an incremental check may restrict the table to (see quality.incremental):
    # None: the whole table is needed; (): each row is judged alone, so new rows suffice;
    # (columns): the violations of one value of these columns depend only on the rows with
    # that value (a group, a partition), so the values the new or removed rows carry suffice.
    scope: tuple[str, ...] | None = None
    # Other lake tables the query reads (their versions are part of what was checked).
    reads: tuple[str, ...] = ()

    @property
    def row_local(self) -> bool:
        return self.row is not None or self.scope == ()


@dataclass(frozen=True)
class Suite:
    table: str
    layer: str  # bronze | silver | gold | whatif
    invariants: tuple[Invariant, ...]

    @property
    def name(self) -> str:
        return f"{self.layer}.{self.table}"


def violation(df: DataFrame, key: list[str], detail: Column) -> DataFrame:
    """The common violation shape from `df`'s offending rows: cluster, JSON key, detail."""
    return df.select(
        F.col("cluster").cast("string").alias("cluster"),
        F.to_json(F.struct(*[F.col(c) for c in key])).alias("key"),
        detail.cast("string").alias("detail"),
    )


def fmt(template: str, *cols: str | Column) -> Column:
    """`format_string` with nulls printed as "null" (format_string would print "null" for
    strings but fails the whole sentence on some types; cast everything to string first)."""
    args = [F.coalesce((F.col(c) if isinstance(c, str) else c).cast("string"), F.lit("null")) for c in cols]
    return F.format_string(template, *args)


def null_check(name: str, columns: tuple[str, ...], key: list[str], where: Callable[[], Column] | None = None,
               severity: str = ERROR, description: str | None = None) -> Invariant:
    """Every row (matching `where()`) has all of `columns`. Conditions are given as functions
    so that suites can be defined (imported) before a SparkSession exists."""

    def row():
        missing = F.concat_ws(",", *[F.when(F.col(c).isNull() | (F.trim(F.col(c).cast("string")) == ""), F.lit(c))
                                     for c in columns])
        cond = missing != ""
        if where is not None:
            cond = F.coalesce(where(), F.lit(False)) & cond
        return cond, key, F.concat(F.lit("missing or empty: "), missing)

    return Invariant(name, description or f"every row has {', '.join(columns)}", severity,
                     tuple(dict.fromkeys([*columns, *key])), _row_violations(row), row=row)


def row_check(name: str, bad: Callable[[], Column], key: list[str], detail: Callable[[], Column],
              columns: tuple[str, ...], description: str, severity: str = ERROR) -> Invariant:
    """Rows for which `bad()` is true violate the invariant (a null condition is not a violation)."""

    def row():
        return F.coalesce(bad(), F.lit(False)), key, detail()

    return Invariant(name, description, severity, tuple(dict.fromkeys([*columns, *key])), _row_violations(row), row=row)


def _row_violations(row):
    def run(t: DataFrame, _ctx: Context) -> DataFrame:
        cond, key, detail = row()
        return violation(t.where(cond), key, detail)

    return run


def fused_row_violations(t: DataFrame, invariants: list[Invariant]) -> DataFrame:
    """Every row-level invariant of `invariants` in one pass over `t`: (cluster, key, detail, invariant)."""
    hits = []
    for inv in invariants:
        assert inv.row is not None, inv.name  # the engine passes row-level invariants only
        cond, key, detail = inv.row()
        hits.append(F.when(cond, F.struct(
            F.lit(inv.name).alias("invariant"),
            F.to_json(F.struct(*[F.col(c) for c in key])).alias("key"),
            detail.cast("string").alias("detail"))))
    found = t.select(F.col("cluster").cast("string").alias("cluster"),
                     F.explode(F.filter(F.array(*hits), lambda h: h.isNotNull())).alias("_v"))
    return found.select("cluster", "_v.key", "_v.detail", "_v.invariant")


def unique_check(name: str, key: list[str], description: str | None = None, where: Callable[[], Column] | None = None,
                 severity: str = ERROR) -> Invariant:
    """No two rows share `key`."""

    def run(t: DataFrame, _ctx: Context) -> DataFrame:
        src = t.where(where()) if where is not None else t
        dup = src.groupBy(*key).agg(F.count(F.lit(1)).alias("_n")).where(F.col("_n") > 1)
        return violation(dup, key, fmt("%s rows share this key", "_n"))

    return Invariant(name, description or f"one row per ({', '.join(key)})", severity, tuple(key), run, scope=tuple(key))
