"""Silver, incrementally: decode only what bronze gained since the last run.

Every bronze row carries the bronze table version that committed it (`ingest_version`).
Each silver table remembers, as a Delta app transaction in the same commit as its rows,
the bronze version it has consumed up to (app id `silver:<bronze table>`). A run reads
the bronze rows with a higher `ingest_version`, decodes them once, and appends to each
silver table that has not consumed them yet. A crash between two silver tables leaves
each at its own position; the next run redoes exactly the missing part.

Transactional offset commits whose COMMIT/ABORT marker has not arrived yet are parked in
`open_transactional_commits` (replaced each run) and retried with the next increment.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.silver import decode_job, schemas

log = logging.getLogger(__name__)

BRONZE_OFFSETS = "offsets_records"
BRONZE_LOG_LINES = "coordinator_log_lines"
QUARANTINE = "quarantine"
OPEN_TXN = "open_transactional_commits"
APP_PREFIX = "silver:"
VERSION_COLUMN = "ingest_version"

CLASSIC_TABLES = ("group_generations", "member_assignments")
KIP848_TABLES = (
    "consumer_group_epochs",
    "consumer_group_members",
    "target_assignment_epochs",
    "target_assignment_member_deltas",
    "current_assignments",
    "topic_ids",
)
DERIVED_KIP848 = "target_assignments"


@dataclass
class SilverRun:
    bronze_version: int
    rows_written: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0


def _consumed(lake, table: str, source: str) -> int:
    """The bronze version `table` has consumed up to (-1: nothing yet)."""
    if not lake.exists(table):
        return -1
    version = lake.app_version(table, APP_PREFIX + source)
    return -1 if version is None else int(version)


def _increment(lake, source: str, since: int, upto: int) -> DataFrame:
    return lake.read_since(source, VERSION_COLUMN, since, upto)


def _write(lake, run: SilverRun, table: str, df: DataFrame, source: str, partition_by=("cluster",)) -> None:
    df = df.cache()
    n = df.count()
    lake.write_df(table, df, mode="append", partition_by=list(partition_by), app_transactions={APP_PREFIX + source: run.bronze_version})
    run.rows_written[table] = run.rows_written.get(table, 0) + n
    df.unpersist()


def _quarantine(lake, run: SilverRun, errors: DataFrame) -> None:
    """Decode failures → bronze quarantine, keyed by source position (a replay adds nothing)."""
    rows = errors.toArrow() if hasattr(errors, "toArrow") else None
    if rows is None or rows.num_rows == 0:
        return
    from pipelines.ingest.schemas import QUARANTINE as Q

    inserted = lake.insert_if_absent(Q.name, rows, key=list(Q.key))
    run.quarantined += inserted.num_rows


def update_offsets_silver(lake, kafka_version: str | None = None) -> SilverRun:
    """Bronze `offsets_records` → offset_commits, classic and KIP-848 silver tables."""
    if not lake.exists(BRONZE_OFFSETS):
        return SilverRun(bronze_version=-1)
    upto = lake.version(BRONZE_OFFSETS)
    run = SilverRun(bronze_version=upto)
    families = {
        "commits": ("offset_commits",),
        "classic": CLASSIC_TABLES,
        "kip848": KIP848_TABLES,
    }
    for family, tables in families.items():
        positions = {t: _consumed(lake, t, BRONZE_OFFSETS) for t in tables}
        pending = {t: p for t, p in positions.items() if p < upto}
        if not pending:
            continue
        # Tables of one family normally share a position; after a crash between two of
        # them, each table catches up from its own.
        for since in sorted(set(pending.values())):
            targets = [t for t, p in pending.items() if p == since]
            bronze = _increment(lake, BRONZE_OFFSETS, since, upto).cache()
            if not _has_records(bronze, FAMILY_TYPES[family]) and not (family == "commits" and lake.exists(OPEN_TXN)):
                # Nothing of this family in the increment: only move the positions on.
                for table in targets:
                    if lake.exists(table):
                        lake.append(table, lake.schema(table).empty_table(), app_transactions={APP_PREFIX + BRONZE_OFFSETS: upto})
                bronze.unpersist()
                continue
            if family == "commits":
                _update_commits(lake, run, bronze, kafka_version)
            elif family == "classic":
                _update_classic(lake, run, bronze, targets, kafka_version)
            else:
                _update_kip848(lake, run, bronze, targets, kafka_version)
            bronze.unpersist()
    return run


# Record types (key int16) that feed each family of silver tables.
FAMILY_TYPES = {"commits": (0, 1), "classic": (2,), "kip848": (3, 4, 5, 6, 7, 8)}


def _has_records(bronze: DataFrame, types: tuple[int, ...]) -> bool:
    return not decode_job.data_records(bronze).where(F.col("record_type").isin(*types)).isEmpty()


def _update_commits(lake, run: SilverRun, bronze: DataFrame, kafka_version: str | None) -> None:
    decoded, errors = decode_job.decode_offset_commits(bronze, kafka_version)
    carried = lake.read(OPEN_TXN) if lake.exists(OPEN_TXN) else None
    candidates = decoded if carried is None else decoded.unionByName(carried.select(*schemas.OFFSET_COMMITS.names))
    # Markers of the increment, plus every marker after the oldest carried commit.
    markers = bronze.where(F.col("control"))
    effective, still_open = decode_job.resolve_transactions(candidates, markers)
    _quarantine(lake, run, errors)
    still_open = still_open.cache()
    open_rows = still_open.count()
    # The parked commits are replaced first: a crash after this and before the commits
    # are written re-derives both from the same increment (the position has not moved).
    lake.write_df(OPEN_TXN, still_open, mode="overwrite", partition_by=["cluster"])
    _write(lake, run, "offset_commits", effective, BRONZE_OFFSETS)
    run.rows_written[OPEN_TXN] = open_rows


def _update_classic(lake, run: SilverRun, bronze: DataFrame, targets: list[str], kafka_version: str | None) -> None:
    generations, members, errors = decode_job.decode_group_metadata(bronze, kafka_version)
    prior = None
    if lake.exists("group_generations"):
        prior = (
            lake.read("group_generations")
            .where(F.col("is_deletion"))
            .groupBy("cluster", "group_id")
            .agg(F.count("*").alias("deletions"))
        )
    generations = decode_job.add_incarnations(generations, prior).cache()
    members = decode_job.attach_incarnation(members, generations)
    _quarantine(lake, run, errors)
    if "member_assignments" in targets:
        _write(lake, run, "member_assignments", members, BRONZE_OFFSETS)
    if "group_generations" in targets:
        _write(lake, run, "group_generations", generations, BRONZE_OFFSETS)
    generations.unpersist()


def _update_kip848(lake, run: SilverRun, bronze: DataFrame, targets: list[str], kafka_version: str | None) -> None:
    tables, errors = decode_job.decode_consumer_groups(bronze, kafka_version)
    _quarantine(lake, run, errors)
    for table in targets:
        _write(lake, run, table, tables[table], BRONZE_OFFSETS)


def rebuild_target_assignments(lake) -> int:
    """`target_assignments` from the epoch and delta tables (replaced whole: KIP-848 records are few)."""
    if not lake.exists("target_assignment_epochs"):
        return 0
    topic_ids = lake.read("topic_ids") if lake.exists("topic_ids") else None
    df = decode_job.materialize_target_assignments(
        lake.read("target_assignment_epochs"), lake.read("target_assignment_member_deltas"), topic_ids
    ).cache()
    n = df.count()
    lake.write_df(DERIVED_KIP848, df, mode="overwrite", partition_by=["cluster"])
    df.unpersist()
    return n


def update_events_silver(lake) -> SilverRun:
    """Bronze `coordinator_log_lines` → `coordinator_events`, incrementally."""
    from pipelines.silver.events_job import parse_log_lines

    if not lake.exists(BRONZE_LOG_LINES):
        return SilverRun(bronze_version=-1)
    upto = lake.version(BRONZE_LOG_LINES)
    run = SilverRun(bronze_version=upto)
    since = _consumed(lake, "coordinator_events", BRONZE_LOG_LINES)
    if since < upto:
        lines = _increment(lake, BRONZE_LOG_LINES, since, upto)
        _write(lake, run, "coordinator_events", parse_log_lines(lines), BRONZE_LOG_LINES)
    return run
