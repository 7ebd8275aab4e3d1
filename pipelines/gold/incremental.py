"""Which groups a gold run must recompute, and where each gold table stands.

Every gold table's commit carries gold's positions (writer `gold`, pipelines/lake/positions.py;
same commit as its rows):

* `gold:<input>` = the Delta version of each input table the run read;
* `gold:params` = a fingerprint (crc32) of the GoldParams and any per-run cluster settings;
* `gold:cluster_settings` = the version of the `cluster_settings` table (-1: none);
* `gold:broker_clocks` = a fingerprint (crc32) of the non-zero clock offsets of silver
  `broker_clocks` (silver rewrites that table whenever the coordinator events change; only
  a new offset changes gold's inputs);
* `gold:format` = FORMAT, the version of gold's columns and their meaning.

A run compares them with the lake. Gold is recomputed per consumer group: a group's rows
in every gold table depend only on that group's silver history, except for the few
cross-group inputs below, which are turned into extra touched groups. The touched groups
are the distinct (cluster, group_id) of the rows added to the group-keyed inputs since the
*smallest* position across the gold tables (a crash between two tables' commits leaves the
later ones behind; the next run recomputes the union of what any table lacks, which is
idempotent because each table's rows are replaced by key).

Cross-group dependencies, and how they are covered:

* holes in `__consumer_offsets` (coverage gaps, episodes "history starts late", skipped
  generations) come from the bronze offsets of the whole coordinator partition: when the
  new bronze rows of a partition open a hole (a jump of more than one offset), or land
  below its previous end (filling a hole), every group with records in it is touched.
  Approximate: the timestamps of a hole's edges come from the nearest records of any
  group; they change only if a hole had no commit or generation record after it before.
* the end of the data per coordinator partition (an open ownership interval's "stop" runs
  to it): groups with an open member interval (gold `ownership_intervals`, `to_ms` null) in
  a partition that got new commits are touched.
* topic names (`topic_ids`, KIP-848): groups whose assignments name a new topic id.
* sampled log-end offsets (`partition_end_offsets`, live): groups with commits on a
  topic-partition that got new samples.
* live-read transactional commits (`pipelines/gold/transactions.py`, told by the one missing offset after
  each batch): groups with a live commit in the last two offsets of a coordinator partition
  before its new bronze rows.

A cluster none of the inputs had at gold's positions (a cluster added to the lake) needs
none of these: all its rows are new, so the groups of its new rows are all its groups, and
gold has no rows of it. The rules above look only at the clusters gold has seen.

A full rebuild (every table overwritten) happens when: a gold table is missing or has no
positions, it was written by a gold of another FORMAT, the parameters' fingerprint changed,
the `cluster_settings` version changed, a broker's clock offset changed, or its inputs
cannot be followed (`stages.Stage.changes`, the rule every incremental stage decides by):
an input table appeared or vanished since, an input's version went backwards, or an input
was not only appended to (rows removed: overwrite, delete, MERGE; bronze apart, read by its
version stamps). A compaction (`OPTIMIZE`, dataChange false) of rows gold had
read is no change: versions that moved by compactions alone leave nothing to do.
"""
from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pipelines import stages
from pipelines.spark import local_frame

from .model import GoldParams

# What gold reads, writes and keeps positions of: pipelines/stages.py (stages.GOLD).
WRITER = stages.GOLD.writer  # the writer of gold's positions (pipelines/lake/positions.py)
PREFIX = stages.GOLD.prefix
PARAMS_ID = PREFIX + "params"
SETTINGS_ID = PREFIX + "cluster_settings"
CLOCKS_ID = PREFIX + "broker_clocks"
FORMAT_ID = PREFIX + "format"
# Raise when a gold table gains a column or a column's meaning changes: a lake written by
# an older gold is then rebuilt whole on its next run. An incremental run recomputes only
# the groups with new input, and would leave the others' new column null or their old
# figures standing. 2: rebalance_episodes' unconsumed_ms, lag_at_start and lag_sampled_at.
FORMAT = 2
KEY = ["cluster", "group_id"]

# The inputs whose versions gold's positions record: what gold reads, the KIP-848 target
# assignment as its append-only epoch/delta tables (the materialized `target_assignments`
# is derived from them by silver), `cluster_settings` apart (SETTINGS_ID).
TRACKED = stages.GOLD.watched()
# Those keyed by (cluster, group_id): new rows touch their groups. The others are
# cross-group dependencies (see above).
GROUP_INPUTS = ("offset_commits", "group_generations", "member_assignments", "consumer_group_epochs",
                "consumer_group_members", "current_assignments", "target_assignment_epochs",
                "target_assignment_member_deltas", "coordinator_events")
BRONZE_OFFSETS = "offsets_records"


def clocks_fingerprint(broker_clocks: Iterable[Mapping]) -> int:
    """crc32 of the non-zero clock offsets (none: that of an empty list, as for a lake
    without the table)."""
    applied = sorted((r["cluster"], int(r["broker"]), int(r["clock_offset_ms"]))
                     for r in broker_clocks if r["clock_offset_ms"])
    return zlib.crc32(json.dumps(applied).encode("utf-8"))


def fingerprint(params: GoldParams, cluster_settings: Iterable[Mapping] | None) -> int:
    """crc32 of the parameters (and the per-run settings rows) as canonical JSON."""
    doc = {"params": dataclasses.asdict(params),
           "cluster_settings": None if cluster_settings is None else sorted(
               (json.dumps(dict(r), sort_keys=True, default=str) for r in cluster_settings))}
    return zlib.crc32(json.dumps(doc, sort_keys=True).encode("utf-8"))


@dataclass
class Plan:
    mode: str  # "full", "incremental" or "none"
    reason: str
    versions: dict[str, int] = field(default_factory=dict)  # tracked input → version read
    since: dict[str, int] = field(default_factory=dict)  # tracked input → smallest gold position (-1: none)
    positions: dict[str, int] = field(default_factory=dict)  # positions for this run's commits


def plan(lake, gold_tables: Iterable[str], params: GoldParams, cluster_settings: Iterable[Mapping] | None,
         broker_clocks: Iterable[Mapping] = ()) -> Plan:
    """Decide full / incremental / nothing to do, from the logs only (no Spark).
    `broker_clocks`: the rows of silver `broker_clocks` (a handful)."""
    from . import settings

    versions = stages.GOLD.versions(lake)
    cs_version = lake.version(settings.TABLE) if lake.exists(settings.TABLE) else -1
    fp = fingerprint(params, cluster_settings)
    clocks_fp = clocks_fingerprint(broker_clocks)
    positions = stages.GOLD.positions(versions)
    positions[PARAMS_ID] = fp
    positions[SETTINGS_ID] = cs_version
    positions[CLOCKS_ID] = clocks_fp
    positions[FORMAT_ID] = FORMAT
    p = Plan("full", "", versions, {}, positions)
    recorded = []
    for name in gold_tables:
        if not lake.exists(name):
            p.reason = f"no gold table {name} yet"
            return p
        got = lake.positions(name, WRITER)
        if PARAMS_ID not in got:
            p.reason = f"gold table {name} has no positions"
            return p
        if got.get(FORMAT_ID) != FORMAT:
            p.reason = f"gold table {name} was written by another gold format ({got.get(FORMAT_ID)}, now {FORMAT})"
            return p
        if got[PARAMS_ID] != fp:
            p.reason = "gold parameters changed"
            return p
        if got.get(SETTINGS_ID, -1) != cs_version:
            p.reason = "cluster settings changed"
            return p
        # Gold written before the clocks were measured had none to apply.
        if got.get(CLOCKS_ID, clocks_fingerprint(())) != clocks_fp:
            p.reason = "a broker's clock offset changed"
            return p
        recorded.append(got)
    # The smallest position across the tables (a crash between two tables' commits leaves
    # the later ones behind); an input some table has no position of appeared since.
    consumed = {t: min(g[PREFIX + t] for g in recorded) for t in TRACKED
                if all(PREFIX + t in g for g in recorded)}
    # Bronze is read by its ingest_version stamps, so rows it lost are no concern.
    changes = stages.GOLD.changes(lake, consumed, versions, follows_rewrite=lambda t, _: t == BRONZE_OFFSETS)
    if changes.rebuild:
        p.reason = changes.rebuild
        return p
    p.since = consumed
    if not any(added for added, _ in changes.files.values()):
        moved = any(consumed[t] != v for t, v in versions.items())
        p.mode, p.reason = "none", "no new input" + (" (only compactions since)" if moved else "")
    else:
        p.mode, p.reason = "incremental", "new input rows"
    return p


def touched_groups(lake, p: Plan):
    """The (cluster, group_id) keys to recompute, as a lazy DataFrame (see module doc)."""
    from pyspark.sql import functions as F

    def new(t):
        return lake.added_since(t, p.since[t]) if t in p.versions and p.since[t] < p.versions[t] else None

    added, fresh = _cluster_changes(lake, p)

    def seen(table):
        """Clusters `table` got new files in that gold has seen before (None: unknown, all).
        Reads of whole tables below are pruned to them in the log: the other clusters'
        files are not scanned."""
        return None if added[table] is None else added[table] - fresh

    parts = []
    new_commits = None
    for t in GROUP_INPUTS:
        df = new(t)
        if df is None:
            continue
        if t == "offset_commits":
            new_commits = df
        parts.append(df.select(*KEY))
    parts += _hole_groups(lake, p, seen(BRONZE_OFFSETS) if BRONZE_OFFSETS in p.versions else set())
    if new_commits is not None and lake.exists("ownership_intervals") and seen("offset_commits") != set():
        # The data end of the coordinator partitions with new commits moved: open intervals there.
        moved = new_commits.where(~F.col("is_deletion")).select("cluster", "coordinator_partition").distinct()
        open_iv = lake.read("ownership_intervals", clusters=seen("offset_commits")).where(F.col("to_ms").isNull() & (F.col("owner_kind") == "member"))
        parts.append(open_iv.join(F.broadcast(moved), ["cluster", "coordinator_partition"], "left_semi").select(*KEY))
    topics = new("topic_ids")
    if topics is not None and seen("topic_ids") != set():
        ids = topics.select("cluster", "topic_id").distinct()
        for t in ("current_assignments", "target_assignments"):
            if lake.exists(t):
                parts.append(lake.read(t, clusters=seen("topic_ids"))
                             .join(F.broadcast(ids), ["cluster", "topic_id"], "left_semi").select(*KEY))
    samples = new("partition_end_offsets")
    if samples is not None and seen("partition_end_offsets") != set():
        tps = samples.select("cluster", "topic", "partition").distinct()
        parts.append(lake.read("offset_commits", clusters=seen("partition_end_offsets"))
                     .join(F.broadcast(tps), ["cluster", "topic", "partition"], "left_semi")
                     .select(*KEY))
    if not parts:
        return None
    out = parts[0]
    for df in parts[1:]:
        out = out.unionByName(df)
    return out.where(F.col("group_id").isNotNull()).distinct()


def _cluster_changes(lake, p: Plan) -> tuple[dict[str, set | None], set]:
    """From the logs: per input, the clusters of its files added since gold's position (None:
    not partitioned by cluster, unknown); and the clusters new to gold, with new files in some
    input and no file in any input at gold's positions (empty when any input's clusters are
    unknown: no shortcut)."""
    from deltalake.exceptions import DeltaError

    from pipelines.lake import LakeError

    added = {t: lake.added_partition_values(t, since, "cluster") for t, since in p.since.items()}
    known: set = set()
    for t, since in p.since.items():
        try:
            old = lake.partition_values(t, "cluster", since) if since >= 0 else set()
        except (DeltaError, LakeError):
            return added, set()  # that version's log is gone: no shortcut, the safe way
        if added[t] is None or old is None:
            return added, set()
        known |= old
    return added, set().union(*added.values()) - known


def _hole_groups(lake, p: Plan, clusters: set | None) -> list:
    """Groups in the coordinator partitions whose set of missing offsets the new bronze
    rows may change (a jump of more than one offset, or rows below the previous end), in
    `clusters` (those gold has seen; None: every cluster)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from .transactions import LIVE_SOURCE, aborted

    t = BRONZE_OFFSETS
    if t not in p.versions or p.since[t] >= p.versions[t] or clusters == set():
        return []
    since = p.since[t]
    new = lake.read_since(t, "ingest_version", since, p.versions[t])
    new = new.select("cluster", "partition", "offset", aborted(new).alias("_aborted"))
    if clusters is not None:
        new = new.where(F.col("cluster").isin(sorted(clusters)))
    ends = lake.partition_max(t, "offset", since) if since >= 0 else {}
    spark = lake.spark
    old = local_frame(spark, [(c, int(part), int(m)) for (c, part), m in ends.items()],
                                "cluster string, partition int, _old_end long")
    w = Window.partitionBy("cluster", "partition").orderBy("offset")
    n = new.join(F.broadcast(old), ["cluster", "partition"], "left") \
        .withColumn("_prev", F.coalesce(F.lag("offset").over(w), F.col("_old_end")))
    # A record of an aborted transaction makes its group transactional, which can turn the
    # partition's earlier runs of missing offsets into markers (transactions.without_marker_runs).
    changed = n.where(F.col("_old_end").isNull() | (F.col("offset") < F.col("_old_end"))
                      | (F.col("offset") - F.col("_prev") > 2) | F.col("_aborted")) \
        .select("cluster", F.col("partition").alias("coordinator_partition")).distinct()
    out = []
    for s in ("offset_commits", "group_generations"):
        if lake.exists(s):
            out.append(lake.read(s, clusters=clusters)
                       .join(F.broadcast(changed), ["cluster", "coordinator_partition"], "left_semi").select(*KEY))
    if lake.exists("offset_commits") and ends:
        # A live-read commit batch at the old end: whether exactly one offset (a COMMIT
        # marker) followed it is known only from the new rows (pipelines/gold/transactions.py).
        tail = local_frame(spark, [(c, int(part), int(m) - 1) for (c, part), m in ends.items()],
                                     "cluster string, coordinator_partition int, _tail long")
        grew = new.select("cluster", F.col("partition").alias("coordinator_partition")).distinct()
        out.append(lake.read("offset_commits", clusters=clusters).where(F.col("source") == LIVE_SOURCE)
                   .join(F.broadcast(tail), ["cluster", "coordinator_partition"])
                   .where(F.col("log_offset") >= F.col("_tail"))
                   .join(F.broadcast(grew), ["cluster", "coordinator_partition"], "left_semi").select(*KEY))
    return out
