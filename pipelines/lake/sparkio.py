"""Types and paths between delta-rs (Arrow) and Spark, and reading named data files.

`read_files` reads exactly the data files it is given (those one version added or removed
against another, from the log): the one read delta-spark has no batch API for without
Change Data Feed, which would raise the tables' protocol above writer 2. Partition
columns are not stored inside Delta data files, so Spark rebuilds them from the Hive-style
folder names (`col=value/`) under the table root (`basePath`), typed by the table schema
it is given (no type inference from folder names).
"""
from __future__ import annotations

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
