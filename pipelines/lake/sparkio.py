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

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from pipelines.spark import local_frame


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


# File names Spark reports as they are (`_metadata.file_name` is the decoded last segment of
# the path): those delta-spark and delta-rs give their data files, `part-…-<uuid>…parquet`.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9._=-]+")


def read_files(spark, files: Mapping[str, Mapping[str, object]], schema: pa.Schema, partition_by: Sequence[str]):
    """A DataFrame over exactly `files` (URI → the file's partition values, from the log) of
    one table, columns in `schema` order.

    One Parquet read of every file. A partition column is a constant where the files hold
    one value; with several, each row's value comes from its file's name
    (`_metadata.file_name`, matched against the names in the log). A read per partition
    value, unioned, plans and schedules one scan per value: on a lake of fourteen clusters
    that was half of gold's time (66 against 31-34 s on the recordings' lake, warm JVM).
    Names Spark might render otherwise than the log, or the same name in two partitions
    (no writer of this lake makes either), fall back to that union."""
    from functools import reduce

    from pyspark.sql import functions as F

    sschema = spark_schema(schema)
    partition_by = list(partition_by)
    data_schema = spark_schema(pa.schema([f for f in schema if f.name not in partition_by]))
    if not files:
        return local_frame(spark, [], sschema)

    def values_of(column: str, by_file: Mapping[str, Mapping[str, object]]):
        """Column `column` over the files `by_file` (file name → partition values)."""
        typed = sschema[column].dataType
        names_by_value: dict[object, list[str]] = {}
        for name, file_values in by_file.items():
            names_by_value.setdefault(file_values.get(column), []).append(name)
        if len(names_by_value) == 1:
            return F.lit(next(iter(names_by_value))).cast(typed)
        file_name_column = F.col("_metadata.file_name")
        expr = None
        for value, names in sorted(names_by_value.items(), key=repr):
            cond, constant = file_name_column.isin(names), F.lit(value).cast(typed)
            expr = F.when(cond, constant) if expr is None else expr.when(cond, constant)
        return expr

    def read(paths: list[str], columns: Mapping[str, Any]):
        df = spark.read.schema(data_schema).parquet(*paths)
        return df.select(*[(columns[n] if n in columns else F.col(f"`{n}`")).alias(n) for n in schema.names])

    by_name = {uri.rsplit("/", 1)[-1]: values for uri, values in files.items()}
    if len(by_name) == len(files) and all(_PLAIN_NAME.fullmatch(n) for n in by_name):
        return read([spark_path(u) for u in files], {c: values_of(c, by_name) for c in partition_by})
    by_values: dict[tuple, list[str]] = {}
    for uri, file_values in files.items():
        by_values.setdefault(tuple(file_values.get(c) for c in partition_by), []).append(spark_path(uri))
    reads = [read(paths, {c: F.lit(v).cast(sschema[c].dataType) for c, v in zip(partition_by, values)})
             for values, paths in sorted(by_values.items(), key=repr)]
    return reduce(lambda a, b: a.union(b), reads)
