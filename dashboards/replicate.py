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


def copy_groups(
    src,
    dst,
    copies: int = 1,
    tables: Iterable[str] | None = None,
    clusters: Iterable[str] | None = None,
    rename: Callable[[Column, Column], Column] | None = None,
    strings: dict[str, Callable[[Column], Column]] | None = None,
) -> dict[str, int]:
    """Write each (cluster, group_id) table of `src` into `dst` `copies` times.

    rename(group_id, copy_index) gives the new group id (default: `<id>~<n>` for n ≥ 1,
    the original id for copy 0). `strings` maps other column names (member_id, client_id,
    ...) to a rewrite applied wherever the column exists. Returns the Delta version written
    per table."""
    if copies < 1:
        raise ValueError("copies must be at least 1")
    if rename is None:
        def rename(gid, i):
            return F.when(i == 0, gid).otherwise(F.concat(gid, F.lit("~"), i.cast("string")))
    spark = src.spark
    index = spark.range(copies).select(F.col("id").cast("int").alias("_copy"))
    out = {}
    for name in sorted(tables if tables is not None else src.tables()):
        if not src.exists(name):
            continue
        df = src.read(name)
        if not {"cluster", "group_id"} <= set(df.columns):
            continue
        if clusters is not None:
            df = df.where(F.col("cluster").isin(list(clusters)))
        if copies > 1:
            df = df.crossJoin(index)
        else:
            df = df.withColumn("_copy", F.lit(0))
        cols = []
        for c in df.columns:
            if c == "_copy":
                continue
            col = F.col(f"`{c}`")
            if c == "group_id":
                col = rename(col, F.col("_copy"))
            elif strings and c in strings:
                col = strings[c](col)
            cols.append(col.alias(c))
        parts = src.partition_by(name)
        out[name] = dst.write_df(name, df.select(*cols), mode="overwrite", partition_by=parts or None)
    return out
