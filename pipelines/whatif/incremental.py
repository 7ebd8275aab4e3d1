"""The what-if tables, kept up to date incrementally.

A group's replay depends only on its own silver history, plus two things shared by its
cluster: the partition count of each topic (the highest partition seen anywhere, or the
count Kafka stored) and nothing else. So a run replays:

* every group with a row added to one of the silver tables it reads (`WATCHED`) since the
  last run, and the groups of the `rebalance_episodes` files gold rewrote since then (added
  and removed: a group left with no episode is replayed, and loses rows it no longer has);
* every group subscribed, at any step of its history, to a topic whose partition count
  changed (a new topic, more partitions): a group reads the cluster's counts only for the
  topics it subscribes to (`history.build_history`), so no other group's replay can differ.
  The new groups of a busy cluster usually read new topics: only they are replayed, not the
  cluster's other groups;
* every group of a cluster whose first stored (KIP-848) count appears: from then on the
  stored counts, not the observed ones, are authoritative for all its KIP-848 groups;
* every group when the assignor list changed, when the positions are missing or disagree
  between the what-if tables (first run, or a crash between their commits), or when a
  silver input was rewritten rather than appended to (a backfill renumbering a group).

Versions that moved with no row (a compaction, a commit of positions alone) are told from
the Delta log: no Spark job, no commit.

Each what-if table stores, in the same Delta commit as its rows, the version of each input
table it reflects (positions `whatif:<table>` of the writer `whatif`) and a fingerprint of the assignor list
and of the tables' FORMAT (`whatif:assignors`). The partition counts are kept in `whatif_topic_counts` (cluster,
topic, seen, stored) with the same positions: counts are maxima over append-only tables, so
the previous counts merged with the increment's equal the counts over everything.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import functions as F

from pipelines import stages
from pipelines.lake import Positions
from pipelines.spark import local_frame

from .protocols import DEFAULT_ASSIGNORS
from .spark_job import (WhatifInputs, check_assignors, collect_counts, merge_counts, replay_table, split,
                        topic_count_rows)

# What the replay reads, writes and keeps positions of: pipelines/stages.py (stages.WHATIF).
# The inputs whose versions the positions record: what the replay reads, the KIP-848
# target assignment as its append-only epoch/delta tables (silver rebuilds it whole).
WATCHED = stages.WHATIF.watched()
OUTPUTS = stages.WHATIF.outputs
COUNTS = "whatif_topic_counts"
COUNTS_SCHEMA = pa.schema([pa.field("cluster", pa.string()), pa.field("topic", pa.string()),
                           pa.field("seen", pa.int32()), pa.field("stored", pa.int32())])
WRITER = stages.WHATIF.writer  # the writer of the what-if tables' positions (pipelines/lake/positions.py)
APP = stages.WHATIF.prefix
ASSIGNORS_APP = APP + "assignors"
KEYS = ["cluster", "group_id"]


@dataclass
class WhatifRun:
    mode: str
    """"full" (every group), "incremental" (the changed groups) or "none" (nothing new)."""
    rows_written: dict[str, int] = field(default_factory=dict)
    groups: int | None = None
    """Groups replayed (None: every group, a full rebuild)."""
    clusters_replayed_whole: list[str] = field(default_factory=list)


# The version of the what-if tables' columns and their meaning: a lake written by another
# replays every group once. 2: `segment` (a history per protocol segment of a converted group).
FORMAT = 2


def fingerprint(assignors: list[str]) -> int:
    """The assignor list and FORMAT as a Delta app-transaction version (a non-negative long)."""
    text = f"format {FORMAT}\n" + "\n".join(assignors)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "big")


def stored_positions(lake) -> dict[str, int] | None:
    """The positions the what-if tables agree on, or None (missing, or a crash between commits)."""
    if not all(lake.exists(t) for t in (*OUTPUTS, COUNTS)):
        return None
    found = [lake.positions(t, WRITER) for t in (*OUTPUTS, COUNTS)]
    if not found[0] or any(f != found[0] for f in found[1:]):
        return None
    return found[0]


def _read_counts(lake) -> dict:
    out: dict = {}
    for r in lake.read_arrow(COUNTS).to_pylist():
        out.setdefault(r["cluster"], {})[r["topic"]] = (r["seen"], r["stored"])
    return out


def _write_counts(lake, counts: dict, positions: dict[str, int]) -> None:
    rows = [{"cluster": c, "topic": t, "seen": v[0], "stored": v[1]}
            for c in sorted(counts) for t, v in sorted(counts[c].items())]
    lake.create(COUNTS, COUNTS_SCHEMA, partition_by=None, description="what-if: partition counts per cluster and topic")
    lake.overwrite_where(COUNTS, pa.Table.from_pylist(rows, schema=COUNTS_SCHEMA), "true", positions=Positions(WRITER, positions))


def _has_stored(topics: Mapping) -> bool:
    return any(v[1] is not None for v in topics.values())


def _subscribers(inp: WhatifInputs, topics: Mapping[str, set[str]]) -> set[tuple[str, str]]:
    """The groups that subscribed, in any generation or epoch, to one of `topics` (cluster →
    topic names): the groups whose replay reads those topics' partition counts."""
    if not topics:
        return set()
    subscriptions = [(inp.member_assignments, "subscribed_topics"),
                     (inp.consumer_group_members, "subscribed_topic_names")]
    found = None
    for df, column in subscriptions:
        if df is None:
            continue
        cond = F.lit(False)
        for cluster, names in sorted(topics.items()):
            cond = cond | ((F.col("cluster") == cluster)
                           & F.arrays_overlap(F.col(column), F.array(*[F.lit(t) for t in sorted(names)])))
        part = df.where(cond).select(*KEYS)
        found = part if found is None else found.unionByName(part)
    if found is None:
        return set()
    return {(r["cluster"], r["group_id"]) for r in found.distinct().collect()}


def _counter(spark):
    return spark.sparkContext.accumulator(0), spark.sparkContext.accumulator(0)


def update(lake, assignors=None, full: bool = False) -> WhatifRun:
    """Bring `whatif_episodes` / `whatif_summary` up to date (`full`: replay every group)."""
    assignors = check_assignors(list(assignors or DEFAULT_ASSIGNORS))
    current = stages.WHATIF.versions(lake)
    positions = stages.WHATIF.positions(current)
    positions[ASSIGNORS_APP] = fingerprint(assignors)
    prev = stored_positions(lake)
    full = full or prev is None or prev.get(ASSIGNORS_APP) != positions[ASSIGNORS_APP]
    changes: dict[str, tuple[dict, dict]] = {}
    if not full and prev is not None:
        found = stages.WHATIF.changes(lake, stages.WHATIF.consumed(prev), current,
                                      follows_rewrite=lambda t, removed: not _rewritten(lake, t, removed))
        if found.nothing:
            # Versions moved, no row did (a compaction, a commit of positions alone), or
            # none moved: the check is the log's, no Spark job; the positions catch up at
            # the next change.
            return WhatifRun("none", {t: 0 for t in OUTPUTS}, 0)
        full, changes = bool(found.rebuild), found.files
    if full or prev is None:
        return _rebuild(lake, WhatifInputs.from_lake(lake), assignors, positions)
    # A group's replay reads its own cluster's rows only: the inputs are read from the
    # changed clusters' files alone (a filter on `cluster` would scan every cluster's).
    inp = WhatifInputs.from_lake(lake, clusters=_clusters_of(changes))
    return _increment(lake, inp, assignors, positions, changes)


def _clusters_of(changes: Mapping[str, tuple[dict, dict]]) -> set[str] | None:
    """The clusters of the files added or removed (None: a file of a table not partitioned
    by cluster, which may hold rows of any)."""
    out = set()
    for added, removed in changes.values():
        for values in (*added.values(), *removed.values()):
            if values.get("cluster") is None:
                return None
            out.add(values["cluster"])
    return out


def _rewritten(lake, table: str, removed: Mapping) -> bool:
    """Whether rows of `table` went away in a way an increment cannot follow. Gold replaces
    its tables' rows group by group (copy-on-write): the groups of the files it removed are
    replayed, which needs those files (not vacuumed yet). Silver only appends, but for a
    backfill that renumbers a group's history, and a partition count (a maximum) cannot
    go down incrementally: any rewrite there replays every group, as gold's does."""
    if not removed:
        return False
    if table not in stages.GOLD.outputs:
        return True
    return not all(lake.file_exists(uri) for uri in removed)


def _rebuild(lake, inp: WhatifInputs, assignors: list[str], positions: dict[str, int]) -> WhatifRun:
    counts = collect_counts(topic_count_rows(inp.member_assignments, inp.offset_commits, inp.target_assignments,
                                             inp.topic_ids))
    acc = _counter(lake.spark)
    combined = replay_table(inp, assignors, counts, counter=acc).cache()
    episodes, summary = split(combined)
    for name, df in (("whatif_episodes", episodes), ("whatif_summary", summary)):
        lake.write_df(name, df, mode="overwrite", partition_by=["cluster"], positions=Positions(WRITER, positions))
    combined.unpersist()
    _write_counts(lake, counts, positions)
    return WhatifRun("full", {"whatif_episodes": acc[0].value, "whatif_summary": acc[1].value})


def _increment(lake, inp: WhatifInputs, assignors: list[str], positions: dict[str, int],
               changes: dict[str, tuple[dict, dict]]) -> WhatifRun:
    """Replay the groups with rows in the files `changes` names per input ((added, removed),
    from `Lake.file_changes`; removed ones only of gold's tables, see `_rewritten`)."""
    spark = lake.spark
    changed = list(changes)
    added = {}
    for t, (new, gone) in changes.items():
        added[t] = lake.rows_of_files(t, new)
        if gone:
            # A group whose rows gold removed without new ones (none left) is replayed too.
            added[t] = added[t].unionByName(lake.rows_of_files(t, gone))
    # One aggregation (one shuffle) over every added row gives both the groups with new
    # history (rows with a group) and the increment's partition counts (rows with a topic).
    # topic_ids rows are a cluster's topic metadata, not a group's history.
    # target_assignments is derived from the epoch/delta tables; all of it is few rows
    # (KIP-848 records), so its counts are read whole when those tables changed.
    parts = []
    null_s, null_i = F.lit(None).cast("string"), F.lit(None).cast("int")
    for t in changed:
        if t != "topic_ids":
            parts.append(added[t].select(*KEYS, null_s.alias("topic"), null_i.alias("seen"), null_i.alias("stored")))
    counted = {"member_assignments": added.get("member_assignments"), "offset_commits": added.get("offset_commits")}
    if any(t in added for t in ("target_assignment_epochs", "target_assignment_member_deltas")):
        counted["target_assignments"] = inp.target_assignments
    for df in counted.values():
        if df is not None:
            parts.append(df.where(F.col("topic").isNotNull()).select(
                "cluster", null_s.alias("group_id"), "topic", (F.col("partition") + 1).cast("int").alias("seen"),
                null_i.alias("stored")))
    if "topic_ids" in added:
        parts.append(added["topic_ids"].where(F.col("num_partitions").isNotNull()).select(
            "cluster", null_s.alias("group_id"), "topic", null_i.alias("seen"),
            F.col("num_partitions").cast("int").alias("stored")))
    touched: set[tuple[str, str]] = set()
    increment: dict = {}
    if parts:
        union = parts[0]
        for p in parts[1:]:
            union = union.unionByName(p)
        agg = union.groupBy("cluster", "group_id", "topic").agg(F.max("seen").alias("seen"), F.max("stored").alias("stored"))
        for r in agg.collect():
            if r["topic"] is None:
                if r["group_id"] is not None:
                    touched.add((r["cluster"], r["group_id"]))
            else:
                increment.setdefault(r["cluster"], {})[r["topic"]] = (r["seen"], r["stored"])
    old = _read_counts(lake)
    counts = merge_counts(old, increment)
    full_clusters = sorted(c for c in counts if _has_stored(counts[c]) != _has_stored(old.get(c, {})))
    recounted = {c: {t for t, v in topics.items() if old.get(c, {}).get(t) != v}
                 for c, topics in counts.items() if c not in full_clusters}
    touched |= _subscribers(inp, {c: t for c, t in recounted.items() if t})
    if not touched and not full_clusters:
        for name in OUTPUTS:  # only the positions move on
            lake.append(name, lake.schema(name).empty_table(), positions=Positions(WRITER, positions))
        _write_counts(lake, counts, positions)
        return WhatifRun("incremental", {t: 0 for t in OUTPUTS}, 0)

    clusters = sorted({c for c, _ in touched})
    groups = sorted({g for _, g in touched})
    wanted_set = set(touched)
    full_set = set(full_clusters)

    def keep(df):
        # Coarse (cluster in C and group in G may pair a group with another cluster's name):
        # the exact test runs per group in `wanted`.
        cond = F.col("cluster").isin(clusters) & F.col("group_id").isin(groups)
        if full_set:
            cond = cond | F.col("cluster").isin(full_clusters)
        return df.where(cond)

    def wanted(cluster, group_id):
        return cluster in full_set or (cluster, group_id) in wanted_set

    acc = _counter(spark)
    combined = replay_table(inp, assignors, counts, keep=keep, wanted=wanted, counter=acc).cache()
    episodes, summary = split(combined)
    # The keys whose rows are replaced, known on the driver: the touched groups, and for a
    # cluster replayed whole, every group it has rows of (a group with any history has).
    key_set = set(touched)
    if full_clusters and lake.exists("whatif_summary"):
        import pyarrow.dataset as ds

        old_keys = lake.read_arrow("whatif_summary", columns=KEYS, filter=ds.field("cluster").isin(full_clusters))
        key_set |= set(zip(old_keys.column("cluster").to_pylist(), old_keys.column("group_id").to_pylist()))
    keys = local_frame(spark, sorted(key_set), "cluster string, group_id string")
    for name, df in (("whatif_episodes", episodes), ("whatif_summary", summary)):
        lake.replace_rows(name, df, keys, KEYS, partition_by=["cluster"], positions=Positions(WRITER, positions),
                          key_partitions={(c,) for c, _ in key_set})
    combined.unpersist()
    _write_counts(lake, counts, positions)
    rows = {"whatif_episodes": acc[0].value, "whatif_summary": acc[1].value}
    replayed = None if full_clusters else len(touched)
    return WhatifRun("incremental", rows, replayed, full_clusters)
