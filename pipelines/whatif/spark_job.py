"""What-if replay over every group, distributed with Spark.

`raw_rows(inputs)` projects every silver row the replay needs into one tagged table;
`whatif_tables(inputs, assignors)` groups it by (cluster, group_id) in ONE shuffle and runs,
per group on the executors (`applyInArrow`), the assembly of its history (`assemble`), the
Python assignors and the summary: nothing per group runs on the driver, and a run costs a
handful of Spark jobs whatever the number of groups. `update_whatif(lake, ...)` keeps
`whatif_episodes` and `whatif_summary` up to date incrementally (`incremental`).

`history_rows(inputs)` is the same history as Spark joins (one row per group, step, member,
partition): the reference the per-group assembly is tested against, and a way to inspect a
history with Spark.

Episode durations: gold `rebalance_episodes.duration_ms` where that table is given; else the
coordinator's "Preparing to rebalance" line (silver `coordinator_events`) up to the
generation record; else only the sync phase the record itself bounds (record timestamp −
currentStateTimestamp: a lower bound). KIP-848 epochs: from the target epoch's record to the
last member record reaching that epoch (`current_assignments`). `duration_source` says which.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from pipelines import stages
from pipelines.spark import local_frame

from .schemas import WHATIF_EPISODES, WHATIF_SUMMARY

_EXTRA = [pa.field("_divergence_list", pa.string()), pa.field("_notes", pa.string()), pa.field("_steps", pa.int32()),
          pa.field("_commit_interval_ms", pa.float64()), pa.field("_records_per_partition_s", pa.float64())]
EPISODES_WITH_EXTRAS = pa.schema(list(WHATIF_EPISODES) + _EXTRA)


@dataclass
class WhatifInputs:
    """Silver (and optionally gold) tables the replay reads, one field per table of
    `stages.WHATIF.reads`. Only the classic two are required."""

    group_generations: DataFrame
    member_assignments: DataFrame
    offset_commits: DataFrame | None = None
    coordinator_events: DataFrame | None = None
    rebalance_episodes: DataFrame | None = None
    target_assignments: DataFrame | None = None
    consumer_group_members: DataFrame | None = None
    current_assignments: DataFrame | None = None
    topic_ids: DataFrame | None = None

    @classmethod
    def from_lake(cls, lake, clusters: Iterable[str] | None = None) -> "WhatifInputs":
        """The lake's tables; with `clusters`, only those clusters' files of each table
        partitioned by cluster (chosen from the Delta log)."""
        if not lake.exists("group_generations") and not lake.exists("target_assignments"):
            raise ValueError(f"no group history in the lake at {lake.root}: run silver first (group_generations missing)")
        kw: dict[str, Any] = {t: lake.read(t, clusters=clusters) if lake.exists(t) else None
                              for t in stages.WHATIF.reads}
        if kw["group_generations"] is None or kw["member_assignments"] is None:
            for name, ddl in (("group_generations", _GG_MIN), ("member_assignments", _MA_MIN)):
                if kw[name] is None:
                    kw[name] = _empty(lake.spark, ddl)
        return cls(**kw)


_GG_MIN = "cluster string, group_id string, incarnation int, generation int, is_deletion boolean, protocol_type string, " \
          "protocol string, current_state_ts timestamp, member_count int, coordinator_partition int, log_offset long, record_ts timestamp"
_MA_MIN = "cluster string, group_id string, generation int, member_id string, group_instance_id string, client_id string, " \
          "subscribed_topics array<string>, topic string, partition int, coordinator_partition int, log_offset long"


def _empty(spark, ddl: str) -> DataFrame:
    return local_frame(spark, [], ddl)


# ----------------------------------------------------------------------------- the replay job
# Every silver row a group's history needs, in one long table tagged by source (see
# `assemble`): one shuffle groups them by (cluster, group_id) and one Python call per group
# builds its histories, replays them and summarizes them. Spark joins per source would cost
# a shuffle (and, with adaptive execution, a Spark job) each.
RAW_SCHEMA = pa.schema([
    pa.field("cluster", pa.string()), pa.field("group_id", pa.string()), pa.field("_src", pa.string()),
    pa.field("cp", pa.int32()), pa.field("off", pa.int64()), pa.field("ts_us", pa.int64()), pa.field("ts2_us", pa.int64()),
    pa.field("inc", pa.int32()), pa.field("gen", pa.int32()), pa.field("protocol", pa.string()),
    pa.field("member_id", pa.string()), pa.field("instance_id", pa.string()), pa.field("client_id", pa.string()),
    pa.field("topics", pa.list_(pa.string())), pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
    pa.field("flag", pa.bool_()), pa.field("dur", pa.float64()), pa.field("n", pa.int64()),
    pa.field("o0", pa.int64()), pa.field("o1", pa.int64()),
])

SUMMARY_PREFIX = "s_"
OUT_SCHEMA = pa.schema(list(WHATIF_EPISODES) + [pa.field(SUMMARY_PREFIX + f.name, f.type) for f in WHATIF_SUMMARY]
                       + [pa.field("_table", pa.string())])


def _us(col) -> F.Column:
    return F.unix_micros(F.col(col) if isinstance(col, str) else col)


def _raw(df: DataFrame, src: str, **cols) -> DataFrame:
    out = [F.col("cluster"), F.col("group_id"), F.lit(src).alias("_src")]
    for f in RAW_SCHEMA:
        if f.name in ("cluster", "group_id", "_src"):
            continue
        c = cols.get(f.name)
        typ = from_arrow_schema(pa.schema([f]))[0].dataType
        out.append((F.lit(None) if c is None else (F.col(c) if isinstance(c, str) else c)).cast(typ).alias(f.name))
    return df.select(*out)


def raw_rows(inp: WhatifInputs, keep=None) -> DataFrame:
    """Every input row of the replay, tagged by source; `keep(df)` narrows each input to
    the groups to replay (an incremental run)."""
    def k(df):
        return df if keep is None else keep(df)

    parts = []
    g = k(inp.group_generations).where(
        ~F.col("is_deletion") & F.col("generation").isNotNull()
        # Consumer groups only (Connect and others use their own protocols), plus empty generations.
        & ((F.col("protocol_type") == "consumer") | (F.coalesce(F.col("member_count"), F.lit(0)) == 0))
        # The new coordinator's generation-0 creation record carries no membership.
        & ~((F.col("generation") == 0) & (F.coalesce(F.col("member_count"), F.lit(0)) == 0)))
    parts.append(_raw(g, "gg", inc=F.coalesce("incarnation", F.lit(0)), gen="generation", protocol="protocol",
                      cp="coordinator_partition", off="log_offset", ts_us=_us("record_ts"), ts2_us=_us("current_state_ts")))
    parts.append(_raw(k(inp.member_assignments), "ma", cp="coordinator_partition", off="log_offset", member_id="member_id",
                      instance_id="group_instance_id", client_id="client_id", topics="subscribed_topics", topic="topic",
                      partition="partition"))
    if inp.coordinator_events is not None:
        ev = k(inp.coordinator_events).where(F.col("event") == "rebalance_started")
        parts.append(_raw(ev, "ev", ts_us=_us("event_ts")))
    if inp.rebalance_episodes is not None:
        ep = k(inp.rebalance_episodes).where(F.col("duration_ms").isNotNull())
        parts.append(_raw(ep, "ep", inc="incarnation", gen="to_generation", dur="duration_ms"))
    if inp.target_assignments is not None and inp.consumer_group_members is not None:
        parts.append(_raw(k(inp.target_assignments), "ta", cp="coordinator_partition", gen="assignment_epoch",
                          off="epoch_offset", ts_us=_us("epoch_ts"), member_id="member_id", topic="topic",
                          partition="partition"))
        parts.append(_raw(k(inp.consumer_group_members), "cm", cp="coordinator_partition", member_id="member_id",
                          flag="is_deletion", instance_id="instance_id", client_id="client_id",
                          topics="subscribed_topic_names", protocol="server_assignor", off="log_offset"))
        if inp.current_assignments is not None:
            ca = k(inp.current_assignments).where(~F.col("is_deletion"))
            parts.append(_raw(ca, "ca", gen="member_epoch", ts_us=_us("record_ts")))
    if inp.offset_commits is not None:
        c = k(inp.offset_commits).where(~F.col("is_deletion") & F.col("offset").isNotNull())
        ts = F.coalesce("commit_ts", "record_ts")
        # Per partition first (partial aggregation before the shuffle): commits are the bulk of the lake.
        per = c.groupBy("cluster", "group_id", "topic", "partition").agg(
            F.count("*").alias("_n"), F.min(ts).alias("_t0"), F.max(ts).alias("_t1"),
            F.min("offset").alias("_o0"), F.max("offset").alias("_o1"))
        parts.append(_raw(per, "cs", topic="topic", partition="partition", n="_n", ts_us=_us("_t0"),
                          ts2_us=_us("_t1"), o0="_o0", o1="_o1"))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def topic_count_rows(member_assignments: DataFrame | None, offset_commits: DataFrame | None,
                     target_assignments: DataFrame | None, topic_ids: DataFrame | None) -> DataFrame | None:
    """(cluster, topic, seen, stored): highest partition seen + 1 in any table, and the count
    Kafka stored (KIP-848 topic metadata), over the rows given."""
    parts = []
    for df in (member_assignments, offset_commits, target_assignments):
        if df is not None:
            parts.append(df.where(F.col("topic").isNotNull()).select(
                "cluster", "topic", (F.col("partition") + 1).alias("seen"), F.lit(None).cast("int").alias("stored")))
    if topic_ids is not None:
        parts.append(topic_ids.where(F.col("num_partitions").isNotNull()).select(
            "cluster", "topic", F.lit(None).cast("int").alias("seen"), F.col("num_partitions").cast("int").alias("stored")))
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out.groupBy("cluster", "topic").agg(F.max("seen").alias("seen"), F.max("stored").alias("stored"))


def collect_counts(df: DataFrame | None) -> dict[str, dict[str, tuple]]:
    """cluster → topic → (seen, stored)."""
    out: dict[str, dict[str, tuple]] = {}
    if df is None:
        return out
    for r in df.collect():
        out.setdefault(r["cluster"], {})[r["topic"]] = (r["seen"], r["stored"])
    return out


def merge_counts(a: dict, b: dict) -> dict:
    """Counts are maxima over append-only tables: an increment's merge with the previous ones."""
    def mx(x, y):
        return y if x is None else x if y is None else max(x, y)

    out = {c: dict(t) for c, t in a.items()}
    for c, topics in b.items():
        cur = out.setdefault(c, {})
        for t, (seen, stored) in topics.items():
            old = cur.get(t, (None, None))
            cur[t] = (mx(old[0], seen), mx(old[1], stored))
    return out


def _cluster_maps(counts: dict) -> dict[str, tuple[dict, str | None]]:
    """cluster → (fallback partition counts, KIP-848 stored counts as JSON)."""
    from .assemble import stored_counts_json

    out = {}
    for c, topics in counts.items():
        fallback = {t: max(x for x in v if x is not None) for t, v in topics.items() if any(x is not None for x in v)}
        stored = {t: v[1] for t, v in topics.items() if v[1] is not None}
        out[c] = (fallback, stored_counts_json(stored))
    return out


def _replay_fn(assignors: list[str], counts: dict, has_events: bool, has_current: bool, wanted=None, counter=None):
    """The per-group Python call: raw rows → episodes and summary rows (one table, `_table` e/s).
    `wanted(cluster, group_id)`: False for a group the coarse Spark filter let through.
    `counter`: two Spark accumulators counting the episode and summary rows made (the rows
    written, without a Spark job to count them)."""
    maps = _cluster_maps(counts)
    s_names = [f.name for f in WHATIF_SUMMARY]

    def run(table: pa.Table) -> pa.Table:
        from pipelines.whatif.assemble import group_histories
        from pipelines.whatif.history import build_history
        from pipelines.whatif.rows import replay_group_rows, summarize

        if table.num_rows == 0:
            return OUT_SCHEMA.empty_table()
        cluster, group_id = table.column("cluster")[0].as_py(), table.column("group_id")[0].as_py()
        if wanted is not None and not wanted(cluster, group_id):
            return OUT_SCHEMA.empty_table()
        fallback, stored = maps.get(cluster, ({}, None))
        hists = group_histories(cluster, group_id, table.to_pylist(), has_events=has_events, has_current=has_current,
                                topic_counts=stored)
        episodes = []
        for key in sorted(hists):
            episodes.extend(replay_group_rows(build_history(hists[key], fallback), assignors))
        rows = [{**{n: e[n] for n in WHATIF_EPISODES.names}, "_table": "e"} for e in episodes]
        summary = summarize(episodes)
        rows += [{**{SUMMARY_PREFIX + n: s[n] for n in s_names}, "_table": "s"} for s in summary]
        if counter is not None:
            counter[0].add(len(episodes))
            counter[1].add(len(summary))
        return pa.Table.from_pylist(rows, schema=OUT_SCHEMA)

    return run


def replay_table(inp: WhatifInputs, assignors: list[str], counts: dict, keep=None, wanted=None,
                 counter=None) -> DataFrame:
    """Episodes and summary rows of the groups of `inp` (narrowed by `keep`/`wanted`), one DataFrame."""
    raw = raw_rows(inp, keep)
    fn = _replay_fn(list(assignors), counts, inp.coordinator_events is not None, inp.current_assignments is not None,
                    wanted, counter)
    return raw.groupBy("cluster", "group_id").applyInArrow(fn, from_arrow_schema(OUT_SCHEMA))


def split(combined: DataFrame) -> tuple[DataFrame, DataFrame]:
    episodes = combined.where(F.col("_table") == "e").select(*WHATIF_EPISODES.names)
    summary = combined.where(F.col("_table") == "s").select(
        *[F.col(SUMMARY_PREFIX + n).alias(n) for n in WHATIF_SUMMARY.names])
    return episodes, summary


def check_assignors(assignors) -> list[str]:
    from .protocols import protocol_of

    for a in assignors:
        protocol_of(a)  # unknown names fail here, on the driver, with the list of known ones
    return list(assignors)


def whatif_tables(inp: WhatifInputs, assignors: list[str]) -> tuple[DataFrame, DataFrame]:
    """(whatif_episodes, whatif_summary) for every group of the inputs."""
    assignors = check_assignors(assignors)
    counts = collect_counts(topic_count_rows(inp.member_assignments, inp.offset_commits, inp.target_assignments,
                                             inp.topic_ids))
    combined = replay_table(inp, assignors, counts).cache()
    return split(combined)


def update_whatif(lake, assignors: list[str] | None = None, full: bool = False) -> dict[str, int]:
    """Replay the groups whose silver history changed since the last run (every group the
    first time, when the assignor list changed, or with `full`) and replace their rows of
    `whatif_episodes` / `whatif_summary`. Returns the rows written per table
    (`incremental.update` returns the whole run description)."""
    from .incremental import update

    return update(lake, assignors, full=full).rows_written
