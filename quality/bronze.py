"""Bronze suites: raw inputs are stored once, with their position, and few are quarantined."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.spark import local_frame

from .model import WARN, Context, Invariant, Suite, fmt, null_check, row_check, unique_check, violation

# Share of a cluster's inputs (records + coordinator lines) that may end in quarantine
# before the check warns. Real brokers produce almost none: a corrupt batch, a truncated
# segment tail, an unknown record version. More means a decoder or format gap.
QUARANTINE_RATE_MAX = 0.01

OFFSETS_RECORDS = Suite("offsets_records", "bronze", (
    unique_check("record_stored_once", ["cluster", "partition", "offset"],
                 "a record (cluster, partition, offset) is stored once, whichever replica or source it came from"),
    row_check("offset_non_negative", lambda: (F.col("offset") < 0) | (F.col("partition") < 0),
              ["cluster", "partition", "offset"], lambda: fmt("partition %s offset %s", "partition", "offset"),
              ("partition", "offset"), "partitions and offsets are non-negative"),
    row_check("offset_inside_batch",
              lambda: (F.col("offset") < F.col("base_offset")) | (F.col("offset") > F.col("last_offset")),
              ["cluster", "partition", "offset"],
              lambda: fmt("offset %s outside its batch [%s, %s]", "offset", "base_offset", "last_offset"),
              ("offset", "base_offset", "last_offset"), "a record's offset lies inside its batch's offset range"),
    null_check("record_has_key_and_source", ("key", "source"), ["cluster", "partition", "offset"],
               description="every record has its key bytes and the source it was read from"),
))

COORDINATOR_LOG_LINES = Suite("coordinator_log_lines", "bronze", (
    unique_check("line_stored_once", ["cluster", "broker", "line_key"],
                 "a coordinator line is stored once per broker, however often its file was read"),
    null_check("line_has_position_and_text", ("file", "line", "text", "logger"), ["cluster", "broker", "file", "line"],
               description="every line has its file, line number, logger and text"),
    row_check("line_number_positive", lambda: F.col("line") < 1, ["cluster", "broker", "file", "line"],
              lambda: fmt("line number %s", "line"), ("line",), "line numbers start at 1"),
    null_check("line_has_timestamp", ("ts",), ["cluster", "broker", "file", "line"], severity=WARN,
               description="every line's timestamp parsed (else it cannot be placed in the history)"),
))


def _rows_per_cluster(lake, name: str) -> dict[str, int]:
    """Rows per cluster from the Delta log's file statistics (bronze is partitioned by
    cluster): counting the inputs costs no scan of the biggest tables."""
    import pyarrow as pa

    if lake is None or not lake.exists(name):
        return {}
    actions = pa.table(lake.table(name).get_add_actions(flatten=True))
    if actions.num_rows == 0 or "partition.cluster" not in actions.column_names:
        return {}
    out: dict[str, int] = {}
    for cluster, n in zip(actions.column("partition.cluster").to_pylist(), actions.column("num_records").to_pylist()):
        if n is None:
            raise ValueError(f"table {name}: a file without row statistics; cannot count inputs")
        out[cluster] = out.get(cluster, 0) + int(n)
    return out


def _quarantine_rate(q: DataFrame, ctx: Context) -> DataFrame | None:
    """Quarantined inputs per cluster over all inputs of that cluster (records + log lines)."""
    limit = float(ctx.params.get("quarantine_rate_max", QUARANTINE_RATE_MAX))
    inputs: dict[str, int] = {}
    for name in ("offsets_records", "coordinator_log_lines"):
        for cluster, n in _rows_per_cluster(ctx.lake, name).items():
            inputs[cluster] = inputs.get(cluster, 0) + n
    rows: list[tuple[str | None, int]] = [(c, n) for c, n in inputs.items()] or [(None, 0)]
    total = local_frame(q.sparkSession, rows,
                                           "cluster string, inputs long")
    bad = q.groupBy("cluster").agg(F.count(F.lit(1)).alias("quarantined")) \
        .join(total, "cluster", "left") \
        .withColumn("rate", F.col("quarantined") / F.greatest(F.coalesce("inputs", F.lit(0)) + F.col("quarantined"), F.lit(1))) \
        .where(F.col("rate") > F.lit(limit))
    return violation(bad, ["cluster"], F.format_string(
        "%d of %d inputs quarantined (%.2f%%, limit %.2f%%)", F.col("quarantined"),
        (F.coalesce("inputs", F.lit(0)) + F.col("quarantined")).cast("long"), F.col("rate") * 100, F.lit(limit * 100)))


QUARANTINE = Suite("quarantine", "bronze", (
    Invariant("quarantine_rate_under_limit",
              f"at most {QUARANTINE_RATE_MAX:.0%} of a cluster's inputs are quarantined", WARN, ("cluster",),
              _quarantine_rate, scope=("cluster",), reads=("offsets_records", "coordinator_log_lines")),
    null_check("quarantine_has_reason", ("reason", "source", "source_key"), ["cluster", "source_key"],
               description="every quarantined input says where it came from and why"),
))

PARTITION_END_OFFSETS = Suite("partition_end_offsets", "bronze", (
    row_check("watermarks_ordered",
              lambda: (F.col("start_offset") < 0) | (F.col("end_offset") < F.col("start_offset")),
              ["cluster", "topic", "partition", "sampled_at"],
              lambda: fmt("log start %s, log end %s", "start_offset", "end_offset"),
              ("start_offset", "end_offset"), "0 <= log-start offset <= log-end offset"),
    null_check("sample_complete", ("topic", "partition", "end_offset", "sampled_at"),
               ["cluster", "topic", "partition", "sampled_at"],
               description="every sample names its partition, its log-end offset and when it was taken"),
))

TOPIC_METADATA = Suite("topic_metadata", "bronze", (
    unique_check("topic_id_once", ["cluster", "topic_id"], "each topic id is stored once per cluster"),
    null_check("topic_named", ("topic_id", "topic", "sampled_at"), ["cluster", "topic_id"],
               description="every sampled topic id has a name and a sample time"),
))

SUITES = (OFFSETS_RECORDS, COORDINATOR_LOG_LINES, QUARANTINE, PARTITION_END_OFFSETS, TOPIC_METADATA)
