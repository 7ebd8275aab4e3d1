"""Spark ↔ Delta without the delta-spark JARs: Spark moves the Parquet, delta-rs the log.

Reading: delta-rs resolves the snapshot's file list; Spark reads exactly those files.
Partition columns are not stored inside Delta data files, so Spark rebuilds them from the
Hive-style folder names (`col=value/`) under the table root (`basePath`), typed by the
table schema it is given (no type inference from folder names).

Writing: Spark writes Parquet into a fresh folder `spark-<uuid>/` inside the table folder;
the files it produced are listed with Spark's own Hadoop filesystem, and delta-rs commits
them in one commit (with app transactions when asked). Files of a write that crashed
before the commit are referenced by no version and are removed by `vacuum`.
"""
from __future__ import annotations

import datetime as dt
import json
import uuid
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def spark_path(uri: str) -> str:
    """The URI Spark's Hadoop filesystem understands for a delta-rs URI (s3:// → s3a://)."""
    if uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://"):]
    if uri.startswith("file://"):
        return uri
    return uri


def spark_schema(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def arrow_schema(spark_struct) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(spark_struct)
    # Spark's timestamps are instants; tag them UTC so Delta stores `timestamp`, not `timestamp_ntz`.
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_timestamp(t):
            t = pa.timestamp("us", tz="UTC") if t.tz else pa.timestamp("us")
        fields.append(pa.field(f.name, t, nullable=True))
    return pa.schema(fields)


def read_files(spark, table_uri: str, files: list[str], schema: pa.Schema, partition_by: list[str]):
    """A DataFrame over exactly `files` of one table, columns in table order."""
    sschema = spark_schema(schema)
    if not files:
        return spark.createDataFrame([], sschema)
    reader = spark.read.schema(sschema)
    if partition_by:
        reader = reader.option("basePath", spark_path(table_uri))
    df = reader.parquet(*[spark_path(f) for f in files])
    return df.select(*[f"`{n}`" for n in schema.names])


def _hadoop_listing(spark, folder: str) -> list[tuple[str, int, int]]:
    """(path URI, size, modification ms) of every Parquet file under `folder`."""
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(folder)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return []
    found = []
    it = fs.listFiles(path, True)
    while it.hasNext():
        st = it.next()
        p = st.getPath().toString()
        name = p.rsplit("/", 1)[-1]
        if name.endswith(".parquet") and not name.startswith((".", "_")):
            found.append((p, int(st.getLen()), int(st.getModificationTime())))
    return found


def _partition_values(relative: str, partition_by: list[str]) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for part in relative.split("/")[:-1]:
        if "=" in part:
            k, v = part.split("=", 1)
            k = unquote(k)
            v = unquote(v)
            values[k] = None if v == HIVE_NULL else v
    missing = [c for c in partition_by if c not in values]
    if missing:
        raise RuntimeError(f"Spark wrote {relative} without partition folder(s) {missing}")
    return {c: values[c] for c in partition_by}


def _stat_value(v):
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        return v.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, (bool, int, float, str)):
        return v
    return None


def file_stats(fs, relative: str, partition_by: list[str]) -> str:
    """Delta `stats` JSON (numRecords, min/max/nullCount of top-level primitive columns)
    from the Parquet footer, so delta-rs and Spark can skip the file by range later."""
    with fs.open_input_file(relative) as f:
        meta = pq.ParquetFile(f).metadata
    num = meta.num_rows
    mins: dict = {}
    maxs: dict = {}
    nulls: dict = {}
    schema = meta.schema
    top = {schema.column(i).path: i for i in range(meta.num_columns)}
    for path, i in top.items():
        if "." in path or path in partition_by:
            continue  # nested leaf: Delta stats for nested columns are optional, skip
        lo = hi = None
        nc = 0
        ok = True
        for rg in range(meta.num_row_groups):
            st = meta.row_group(rg).column(i).statistics
            if st is None:
                ok = False
                break
            nc += st.null_count if st.has_null_count else 0
            if st.has_min_max:
                a, b = _stat_value(st.min), _stat_value(st.max)
                if a is None or b is None or isinstance(st.min, bytes):
                    ok = False
                    break
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
        if not ok:
            continue
        nulls[path] = nc
        if lo is not None:
            mins[path] = lo
            maxs[path] = hi
    return json.dumps({"numRecords": num, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def write_files(spark, df, table_uri: str, table_fs, partition_by: list[str]):
    """Have Spark write `df` as Parquet under the table; return delta-rs AddActions.

    Spark writes into a fresh staging folder `spark-<uuid>/`; each file is then renamed
    into the table's own Hive layout (`col=value/spark-<uuid>-part-....parquet`), so every
    data file of a table sits under `col=value/` folders directly below the root, which
    is what Spark's partition discovery (basePath) and other Delta readers expect.
    """
    from deltalake.transaction import AddAction

    folder = f"spark-{uuid.uuid4().hex}"
    root = spark_path(table_uri).rstrip("/")
    target = f"{root}/{folder}"
    writer = df.write.mode("errorifexists").option("compression", "snappy")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(target)
    jvm = spark._jvm
    Path = jvm.org.apache.hadoop.fs.Path
    fs = Path(target).getFileSystem(spark._jsc.hadoopConfiguration())
    actions = []
    for uri, size, mtime in _hadoop_listing(spark, target):
        inner = uri.split(f"/{folder}/", 1)[1]  # col=value/part-....parquet
        head, _, name = inner.rpartition("/")
        relative = f"{head}/{folder}-{name}" if head else f"{folder}-{name}"
        dst = Path(f"{root}/{relative}")
        fs.mkdirs(dst.getParent())
        if not fs.rename(Path(uri), dst):
            raise RuntimeError(f"could not move Spark output {uri} into the table")
        stats = file_stats(table_fs, relative, partition_by)
        if json.loads(stats)["numRecords"] == 0:
            # Spark writes one row-less file for an empty output: nothing to add.
            fs.delete(dst, False)
            continue
        actions.append(
            AddAction(
                path=relative,
                size=size,
                partition_values=_partition_values(relative, partition_by),
                modification_time=mtime,
                data_change=True,
                stats=stats,
            )
        )
    fs.delete(Path(target), True)
    return actions
