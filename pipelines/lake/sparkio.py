"""Types and paths between delta-rs (Arrow) and Spark, and reading named data files.

Every Spark read of the lake goes through `read_files`: the data files of one version (or
those one version added or removed against another), listed from the Delta log by
delta-rs, read as plain Parquet. The tables are on the basic protocol (reader 1: no
deletion vectors, no column mapping), so a version's rows are exactly its files' rows.
Reading through delta-spark instead costs a Spark job per scan each time a plan is
optimized (its file listing runs on the snapshot's state, itself rebuilt by jobs for each
pinned version): on a small lake most of a run's time.

Partition values are not stored inside Delta data files: they come from the log's add
actions, never from folder names. The two writers escape folder names differently
(delta-rs percent-encodes UTF-8 bytes, Spark leaves non-ASCII as it is) and Spark's own
parsing of them decodes a percent-encoded `ü` as two characters.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa


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


def read_files(spark, files: Mapping[str, Mapping[str, object]], schema: pa.Schema, partition_by: Sequence[str]):
    """A DataFrame over exactly `files` (URI → the file's partition values, from the log) of
    one table, columns in `schema` order. One Parquet read per distinct partition value,
    each given its values as constants: a filter on a partition column then prunes whole
    reads before any file is opened."""
    from functools import reduce

    from pyspark.sql import functions as F

    sschema = spark_schema(schema)
    partition_by = list(partition_by)
    data_schema = spark_schema(pa.schema([f for f in schema if f.name not in partition_by]))
    by_values: dict[tuple, list[str]] = {}
    for uri, file_values in files.items():
        by_values.setdefault(tuple(file_values.get(c) for c in partition_by), []).append(spark_path(uri))
    reads = []
    for values, paths in sorted(by_values.items(), key=repr):
        df = spark.read.schema(data_schema).parquet(*paths)
        constants = {c: F.lit(v).cast(sschema[c].dataType) for c, v in zip(partition_by, values)}
        reads.append(df.select(*[constants.get(n, F.col(f"`{n}`")).alias(n) for n in schema.names]))
    if not reads:
        return spark.createDataFrame([], sschema)
    return reduce(lambda a, b: a.union(b), reads)
