"""Silver, incrementally: decode only what bronze gained since the last run.

Every bronze row carries the bronze table version that committed it (`ingest_version`).
Each silver table remembers, as a position committed with its rows (writer and key
`silver:<bronze table>`, pipelines/lake/positions.py), the bronze version it has consumed up to. A run reads
the bronze rows with a higher `ingest_version`, decodes them once, and appends to each
silver table that has not consumed them yet. A crash between two silver tables leaves
each at its own position; the next run redoes exactly the missing part.

Transactional offset commits whose COMMIT/ABORT marker has not arrived yet are parked in
`open_transactional_commits` (replaced each run) and retried with the next increment.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial, reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines import stages
from pipelines.lake import Positions
from pipelines.lake.positions import changes as input_changes
from pipelines.spark import local_frame
from pipelines.silver import decode_job, schemas
from pipelines.silver.decode_job import DecodedIncrement
from pipelines.spark import run_concurrently

log = logging.getLogger(__name__)

# What each silver step reads and writes: pipelines/stages.py.
(BRONZE_OFFSETS,) = stages.OFFSETS_SILVER.reads
(BRONZE_LOG_LINES,) = stages.EVENTS_SILVER.reads
(BRONZE_TOPICS,) = stages.TOPIC_NAMES.reads
QUARANTINE = "quarantine"
OPEN_TXN = "open_transactional_commits"
APP_PREFIX = stages.SILVER_PREFIX
VERSION_COLUMN = "ingest_version"

CLASSIC_TABLES = ("group_generations", "member_assignments")
(DERIVED_KIP848,) = stages.TARGET_ASSIGNMENTS.outputs
KIP848_EPOCHS, KIP848_DELTAS, _ = stages.TARGET_ASSIGNMENTS.reads


@dataclass
class SilverRun:
    bronze_version: int
    rows_written: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0


def _consumed(lake, table: str, source: str) -> int:
    """The bronze version `table` has consumed up to (-1: nothing yet)."""
    if not lake.exists(table):
        return -1
    version = lake.positions(table, APP_PREFIX + source).get(APP_PREFIX + source)
    return -1 if version is None else int(version)


def _position(source: str, version: int) -> Positions:
    """A silver table's position in one bronze source (its writer: silver:<source>)."""
    return Positions(APP_PREFIX + source, {APP_PREFIX + source: version})


def _nothing_new(lake, source: str, since: int, upto: int) -> bool:
    """Whether `source` gained no row between versions `since` and `upto` (only compactions by
    `maintain`, or nothing): then there is nothing to decode, and no position needs to move.
    Bronze is read by its version stamps, which a rewrite keeps, so removed rows are no
    concern (`positions.changes`, the rule every stage decides by)."""
    return input_changes(lake, {source: since}, {source: upto}, follows_rewrite=lambda *_: True).nothing


def _increment(lake, source: str, since: int, upto: int) -> DataFrame:
    return lake.read_since(source, VERSION_COLUMN, since, upto)


def _rows_in(lake, table: str) -> int:
    """Rows in a table's latest snapshot, from the Delta log's file statistics (no scan)."""
    if not lake.exists(table):
        return 0
    return sum(int(n or 0) for n in lake.table(table).get_add_actions(flatten=True).column("num_records").to_pylist())


def _write(lake, run: SilverRun, table: str, df: DataFrame, source: str, partition_by=("cluster",)) -> None:
    # One Spark job: the rows written are counted from the new files' statistics, not by a
    # second pass over `df`.
    before = _rows_in(lake, table)
    lake.write_df(table, df, mode="append", partition_by=list(partition_by), positions=_position(source, run.bronze_version))
    run.rows_written[table] = run.rows_written.get(table, 0) + _rows_in(lake, table) - before


def _advance(lake, table: str, schema, source: str, version: int) -> None:
    """Nothing new for `table`: commit only its position (creating it empty if need be), so
    the next run does not read this increment again."""
    if not lake.exists(table):
        lake.create(table, schema, partition_by=["cluster"])
    lake.append(table, schema.empty_table(), positions=_position(source, version))


def _quarantine(lake, run: SilverRun, errors: DataFrame) -> None:
    """Decode failures → bronze quarantine, keyed by source position (a replay adds nothing)."""
    rows = errors.toArrow()
    if rows.num_rows == 0:
        return
    from pipelines.ingest.schemas import QUARANTINE as Q

    inserted = lake.insert_if_absent(Q.name, rows, key=list(Q.key or ()))
    run.quarantined += inserted.num_rows


def update_offsets_silver(lake, kafka_version: str | None = None) -> SilverRun:
    """Bronze `offsets_records` → offset_commits, classic and KIP-848 silver tables.

    The increment since the table furthest behind is decoded once (one pass of the codec
    over each record) and kept for the run; each table then takes the rows of the bronze
    versions it has not consumed yet.
    """
    if not lake.exists(BRONZE_OFFSETS):
        return SilverRun(bronze_version=-1)
    upto = lake.version(BRONZE_OFFSETS)
    run = SilverRun(bronze_version=upto)
    positions = {t: _consumed(lake, t, BRONZE_OFFSETS) for t in decode_job.DECODED_TABLES}
    pending = {t: p for t, p in positions.items() if p < upto}
    if not pending or _nothing_new(lake, BRONZE_OFFSETS, min(pending.values()), upto):
        return run
    bronze = _increment(lake, BRONZE_OFFSETS, min(pending.values()), upto)
    decoded = DecodedIncrement(bronze, kafka_version)
    try:
        # One job decodes everything; the newest version per table says which writes have work.
        present = decoded.newest_versions()
        steps = []
        if decode_job.ERROR_TABLE in present:
            steps.append(partial(_quarantine, lake, run, decoded.errors()))
        if "offset_commits" in pending:
            steps.append(partial(_update_commits, lake, run, bronze, decoded, pending["offset_commits"], present,
                                 kafka_version))
        if "group_generations" in pending or "member_assignments" in pending:
            steps.append(partial(_update_classic, lake, run, decoded, pending, present))
        steps += [partial(_write_or_advance, lake, run, table, decoded, pending[table], present)
                  for table in decode_job.APPENDED_TABLES if table in pending]
        # The steps write different tables from the same decoded rows, each table with its
        # own position: they run side by side (an increment's writes are mostly delta-spark's
        # fixed cost per commit, one after the other they added up to most of this step).
        # The order that matters stays inside a step: parked commits before the commits,
        # members before generations.
        run_concurrently(lake.spark, steps)
    finally:
        decoded.unpersist()
    return run


def _has_new(table: str, since: int, present: dict) -> bool:
    return table in present and present[table] > since


def _write_or_advance(lake, run: SilverRun, table: str, decoded: DecodedIncrement, since: int, present: dict) -> None:
    if _has_new(table, since, present):
        _write(lake, run, table, decoded.rows(table, since), BRONZE_OFFSETS)
    else:
        _advance(lake, table, decode_job.DECODED_TABLES[table], BRONZE_OFFSETS, run.bronze_version)


def _update_commits(lake, run: SilverRun, bronze: DataFrame, decoded: DecodedIncrement, since: int, present: dict,
                    kafka_version: str | None) -> None:
    carried = lake.read(OPEN_TXN) if lake.exists(OPEN_TXN) else None
    if not _has_new("offset_commits", since, present) and carried is None:
        _advance(lake, "offset_commits", schemas.OFFSET_COMMITS, BRONZE_OFFSETS, run.bronze_version)
        return
    new = decoded.rows("offset_commits", since)
    # allowMissingColumns: commits parked by an older version lack the columns added since
    # (coordinator_epoch); they read as null.
    candidates = new if carried is None else new.unionByName(
        carried.select(*[c for c in schemas.OFFSET_COMMITS.names if c in carried.columns]), allowMissingColumns=True)
    # Markers of the versions this table has not consumed: they close new and carried commits.
    markers = bronze.where(F.col("control") & (F.col(VERSION_COLUMN) > since))
    effective, still_open = decode_job.resolve_transactions(candidates, markers)
    # The parked commits are replaced first: a crash after this and before the commits
    # are written re-derives both from the same increment (the position has not moved).
    lake.write_df(OPEN_TXN, still_open, mode="overwrite", partition_by=["cluster"])
    _write(lake, run, "offset_commits", effective, BRONZE_OFFSETS)
    run.rows_written[OPEN_TXN] = _rows_in(lake, OPEN_TXN)


def _update_classic(lake, run: SilverRun, decoded: DecodedIncrement, pending: dict, present: dict) -> None:
    gen_since = pending.get("group_generations")
    late = late_generations = None
    if gen_since is not None:
        old = _generations_touched(lake, gen_since)
        converted_late = _late_conversions(old, decoded, gen_since, present)
        if not _has_new("group_generations", gen_since, present) and converted_late is None:
            # No GroupMetadata record in the increment: no members either.
            for table in CLASSIC_TABLES:
                if table in pending:
                    _advance(lake, table, decode_job.DECODED_TABLES[table], BRONZE_OFFSETS, run.bronze_version)
            return
        new = decode_job.mark_conversions(decoded.rows("group_generations", gen_since), decoded.others)
        generations, late, late_generations = _number_incarnations(old, new, converted_late)
    else:
        # Only the members are behind (a crash between the two writes below): the
        # generations they take their incarnation from are in silver already.
        generations = lake.read("group_generations")
    # Members first: their incarnation comes from the generations computed here. A group
    # whose history grew at its start is rewritten whole, before the appends that carry
    # the position (a crash in between redoes the same replacement: rows are deduplicated
    # by the record they came from).
    mem_since = pending.get("member_assignments")
    new_members = decoded.rows("member_assignments", mem_since) \
        if mem_since is not None and _has_new("member_assignments", mem_since, present) else None
    if late is not None and late_generations is not None:  # (both or neither)
        old = lake.read("member_assignments").join(late, GROUP, "left_semi").drop("incarnation")
        mine = old if new_members is None else old.unionByName(new_members.join(late, GROUP, "left_semi"))
        lake.replace_rows("member_assignments", decode_job.attach_incarnation(mine.dropDuplicates(MEMBER_ROW), late_generations),
                          keys=late, key_columns=GROUP, partition_by=["cluster"])
        new_members = None if new_members is None else new_members.join(late, GROUP, "left_anti")
    if mem_since is not None:
        if new_members is not None:
            _write(lake, run, "member_assignments", decode_job.attach_incarnation(new_members, generations), BRONZE_OFFSETS)
        else:
            _advance(lake, "member_assignments", schemas.MEMBER_ASSIGNMENTS, BRONZE_OFFSETS, run.bronze_version)
    if gen_since is not None:
        if late is not None:
            lake.replace_rows("group_generations", late_generations, keys=late, key_columns=GROUP, partition_by=["cluster"])
        _write(lake, run, "group_generations", generations, BRONZE_OFFSETS)


# A group's rows; the record a silver row came from (a member row: one per partition given).
GROUP = ["cluster", "group_id"]
GENERATION_ROW = ["cluster", "coordinator_partition", "log_offset"]
MEMBER_ROW = GENERATION_ROW + ["member_id", "topic", "partition"]


def _generations_touched(lake, since: int) -> DataFrame | None:
    """Silver's generation rows of the clusters the increment since bronze version `since`
    touches (None: no table yet). The other clusters' history is not read (all of it when
    bronze is not partitioned by cluster)."""
    if not lake.exists("group_generations"):
        return None
    return lake.read("group_generations", clusters=lake.added_partition_values(BRONZE_OFFSETS, since, "cluster"))


def _late_conversions(old: DataFrame | None, decoded: DecodedIncrement, since: int, present: dict) -> DataFrame | None:
    """(cluster, coordinator_partition, log_offset, group_id) of GroupMetadata tombstones in
    silver (`old`), taken as deletions, whose next record, a KIP-848 record of their group,
    is in this increment: conversions whose batch two ingestion commits split (live
    ingestion commits every N records, wherever a batch ends). None when there is none."""
    if old is None or not any(_has_new(t, since, present) for t in decode_job.KIP848_GROUP_TABLES):
        return None
    tombstones = old.where(decode_job.ends_incarnation(old)).select(*GENERATION_ROW, "group_id")
    found = decode_job.mark_conversions(tombstones.withColumn("is_deletion", F.lit(True)), decoded.others) \
        .where(F.col("converted")).select(*GENERATION_ROW, "group_id")
    return None if found.isEmpty() else found


def _number_incarnations(old: DataFrame | None, new: DataFrame, converted_late: DataFrame | None = None):
    """Incarnations of the new generation rows, as if every record had arrived in log order.

    A group's deletions before a record number its incarnation, so records that arrive
    after later ones of their group (another broker's older segments, a backfill after live
    ingestion) renumber what follows them: such a group is renumbered whole, as is a group
    whose deletion turned out to be a conversion (`converted_late`, from `_late_conversions`).
    `old`: silver's rows of the increment's clusters (`_generations_touched`). Returns the
    in-order groups' new rows, and the late groups' keys and whole history (None, None when
    every group's new records come after its old ones)."""
    if old is None:
        return decode_job.add_incarnations(new, None), None, None
    found = decode_job.late_groups(old, new)
    if converted_late is not None:
        found = found.unionByName(converted_late.select(*GROUP)).distinct()
        flag = converted_late.select(*GENERATION_ROW).withColumn("_late", F.lit(True))
        was = F.coalesce("converted", F.lit(False)) if "converted" in old.columns else F.lit(False)
        old = old.join(flag, GENERATION_ROW, "left").withColumn("converted", was | F.coalesce("_late", F.lit(False))) \
            .select(*old.columns, *([] if "converted" in old.columns else ["converted"]))
    late = None if found.isEmpty() else found
    in_order = new if late is None else new.join(late, GROUP, "left_anti")
    prior = old.where(decode_job.ends_incarnation(old)).groupBy(*GROUP).agg(F.count("*").alias("deletions"))
    generations = decode_job.add_incarnations(in_order, prior)
    if late is None:
        return generations, None, None
    history = old.join(late, GROUP, "left_semi").drop("incarnation") \
        .unionByName(new.join(late, GROUP, "left_semi"), allowMissingColumns=True).dropDuplicates(GENERATION_ROW)
    return generations, late, decode_job.add_incarnations(history, None)


def update_topic_names(lake) -> int:
    """Topic names sampled from the live cluster (bronze `topic_metadata`) join the ones
    decoded from type-4 records in `topic_ids`: from Kafka 4.1 there are no type-4 records,
    and KIP-848 assignments name their topics by id only. Few rows (one per topic id), so
    no Spark: each (cluster, topic id) from metadata is inserted once; returns the rows added."""
    if not lake.exists(BRONZE_TOPICS):
        return 0
    import pyarrow as pa

    sampled = lake.read_arrow(BRONZE_TOPICS)
    if sampled.num_rows == 0:
        return 0
    n = sampled.num_rows
    rows = pa.table({
        "topic_id": sampled["topic_id"], "topic": sampled["topic"], "num_partitions": sampled["num_partitions"],
        "group_id": pa.nulls(n, pa.string()), "cluster": sampled["cluster"],
        # Not from a record: no coordinator partition or log offset (-1), the sample time.
        "coordinator_partition": pa.array([-1] * n, pa.int32()), "log_offset": pa.array([-1] * n, pa.int64()),
        "record_ts": sampled["sampled_at"], "source": pa.array(["metadata"] * n, pa.string()),
        "coordinator_epoch": pa.nulls(n, pa.int32()),
    }).select(schemas.TOPIC_IDS.names).cast(schemas.TOPIC_IDS)
    if not lake.exists("topic_ids"):
        lake.create("topic_ids", schemas.TOPIC_IDS, partition_by=["cluster"])
    return lake.insert_if_absent("topic_ids", rows, key=["cluster", "topic_id", "source"]).num_rows


def update_target_assignments(lake) -> int:
    """`target_assignments` from the epoch and delta tables. A group's target assignments
    come from its own epoch and delta records alone, so only the groups with new ones (or
    whose deltas name a topic id that got a name) are recomputed and replaced, in one MERGE;
    the whole table is written when it is new or an input lost rows. Returns the rows
    written (0: inputs unchanged, nothing done).

    The versions of the inputs it was built from ride along as its positions
    (`silver:<input>`), so an unchanged input costs no Spark job."""
    if not lake.exists(KIP848_EPOCHS):
        return 0
    stage = stages.TARGET_ASSIGNMENTS
    current = stage.versions(lake)
    positions = Positions(stage.writer, stage.positions(current))
    changed = None
    if lake.exists(DERIVED_KIP848):
        changed = stage.changes(lake, stage.consumed(lake.positions(DERIVED_KIP848, stage.writer)), current)
        if changed.nothing:  # unchanged, or only compacted since (versions moved, no row did)
            return 0

    def read(table: str, clusters: set | None = None) -> DataFrame:
        """An input at the version the positions record (only `clusters`' files when given)."""
        return lake.read(table, current.get(table), clusters=clusters)

    topic_ids = read("topic_ids") if lake.exists("topic_ids") else None
    if changed is None or changed.rebuild:
        df = decode_job.materialize_target_assignments(read(KIP848_EPOCHS), read(KIP848_DELTAS), topic_ids)
        lake.write_df(DERIVED_KIP848, df, mode="overwrite", partition_by=["cluster"], positions=positions)
        return _rows_in(lake, DERIVED_KIP848)
    found = _kip848_groups_touched(lake, changed, read)
    if not found:  # e.g. names of topic ids no group's deltas name: only the positions move
        lake.append(DERIVED_KIP848, lake.schema(DERIVED_KIP848).empty_table(), positions=positions)
        return 0
    # Collected once, handed back as a small local relation: every use is a broadcast.
    keys = local_frame(lake.spark, found, "cluster string, group_id string")
    clusters = {c for c, _ in found}

    def mine(table: str) -> DataFrame:
        return read(table, clusters).join(F.broadcast(keys), GROUP, "left_semi")

    df = decode_job.materialize_target_assignments(mine(KIP848_EPOCHS), mine(KIP848_DELTAS), topic_ids)
    version = lake.replace_rows(DERIVED_KIP848, df, keys, GROUP, partition_by=["cluster"], positions=positions,
                                key_partitions={(c,) for c in clusters})
    return lake.commit_rows(DERIVED_KIP848, version)


def _kip848_groups_touched(lake, changed, read) -> list[tuple[str, str]]:
    """(cluster, group_id) of the groups with epoch or delta rows in the files added since
    (`changed`: `stages.Stage.changes`, appends only), and of the groups whose deltas name a
    topic id with a new row in `topic_ids`. `read(table, clusters)`: an input as the caller
    reads it."""
    parts = [lake.rows_of_files(t, changed.files[t][0]).select(*GROUP)
             for t in (KIP848_EPOCHS, KIP848_DELTAS) if t in changed.files]
    if "topic_ids" in changed.files:
        added = changed.files["topic_ids"][0]
        ids = lake.rows_of_files("topic_ids", added).select("cluster", "topic_id").distinct()
        # Only the deltas of the clusters the new names came to (their files' partitions).
        clusters = {v["cluster"] for v in added.values()} if all("cluster" in v for v in added.values()) else None
        parts.append(read(KIP848_DELTAS, clusters).join(F.broadcast(ids), ["cluster", "topic_id"], "left_semi")
                     .select(*GROUP))
    if not parts:
        return []
    found = reduce(DataFrame.unionByName, parts).where(F.col("group_id").isNotNull()).distinct()
    return [(r["cluster"], r["group_id"]) for r in found.collect()]


def rebuild_broker_clocks(lake) -> int:
    """`broker_clocks` from the whole of `coordinator_events` (pipelines/silver/clocks.py),
    replaced when the events changed (positions `silver:coordinator_events`), so an
    unchanged input costs no Spark job. Gold tells a new measure from the rows themselves:
    a new version that measures the same offsets rebuilds nothing. Returns the rows written."""
    from pipelines.silver import clocks

    stage = stages.BROKER_CLOCKS
    (events,) = stage.reads
    if not lake.exists(events):
        return 0
    current = stage.versions(lake)
    versions = stage.positions(current)
    # Unchanged, or only compacted since.
    if lake.exists(clocks.TABLE) and stage.changes(
            lake, stage.consumed(lake.positions(clocks.TABLE, stage.writer)), current).nothing:
        return 0
    table = clocks.measure(lake.read(events, versions[APP_PREFIX + events]))
    lake.create(clocks.TABLE, clocks.SCHEMA, description=stage.tables[clocks.TABLE])
    # A handful of rows per cluster: replaced whole, in one commit.
    lake.overwrite_where(clocks.TABLE, table, "cluster IS NOT NULL", positions=Positions(stage.writer, versions))
    return table.num_rows


def update_events_silver(lake) -> SilverRun:
    """Bronze `coordinator_log_lines` → `coordinator_events`, incrementally."""
    from pipelines.silver.events_job import parse_log_lines

    if not lake.exists(BRONZE_LOG_LINES):
        return SilverRun(bronze_version=-1)
    upto = lake.version(BRONZE_LOG_LINES)
    run = SilverRun(bronze_version=upto)
    since = _consumed(lake, "coordinator_events", BRONZE_LOG_LINES)
    if since < upto and not _nothing_new(lake, BRONZE_LOG_LINES, since, upto):
        lines = _increment(lake, BRONZE_LOG_LINES, since, upto)
        _write(lake, run, "coordinator_events", parse_log_lines(lines), BRONZE_LOG_LINES)
    return run
