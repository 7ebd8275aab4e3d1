"""Copy real groups of one lake into another under new group ids (load and safety testing).

`copy_groups(src, dst, copies=71)` repeats every group of `src` 71 times (group ids
suffixed `~1`, `~2`, ...), table by table, with Spark: the 1 000-group lake of
`bench/bench_dashboards.py` is the recordings repeated this way. `rename` and `strings`
rewrite ids instead (the tests give a group the id `<img src=x onerror=alert(1)>`).
Only tables keyed by (cluster, group_id) are copied; bronze is not.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T


def copy_groups(
    src,
    dst,
    copies: int = 1,
    tables: Iterable[str] | None = None,
    clusters: Iterable[str] | None = None,
    groups: Iterable[tuple[str, str]] | None = None,
    rename: Callable[[Column, Column], Column] | None = None,
    strings: dict[str, Callable[[Column], Column]] | None = None,
    time_copies: int = 1,
    time_shift_hours: int = 24,
) -> dict[str, int]:
    """Write each (cluster, group_id) table of `src` into `dst` `copies` times.

    rename(group_id, copy_index) gives the new group id (default: `<id>~<n>` for n ≥ 1,
    the original id for copy 0). `strings` maps other column names (member_id, client_id,
    ...) to a rewrite applied wherever the column exists. Returns the Delta version written
    per table. `clusters` / `groups` ((cluster, group_id) pairs) limit what is copied.

    time_copies > 1 also repeats each group's whole history that many times under the same
    id, copy j shifted `j * time_shift_hours` later (every timestamp column, and epoch-ms
    columns named *_ms): a longer history per group, for episode-count scale tests."""
    if copies < 1 or time_copies < 1:
        raise ValueError("copies and time_copies must be at least 1")
    if rename is None:
        def rename(gid, i):
            return F.when(i == 0, gid).otherwise(F.concat(gid, F.lit("~"), i.cast("string")))
    spark = src.spark
    index = spark.range(copies).select(F.col("id").cast("int").alias("_copy"))
    shifts = spark.range(time_copies).select(F.col("id").cast("int").alias("_shift"))
    shift_ms = time_shift_hours * 3_600_000
    out = {}
    for name in sorted(tables if tables is not None else src.tables()):
        if not src.exists(name):
            continue
        df = src.read(name)
        if not {"cluster", "group_id"} <= set(df.columns):
            continue
        if clusters is not None:
            df = df.where(F.col("cluster").isin(list(clusters)))
        if groups is not None:
            wanted = [(F.col("cluster") == c) & (F.col("group_id") == g) for c, g in groups]
            cond = wanted[0] if wanted else F.lit(False)
            for w in wanted[1:]:
                cond = cond | w
            df = df.where(cond)
        df = df.crossJoin(index) if copies > 1 else df.withColumn("_copy", F.lit(0))
        # A what-if summary is one row per group and assignor however long the history is.
        repeat = time_copies > 1 and name != "whatif_summary"
        df = df.crossJoin(shifts) if repeat else df.withColumn("_shift", F.lit(0))
        cols = []
        for f in df.schema.fields:
            c = f.name
            if c in ("_copy", "_shift"):
                continue
            col = F.col(f"`{c}`")
            if repeat and isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType)):
                col = F.timestamp_millis(F.unix_millis(col) + F.col("_shift") * F.lit(shift_ms))
            elif repeat and c.endswith("_ms") and isinstance(f.dataType, T.LongType) \
                    and c not in ("duration_ms", "span_ms", "time_rebalancing_ms", "commit_interval_ms"):
                col = col + F.col("_shift") * F.lit(shift_ms)
            if c == "group_id":
                col = rename(col, F.col("_copy"))
            elif strings and c in strings:
                col = strings[c](col)
            cols.append(col.alias(c))
        parts = src.partition_by(name)
        out[name] = dst.write_df(name, df.select(*cols), mode="overwrite", partition_by=parts or None)
    return out
