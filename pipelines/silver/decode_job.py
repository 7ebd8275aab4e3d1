"""Spark transformations: bronze `offsets_records` → silver tables.

Pure DataFrame-in, DataFrame-out functions (the lake I/O lives in `runner.py`), so the
same code runs on local[*] and on a cluster. Decoding happens in `mapInArrow` on the
executors with the codec; nothing is collected to the driver.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from pipelines.silver import commit_columns, records, schemas

# Columns of a bronze row that the row builders read.
BRONZE_COLUMNS = ["cluster", "partition", "offset", "timestamp", "key", "value", "source", "transactional",
                  "producer_id", "leader_epoch", "ingest_version"]

COMMITS = "offset_commits"
# Silver tables decoded from `offsets_records`, with their schemas.
CONSUMER_GROUP_TABLES = {
    "consumer_group_epochs": schemas.CONSUMER_GROUP_EPOCHS,
    "consumer_group_members": schemas.CONSUMER_GROUP_MEMBERS,
    "target_assignment_epochs": schemas.TARGET_ASSIGNMENT_EPOCHS,
    "target_assignment_member_deltas": schemas.TARGET_ASSIGNMENT_MEMBER_DELTAS,
    "current_assignments": schemas.CURRENT_ASSIGNMENTS,
    "topic_ids": schemas.TOPIC_IDS,
}
# Tables whose decoded rows are appended as they are (no transaction or generation to resolve).
APPENDED_TABLES = {**CONSUMER_GROUP_TABLES, "other_group_records": schemas.OTHER_GROUP_RECORDS}
DECODED_TABLES = {
    COMMITS: schemas.OFFSET_COMMITS,
    "group_generations": schemas.GROUP_GENERATIONS,
    "member_assignments": schemas.MEMBER_ASSIGNMENTS,
    **APPENDED_TABLES,
}
# The table a record of each type was meant for (named in its quarantine row); every other
# type is meant for `other_group_records`.
TARGET_OF_TYPE = {
    **{t: "offset_commits" for t in records.OFFSET_COMMIT_TYPES},
    records.GROUP_METADATA_TYPE: "group_generations",
    **{t: "consumer_group_epochs" for t in records.CONSUMER_GROUP_TYPES},
}

# Bookkeeping columns of a decoded row: which table it belongs to ("_error" for a record
# that could not be decoded), the bronze version that brought the record, and for an error
# the raw record for the quarantine.
TABLE_COLUMN = "_table"
BRONZE_VERSION_COLUMN = "_bronze_version"
ERROR_TABLE = "_error"
_BOOKKEEPING = [
    pa.field(TABLE_COLUMN, pa.string()),
    pa.field(BRONZE_VERSION_COLUMN, pa.int64()),
    pa.field("_error", pa.string()),
    pa.field("_target_table", pa.string()),
    pa.field("_record_type", pa.int32()),
    pa.field("_key", pa.binary()),
    pa.field("_value", pa.binary()),
]


def _wide_schema() -> pa.Schema:
    fields: dict[str, pa.Field] = {}
    for table, schema in DECODED_TABLES.items():
        if table != COMMITS:
            for f in schema:
                fields.setdefault(f.name, f.with_nullable(True))
    return pa.schema([*fields.values(), *_BOOKKEEPING])


# The rows of every table but offset_commits, and the decode errors: one column set for all
# (no column name is used with two different types).
WIDE_SCHEMA = _wide_schema()

# What the decode's `mapInArrow` gives: a row per offset commit in offset_commits' own
# columns, and per bronze batch one row (TABLE_COLUMN = OTHERS) holding that batch's other
# rows in OTHERS_COLUMN, a list of WIDE_SCHEMA structs. Why two shapes: the decoded
# increment is cached (columnar, every column encoded and given statistics), and offset
# commits are nearly every record (11.6 M of 12.4 M in the large benchmark); in one wide
# schema for all (64 columns) each commit carried over forty null columns of the other
# tables, which building the cache and moving the Arrow batches between Python and the JVM
# paid for, row by row (offsets silver of the large size: 266 s then, 156 s now).
OTHERS = "_others"
OTHERS_COLUMN = "_others"
INCREMENT_SCHEMA = pa.schema([
    *(f.with_nullable(True) for f in schemas.OFFSET_COMMITS),
    pa.field(TABLE_COLUMN, pa.string()),
    pa.field(BRONZE_VERSION_COLUMN, pa.int64()),
    pa.field(OTHERS_COLUMN, pa.list_(pa.struct(list(WIDE_SCHEMA)))),
])


def key_type_column() -> F.Column:
    """The record type: the key's leading big-endian int16, read without decoding the record."""
    return F.conv(F.hex(F.substring("key", 1, 2)), 16, 10).cast("int")


def _rows_of(row: dict, kafka_version: str | None) -> tuple[dict[str, list[dict]], list[dict]]:
    """One bronze record → ({silver table: rows}, decode errors). A record that decodes but
    holds a value no column can (a timestamp past year 9999) is a decode error too: one bad
    record goes to quarantine with the reason instead of failing the whole increment."""
    try:
        return _decoded_rows(row, kafka_version)
    except (ValueError, OverflowError) as exc:
        return {}, [records.decode_error_row(row, row["record_type"], f"unrepresentable value: {exc}")]


def _decoded_rows(row: dict, kafka_version: str | None) -> tuple[dict[str, list[dict]], list[dict]]:
    record_type = row["record_type"]
    if record_type in records.OFFSET_COMMIT_TYPES:
        good, bad = records.offset_commit_rows(row, kafka_version)
        return {"offset_commits": good}, bad
    if record_type == records.GROUP_METADATA_TYPE:
        generations, members, bad = records.group_metadata_rows(row, kafka_version)
        return {"group_generations": generations, "member_assignments": members}, bad
    if record_type in records.CONSUMER_GROUP_TYPES:
        return records.consumer_group_rows(row, kafka_version)
    return records.other_group_rows(row, kafka_version)


def _increment_batch(given: dict[str, pa.Array], n: int) -> pa.RecordBatch:
    """`n` rows of INCREMENT_SCHEMA from the columns given (the others null)."""
    return pa.RecordBatch.from_arrays(
        [given[f.name].cast(f.type) if f.name in given else pa.nulls(n, f.type) for f in INCREMENT_SCHEMA],
        schema=INCREMENT_SCHEMA)


def _commit_batch(columns: dict[str, pa.Array], versions: pa.Array) -> pa.RecordBatch:
    """Offset commits given as columns, in INCREMENT_SCHEMA."""
    n = len(versions)
    return _increment_batch({**columns, TABLE_COLUMN: pa.repeat(pa.scalar(COMMITS), n), BRONZE_VERSION_COLUMN: versions}, n)


# Other rows per row of the decoded increment: about this many bytes at most. A Spark row
# must stay well under 2 GB, and one bronze batch of a backfill can hold thousands of
# generations of a large group (a member row per partition each) or quarantined raw records.
OTHERS_ROW_BYTES = 8 << 20


def _others_batch(rows: list[dict]) -> pa.RecordBatch:
    """The rows of the other tables (and the errors) of one bronze batch as rows of
    INCREMENT_SCHEMA (one, unless they exceed OTHERS_ROW_BYTES), listed in OTHERS_COLUMN."""
    wide = pa.RecordBatch.from_pylist(rows, schema=WIDE_SCHEMA)
    per_row = max(1, wide.num_rows * OTHERS_ROW_BYTES // max(wide.nbytes, 1))
    bounds = [*range(0, wide.num_rows, per_row), wide.num_rows]
    structs = pa.StructArray.from_arrays(wide.columns, fields=list(WIDE_SCHEMA))
    n = len(bounds) - 1
    return _increment_batch({TABLE_COLUMN: pa.repeat(pa.scalar(OTHERS), n),
                             OTHERS_COLUMN: pa.ListArray.from_arrays(pa.array(bounds, pa.int32()), structs)}, n)


def _python_rows(batch: pa.RecordBatch, kafka_version: str | None) -> list[dict]:
    """Wide rows of a batch's records, decoded one at a time by `records`."""
    out: list[dict] = []
    for row in batch.to_pylist():
        version = row["ingest_version"]
        tables, errors = _rows_of(row, kafka_version)
        for table, table_rows_ in tables.items():
            for r in table_rows_:
                r[TABLE_COLUMN] = table
                r[BRONZE_VERSION_COLUMN] = version
                out.append(r)
        for err in errors:
            out.append({
                **{n: err.get(n) for n in ("cluster", "coordinator_partition", "log_offset", "record_ts", "source")},
                TABLE_COLUMN: ERROR_TABLE,
                BRONZE_VERSION_COLUMN: version,
                "_error": err["reason"],
                "_target_table": TARGET_OF_TYPE.get(row["record_type"], "other_group_records"),
                "_record_type": err["record_type"],
                "_key": err["key"],
                "_value": err["value"],
            })
    return out


def decode_batch(batch: pa.RecordBatch, kafka_version: str | None = None, *,
                 compiled: bool = True) -> Iterator[pa.RecordBatch]:
    """The decoded rows of one batch of bronze rows (BRONZE_COLUMNS and `record_type`), in
    INCREMENT_SCHEMA (`unpacked` lists them as rows of their tables).

    Offset commits go column by column through the compiled core (`commit_columns`); the
    other types, and what the core does not take, one record at a time through `records`.
    compiled=False: every record through `records` (the tests' oracle for the core)."""
    commits, versions, rest = commit_columns.split(batch) if compiled else (None, None, batch)
    if commits is not None and versions is not None and len(versions):
        yield _commit_batch(commits, versions)
    rows = _python_rows(rest, kafka_version)
    python_commits = [r for r in rows if r[TABLE_COLUMN] == COMMITS]
    if python_commits:
        yield pa.RecordBatch.from_pylist(python_commits, schema=INCREMENT_SCHEMA)
    others = [r for r in rows if r[TABLE_COLUMN] != COMMITS]
    if others:
        yield _others_batch(others)


def unpacked(batch: pa.RecordBatch) -> list[dict]:
    """`decode_batch`'s rows as the rows of their tables: each commit in offset_commits'
    columns, each other row in WIDE_SCHEMA's (with TABLE_COLUMN and BRONZE_VERSION_COLUMN)."""
    out: list[dict] = []
    for row in batch.to_pylist():
        others = row.pop(OTHERS_COLUMN)
        out.extend(others if row[TABLE_COLUMN] == OTHERS else [row])
    return out


def decode_increment(bronze: DataFrame, kafka_version: str | None = None) -> DataFrame:
    """Every coordinator record of `bronze` decoded ONCE, in INCREMENT_SCHEMA.

    One `mapInArrow` pass over the bronze rows (the codec is the expensive part, so no
    record is decoded twice); `DecodedIncrement` keeps the result for a run.
    """
    # Every data record: the types no table of its own takes go to other_group_records.
    rows = data_records(bronze)
    columns = [*BRONZE_COLUMNS, "record_type"]

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from decode_batch(batch, kafka_version)

    return rows.select(*columns).mapInArrow(run, from_arrow_schema(INCREMENT_SCHEMA))


def others_of(decoded: DataFrame) -> DataFrame:
    """The rows of `decode_increment` that are not offset commits, in WIDE_SCHEMA's columns."""
    return decoded.where(F.col(TABLE_COLUMN) == OTHERS).select(F.explode(OTHERS_COLUMN).alias("_row")).select("_row.*")


class DecodedIncrement:
    """A bronze increment decoded once and kept on local disk for a run: the offset commits
    in their own columns, `others` (the other tables' rows and the decode errors) in the
    wide ones. Each silver table's write takes its rows from here (`rows`, `errors`).

    Kept on local disk only: an increment can be a whole backfill (11.8 M commits in the
    large benchmark), and cached in memory its columnar batches ran a 4 GB driver heap out
    (java.lang.OutOfMemoryError in MemoryStore.putIterator, bench/README.md). On disk it is
    written once, compressed, and read back batch by batch by each table's write. `others`
    is cached apart so that no table's read goes through the commits' batches again (the
    filter on TABLE_COLUMN skips a cached batch by its statistics, not its rows)."""

    def __init__(self, bronze: DataFrame, kafka_version: str | None = None):
        self._decoded = decode_increment(bronze, kafka_version).persist(StorageLevel.DISK_ONLY)
        self.others = others_of(self._decoded).persist(StorageLevel.DISK_ONLY)

    def newest_versions(self) -> dict[str, int]:
        """{table (or ERROR_TABLE): the newest bronze version with a row of it}, in one job
        that decodes everything and lays the other rows out (each cache built once)."""
        kept = [TABLE_COLUMN, BRONZE_VERSION_COLUMN]
        rows = self._decoded.where(F.col(TABLE_COLUMN) == COMMITS).select(*kept) \
            .unionByName(self.others.select(*kept)) \
            .groupBy(TABLE_COLUMN).agg(F.max(BRONZE_VERSION_COLUMN).alias("newest")).collect()
        return {r[TABLE_COLUMN]: r["newest"] for r in rows}

    def rows(self, table: str, after_version: int = -1) -> DataFrame:
        """The rows of one silver table brought by bronze versions above `after_version` (a
        table that is ahead of the others skips what it has)."""
        source = self._decoded if table == COMMITS else self.others
        return source.where((F.col(TABLE_COLUMN) == table) & (F.col(BRONZE_VERSION_COLUMN) > after_version)).select(
            *DECODED_TABLES[table].names)

    def errors(self) -> DataFrame:
        """Decode failures as bronze `quarantine` rows (keyed by their source position)."""
        return self.others.where(F.col(TABLE_COLUMN) == ERROR_TABLE).select(
            "cluster",
            F.lit("offsets_records").alias("source_table"),
            F.concat_ws(":", F.lit("partition"), "coordinator_partition", F.lit("offset"), "log_offset").alias("source_key"),
            F.col("_target_table").alias("target_table"),
            F.col("_error").alias("reason"),
            F.col("_record_type").alias("record_type"),
            F.col("_key").alias("key"),
            F.col("_value").alias("value"),
        )

    def unpersist(self) -> None:
        self.others.unpersist()
        self._decoded.unpersist()


def data_records(bronze: DataFrame) -> DataFrame:
    """Bronze rows that are coordinator records (not transaction markers, not records of an
    aborted transaction read live: those never took effect), with their type."""
    kept = ~F.coalesce(F.col("control"), F.lit(False))
    if "aborted" in bronze.columns:  # lakes whose bronze predates the column have none
        kept = kept & ~F.coalesce(F.col("aborted"), F.lit(False))
    return bronze.where(kept).withColumn("record_type", key_type_column())


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


# Tables of the consumer protocol's records that name a group (KIP-848, types 3, 5-8).
KIP848_GROUP_TABLES = [t for t in CONSUMER_GROUP_TABLES if t != "topic_ids"]


def mark_conversions(generations: DataFrame, others: DataFrame) -> DataFrame:
    """`converted`: true on a GroupMetadata tombstone the coordinator wrote when it converted
    the group to the consumer protocol (KIP-848's online migration, Kafka 3.8+), which ends
    the classic records of a group that lives on, not the group.

    A conversion is one atomic batch: the classic group's tombstone, then the consumer
    group's records. So a tombstone whose next record in its coordinator partition is a
    KIP-848 record of the same group is a conversion; a deletion (DeleteGroups, expiry) is
    followed by no record of its group in its batch. The conversion back (the last
    consumer-protocol member left) writes the consumer group's tombstones and then a
    GroupMetadata record: no classic tombstone."""
    following = others.where(F.col(TABLE_COLUMN).isin(KIP848_GROUP_TABLES)).select(
        "cluster", "coordinator_partition", (F.col("log_offset") - 1).alias("log_offset"), "group_id"
    ).distinct().withColumn("_next_is_kip848", F.lit(True))
    keys = ["cluster", "coordinator_partition", "log_offset", "group_id"]
    return generations.join(F.broadcast(following), keys, "left").withColumn(
        "converted", F.col("is_deletion") & F.coalesce(F.col("_next_is_kip848"), F.lit(False))
    ).drop("_next_is_kip848")


def ends_incarnation(generations: DataFrame) -> F.Column:
    """A deletion that is not a conversion (lakes written before `converted` have none)."""
    converted = F.coalesce(F.col("converted"), F.lit(False)) if "converted" in generations.columns else F.lit(False)
    return F.col("is_deletion") & ~converted


def add_incarnations(generations: DataFrame, prior_deletions: DataFrame | None) -> DataFrame:
    """Number each group's incarnations: a deletion (tombstone) ends one, the next record starts
    another. A conversion to the consumer protocol (`mark_conversions`) ends none.

    `prior_deletions` (cluster, group_id, deletions) counts deletions already in silver, so
    an incremental run continues the numbering. The deletion row itself belongs to the
    incarnation it ends.
    """
    w = Window.partitionBy("cluster", "group_id").orderBy("coordinator_partition", "log_offset").rowsBetween(
        Window.unboundedPreceding, -1
    )
    before = F.coalesce(F.sum(ends_incarnation(generations).cast("int")).over(w), F.lit(0))
    out = generations.withColumn("_local", before)
    if prior_deletions is not None:
        out = out.join(prior_deletions, ["cluster", "group_id"], "left")
        out = out.withColumn("incarnation", (F.col("_local") + F.coalesce(F.col("deletions"), F.lit(0))).cast("int"))
        out = out.drop("deletions")
    else:
        out = out.withColumn("incarnation", F.col("_local").cast("int"))
    return out.drop("_local")


def late_groups(old: DataFrame, new: DataFrame) -> DataFrame:
    """(cluster, group_id) of the groups with a new generation record before one already in silver."""
    pos = F.struct("coordinator_partition", "log_offset")
    first_new = new.groupBy("cluster", "group_id").agg(F.min(pos).alias("_first"))
    last_old = old.groupBy("cluster", "group_id").agg(F.max(pos).alias("_last"))
    return first_new.join(last_old, ["cluster", "group_id"]).where(F.col("_first") < F.col("_last")) \
        .select("cluster", "group_id")


def attach_incarnation(members: DataFrame, generations: DataFrame) -> DataFrame:
    keys = ["cluster", "coordinator_partition", "log_offset"]
    return members.join(generations.select(*keys, "incarnation"), keys, "left")


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
