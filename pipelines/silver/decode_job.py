"""Spark transformations: bronze `offsets_records` → silver tables.

Pure DataFrame-in, DataFrame-out functions (the lake I/O lives in `runner.py`), so the
same code runs on local[*] and on a cluster. Decoding happens in `mapInArrow` on the
executors with the codec; nothing is collected to the driver.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from pipelines.silver import records, schemas

# Columns of a bronze row that the row builders read.
BRONZE_COLUMNS = ["cluster", "partition", "offset", "timestamp", "key", "value", "source", "transactional", "producer_id"]

# Extra columns every mapped output carries, so one pass yields rows *and* errors.
_ERROR_FIELDS = [
    pa.field("_error", pa.string()),
    pa.field("_record_type", pa.int32()),
    pa.field("_key", pa.binary()),
    pa.field("_value", pa.binary()),
]


def _relaxed(schema: pa.Schema) -> pa.Schema:
    """The table schema with every field nullable plus the error columns (error rows fill only the source)."""
    return pa.schema([f.with_nullable(True) for f in schema] + _ERROR_FIELDS)


def key_type_column() -> F.Column:
    """The record type: the key's leading big-endian int16, read without decoding the record."""
    return F.conv(F.hex(F.substring("key", 1, 2)), 16, 10).cast("int")


def _map_records(
    df: DataFrame,
    schema: pa.Schema,
    build: Callable[[dict], tuple[list[dict], list[dict]]],
) -> DataFrame:
    out_schema = _relaxed(schema)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows: list[dict] = []
            for row in batch.to_pylist():
                good, bad = build(row)
                rows.extend(good)
                for err in bad:
                    rows.append(
                        {
                            **{n: err.get(n) for n in ("cluster", "coordinator_partition", "log_offset", "record_ts", "source")},
                            "_error": err["reason"],
                            "_record_type": err["record_type"],
                            "_key": err["key"],
                            "_value": err["value"],
                        }
                    )
            if rows:
                yield pa.RecordBatch.from_pylist(rows, schema=out_schema)

    mapped = df.select(*BRONZE_COLUMNS).mapInArrow(run, from_arrow_schema(out_schema))
    return mapped


def split_errors(mapped: DataFrame, table: str, names: list[str]) -> tuple[DataFrame, DataFrame]:
    good = mapped.where(F.col("_error").isNull()).select(*names)
    bad = mapped.where(F.col("_error").isNotNull()).select(
        "cluster",
        F.lit("offsets_records").alias("source_table"),
        F.concat_ws(":", F.lit("partition"), "coordinator_partition", F.lit("offset"), "log_offset").alias("source_key"),
        F.lit(table).alias("target_table"),
        F.col("_error").alias("reason"),
        F.col("_record_type").alias("record_type"),
        F.col("_key").alias("key"),
        F.col("_value").alias("value"),
    )
    return good, bad


def data_records(bronze: DataFrame) -> DataFrame:
    """Bronze rows that are coordinator records (not transaction markers), with their type."""
    return bronze.where(~F.coalesce(F.col("control"), F.lit(False))).withColumn("record_type", key_type_column())


def decode_offset_commits(bronze: DataFrame, kafka_version: str | None = None) -> tuple[DataFrame, DataFrame]:
    rows = data_records(bronze).where(F.col("record_type").isin(*records.OFFSET_COMMIT_TYPES))
    mapped = _map_records(rows, schemas.OFFSET_COMMITS, lambda r: records.offset_commit_rows(r, kafka_version))
    return split_errors(mapped, "offset_commits", schemas.OFFSET_COMMITS.names)


def resolve_transactions(commits: DataFrame, bronze_markers: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Transactional commits take effect at their COMMIT marker; aborted ones are dropped.

    `commits` holds decoded commits (new ones plus still-open ones carried over from
    earlier runs); `bronze_markers` the control records of the same partitions. Returns
    (effective commits, commits whose transaction is still open). Commits read over the
    wire with read_committed (no batch facts, `transactional` false) are effective as read.
    """
    markers = bronze_markers.where(F.col("control")).select(
        "cluster",
        F.col("partition").alias("coordinator_partition"),
        F.col("offset").alias("log_offset"),
        "producer_id",
        # Control key: int16 version, int16 type (ABORT=0, COMMIT=1).
        F.conv(F.hex(F.substring("key", 3, 2)), 16, 10).cast("int").alias("_control_type"),
    )
    txn = commits.where(F.col("transactional"))
    plain = commits.where(~F.col("transactional"))
    stream = txn.withColumn("_control_type", F.lit(None).cast("int")).unionByName(markers, allowMissingColumns=True)
    following = Window.partitionBy("cluster", "coordinator_partition", "producer_id").orderBy("log_offset").rowsBetween(
        Window.currentRow, Window.unboundedFollowing
    )
    marker = F.first(
        F.when(F.col("_control_type").isNotNull(), F.struct(F.col("log_offset").alias("at"), F.col("_control_type").alias("type"))),
        ignorenulls=True,
    ).over(following)
    resolved = stream.withColumn("_marker", marker).where(F.col("_control_type").isNull())
    committed = resolved.where(F.col("_marker.type") == 1).withColumn("effective_log_offset", F.col("_marker.at"))
    still_open = resolved.where(F.col("_marker").isNull())
    names = schemas.OFFSET_COMMITS.names
    return plain.select(*names).unionByName(committed.select(*names)), still_open.select(*names)


def decode_group_metadata(bronze: DataFrame, kafka_version: str | None = None) -> tuple[DataFrame, DataFrame, DataFrame]:
    """Type-2 records → (group_generations without incarnation, member_assignments, errors)."""
    rows = data_records(bronze).where(F.col("record_type") == records.GROUP_METADATA_TYPE)

    def gens(r: dict):
        g, _, e = records.group_metadata_rows(r, kafka_version)
        return g, e

    def members(r: dict):
        _, m, _ = records.group_metadata_rows(r, kafka_version)
        return m, []

    gen_df, errors = split_errors(_map_records(rows, schemas.GROUP_GENERATIONS, gens), "group_generations", schemas.GROUP_GENERATIONS.names)
    member_df, _ = split_errors(_map_records(rows, schemas.MEMBER_ASSIGNMENTS, members), "member_assignments", schemas.MEMBER_ASSIGNMENTS.names)
    return gen_df, member_df, errors


def add_incarnations(generations: DataFrame, prior_deletions: DataFrame | None) -> DataFrame:
    """Number each group's incarnations: a deletion (tombstone) ends one, the next record starts another.

    `prior_deletions` (cluster, group_id, deletions) counts deletions already in silver, so
    an incremental run continues the numbering. The deletion row itself belongs to the
    incarnation it ends.
    """
    w = Window.partitionBy("cluster", "group_id").orderBy("coordinator_partition", "log_offset").rowsBetween(
        Window.unboundedPreceding, -1
    )
    before = F.coalesce(F.sum(F.col("is_deletion").cast("int")).over(w), F.lit(0))
    out = generations.withColumn("_local", before)
    if prior_deletions is not None:
        out = out.join(prior_deletions, ["cluster", "group_id"], "left")
        out = out.withColumn("incarnation", (F.col("_local") + F.coalesce(F.col("deletions"), F.lit(0))).cast("int"))
        out = out.drop("deletions")
    else:
        out = out.withColumn("incarnation", F.col("_local").cast("int"))
    return out.drop("_local")


def attach_incarnation(members: DataFrame, generations: DataFrame) -> DataFrame:
    keys = ["cluster", "coordinator_partition", "log_offset"]
    return members.join(generations.select(*keys, "incarnation"), keys, "left")


CONSUMER_GROUP_TABLES = {
    "consumer_group_epochs": schemas.CONSUMER_GROUP_EPOCHS,
    "consumer_group_members": schemas.CONSUMER_GROUP_MEMBERS,
    "target_assignment_epochs": schemas.TARGET_ASSIGNMENT_EPOCHS,
    "target_assignment_member_deltas": schemas.TARGET_ASSIGNMENT_MEMBER_DELTAS,
    "current_assignments": schemas.CURRENT_ASSIGNMENTS,
    "topic_ids": schemas.TOPIC_IDS,
}


def decode_consumer_groups(bronze: DataFrame, kafka_version: str | None = None) -> tuple[dict[str, DataFrame], DataFrame]:
    """KIP-848 records (types 3–8) → one DataFrame per silver table, plus errors."""
    rows = data_records(bronze).where(F.col("record_type").isin(*records.CONSUMER_GROUP_TYPES)).cache()
    out: dict[str, DataFrame] = {}
    errors = None
    for table, schema in CONSUMER_GROUP_TABLES.items():

        def build(r: dict, _table: str = table):
            tables, errs = records.consumer_group_rows(r, kafka_version)
            # Errors are reported once, by the first table's pass.
            return tables.get(_table, []), errs if _table == "consumer_group_epochs" else []

        good, bad = split_errors(_map_records(rows, schema, build), table, schema.names)
        out[table] = good
        errors = bad if errors is None else errors.unionByName(bad)
    return out, errors


def materialize_target_assignments(epochs: DataFrame, deltas: DataFrame, topic_ids: DataFrame | None) -> DataFrame:
    """The whole target assignment at each assignment epoch, from the type-7 deltas.

    Kafka writes only the members whose target changed (type 7), then the epoch (type 6);
    the target at epoch E is, per member, the newest type-7 record before that type-6
    record, unless it is a tombstone (member removed).
    """
    e = epochs.where(~F.col("is_deletion")).select(
        "cluster", "group_id", "assignment_epoch", F.col("log_offset").alias("epoch_offset"),
        F.col("record_ts").alias("epoch_ts"), "coordinator_partition",
    )
    d = deltas.select(
        "cluster", "group_id", "member_id", "is_deletion", "topic_id", "partition",
        F.col("log_offset").alias("delta_offset"), "coordinator_partition",
    )
    joined = e.join(d, ["cluster", "group_id", "coordinator_partition"]).where(F.col("delta_offset") < F.col("epoch_offset"))
    latest = Window.partitionBy("cluster", "group_id", "assignment_epoch", "member_id")
    current = joined.withColumn("_newest", F.max("delta_offset").over(latest)).where(
        (F.col("delta_offset") == F.col("_newest")) & ~F.col("is_deletion")
    )
    out = current.select(
        "cluster", "group_id", "assignment_epoch", "member_id", "topic_id", "partition",
        "epoch_ts", "epoch_offset", "coordinator_partition",
    )
    if topic_ids is not None:
        names = topic_ids.select("cluster", "topic_id", F.col("topic").alias("topic")).dropDuplicates(["cluster", "topic_id"])
        out = out.join(names, ["cluster", "topic_id"], "left")
    else:
        out = out.withColumn("topic", F.lit(None).cast("string"))
    return out
