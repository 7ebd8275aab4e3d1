"""Gold, lake-facing: read the silver tables, build the gold tables, write them back.

Gold is a function of silver, recomputed per consumer group (`incremental.py`): a run finds
the groups the silver rows added since the last run touch, rebuilds every gold table for
those groups only from their whole silver history, and replaces their rows by (cluster,
group_id) in one commit per table (`Lake.replace_rows`), with the input versions it read as
positions. Nothing new: no Spark job, no commit. The first run, and any run after
the parameters, the cluster settings or an input's history changed, rebuilds everything
(each table overwritten). Either way the tables equal a rebuild from scratch. The tables
are written a few at a time (`pipelines.spark.write_concurrently`), each in a commit of its
own, `group_summary` last.

Per-cluster settings the records do not hold (heartbeat intervals, KIP-848 broker session
settings) come from the lake table `cluster_settings` when it exists (see `settings.py`;
`write_cluster_settings` stores them), else from `GoldParams`' defaults.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pipelines import stages
from pipelines.lake import Positions
from pipelines.spark import local_frame, reliable_checkpoints, write_concurrently

from pipelines.silver import clocks as silver_clocks

from . import clocks, incremental, settings, summary, transactions
from .model import GoldInputs, GoldParams

log = logging.getLogger(__name__)

# The gold tables, in the order they are written (group_summary last): stages.GOLD.outputs.
GOLD_TABLES = stages.GOLD.outputs
# What gold reads (stages.GOLD.reads): the GoldInputs fields, of which these are required;
# and bronze `offsets_records` (the offsets' holes, `bronze_positions`).
REQUIRED = ("offset_commits", "group_generations", "member_assignments")
INPUT_FIELDS = tuple(t for t in stages.GOLD.reads if t != incremental.BRONZE_OFFSETS)


class GoldInputError(RuntimeError):
    """The lake has no decoded silver to derive gold from."""


# GoldInputs fields holding one row per group event: filtered to the touched groups.
GROUP_KEYED = ("offset_commits", "group_generations", "member_assignments", "consumer_group_epochs",
               "consumer_group_members", "current_assignments", "target_assignments", "coordinator_events")


@dataclass
class GoldRun:
    # Rows each table's commit added (from the files' statistics). Incremental runs rewrite
    # the files holding a touched group whole (copy-on-write), so this counts the other
    # groups' rows of those files too.
    rows_written: dict[str, int] = field(default_factory=dict)
    mode: str = "full"  # full, incremental or none
    reason: str = ""
    groups: int | None = None  # groups recomputed (incremental runs)


def read_inputs(lake, versions: Mapping[str, int] | None = None, keys=None,
                clusters: Iterable[str] | None = None, broker_clocks: list[dict] | None = None) -> GoldInputs:
    """The lake's silver tables as GoldInputs (optional ones when they exist), at
    `versions` where given; with `keys` ((cluster, group_id) DataFrame), the group-keyed
    tables hold only those groups' rows. `clusters` (those of `keys`, known on the driver)
    prunes the reads to those clusters' partitions before the join: an increment of one
    cluster reads none of the others' files. `broker_clocks`: the rows of silver
    `broker_clocks` the times are lined up with (default: the lake's)."""
    from pyspark.sql import functions as F

    missing = [t for t in REQUIRED if not lake.exists(t)]
    if missing:
        raise GoldInputError(f"silver tables missing from the lake: {', '.join(missing)} (run the silver update first)")
    versions = versions or {}
    kw = {t: lake.read(t, versions.get(t), clusters=clusters if t in GROUP_KEYED else None)
          for t in INPUT_FIELDS if lake.exists(t)}
    # Which broker led each coordinator term: from every group's events (lines of no group
    # name the loading broker), before they are narrowed to the touched groups.
    leaders = clocks.term_leaders(kw["coordinator_events"]) if "coordinator_events" in kw else None
    if keys is not None:
        k = F.broadcast(keys)
        for t in GROUP_KEYED:
            if t in kw and "group_id" in kw[t].columns:
                kw[t] = kw[t].join(k, ["cluster", "group_id"], "left_semi")
    if lake.exists("offsets_records"):
        # Where the input has holes (compaction, retention): bronze positions per partition.
        b = lake.read("offsets_records", versions.get("offsets_records"), clusters=clusters)
        b = b.select("cluster", "partition", "offset", "control", "source",
                     transactions.aborted(b).alias("aborted"), transactions.key_group(b).alias("key_group"))
        if keys is not None:
            # Only the coordinator partitions of the touched groups.
            cp = kw["offset_commits"].select("cluster", "coordinator_partition") \
                .unionByName(kw["group_generations"].select("cluster", "coordinator_partition")).distinct() \
                .withColumnRenamed("coordinator_partition", "partition")
            b = b.join(F.broadcast(cp), ["cluster", "partition"], "left_semi")
        kw["bronze_positions"] = b
    if broker_clocks is None:
        broker_clocks = read_broker_clocks(lake)
    return clocks.align(GoldInputs(**kw), leaders, clocks.offsets(broker_clocks))


def read_broker_clocks(lake) -> list[dict]:
    """The lake's broker_clocks rows (none before the first measure)."""
    return lake.read_arrow(silver_clocks.TABLE).to_pylist() if lake.exists(silver_clocks.TABLE) else []


def read_cluster_settings(lake) -> list[dict]:
    """The lake's per-cluster settings rows (none before any were written)."""
    return lake.read_arrow(settings.TABLE).to_pylist() if lake.exists(settings.TABLE) else []


def fill_from_broker_configs(lake, cluster: str, configs: Mapping[str, str]) -> dict:
    """The settings a broker printed at start-up (`ingest logs` finds them) fill the
    cluster's settings nobody gave; returns what was filled."""
    if not configs:
        return {}
    return fill_cluster_settings(lake, settings.from_broker_configs(cluster, configs))


def fill_cluster_settings(lake, row: Mapping) -> dict:
    """Fill the cluster's settings nobody has given from `row` (found in the evidence, such
    as a broker's logged configuration); returns what was filled (nothing: the table is
    not written, so gold does not rebuild)."""
    stored = [r for r in read_cluster_settings(lake) if r["cluster"] == row["cluster"]]
    current = dict(stored[0]) if stored else {"cluster": row["cluster"]}
    filled = {k: v for k, v in row.items() if k != "cluster" and v is not None and current.get(k) is None}
    if filled:
        write_cluster_settings(lake, [{**current, **filled}])
    return filled


def give_cluster_settings(lake, cluster: str, broker_properties: str | None = None,
                          client_heartbeat_ms: int | None = None) -> bool:
    """Store what a user gives for `cluster` (`run --broker-properties/--client-heartbeat-ms`,
    the Dagster `sources` resource alike): the group.consumer.* timings of a broker's
    server.properties text, the classic clients' heartbeat interval. What is not given keeps
    its stored value. Written only when something changed (a new version makes gold rebuild
    every table), so a schedule passing the same settings every run costs nothing; returns
    whether it wrote. Raises settings.SettingsError for a value that is no duration."""
    stored = [r for r in read_cluster_settings(lake) if r["cluster"] == cluster]
    row = dict(stored[0]) if stored else {"cluster": cluster}
    if broker_properties is not None:
        given = settings.from_broker_properties(cluster, broker_properties)
        row.update({k: v for k, v in given.items() if k != "classic_heartbeat_interval_ms"})
    if client_heartbeat_ms is not None:
        row["classic_heartbeat_interval_ms"] = client_heartbeat_ms
    new = settings.rows_table([row]).to_pylist()[0]  # validated
    if stored and settings.rows_table(stored).to_pylist()[0] == new:
        return False
    write_cluster_settings(lake, [new])
    return True


def write_cluster_settings(lake, rows: Iterable[Mapping]) -> int:
    """Store per-cluster settings, replacing the given clusters' rows; returns the table version."""
    data = settings.rows_table(rows)
    if not lake.exists(settings.TABLE):
        lake.create(settings.TABLE, settings.SCHEMA,
                    description="per-cluster settings gold needs and the records do not hold")
        return lake.append(settings.TABLE, data)
    given = set(data.column("cluster").to_pylist())
    kept = [r for r in read_cluster_settings(lake) if r["cluster"] not in given]
    # The table is a handful of rows: rewrite it whole (every row has a cluster), in one commit.
    return lake.overwrite_where(settings.TABLE, settings.rows_table(kept + data.to_pylist()), "cluster IS NOT NULL")


def update_gold(lake, params: GoldParams | None = None, cluster_settings: Iterable[Mapping] | None = None,
                full: bool = False) -> GoldRun:
    """Bring every gold table up to date with the lake's silver; returns what was written.

    `cluster_settings` (rows as dicts) overrides the lake's `cluster_settings` table for
    this run (part of the parameters' fingerprint: changing it rebuilds everything).
    `full` forces a rebuild of every table.
    """
    from pyspark.sql import functions as F

    from . import build_all

    params = params or GoldParams()
    if not all(lake.exists(t) for t in REQUIRED):
        read_inputs(lake)  # raises the clear error
    # Read once: the offsets the plan fingerprints are the ones the inputs get.
    broker_clocks = read_broker_clocks(lake)
    p = incremental.plan(lake, GOLD_TABLES, params, cluster_settings, broker_clocks)
    if full:
        p.mode, p.reason = "full", "asked for"
    run = GoldRun(mode=p.mode, reason=p.reason)
    log.info("gold: %s run (%s)", p.mode, p.reason)
    if p.mode == "none":
        run.rows_written = {t: 0 for t in GOLD_TABLES}
        return run
    positions = Positions(incremental.WRITER, p.positions)
    keys = None
    if p.mode == "incremental":
        touched = incremental.touched_groups(lake, p)
        found = [] if touched is None else [(r["cluster"], r["group_id"]) for r in touched.collect()]
        run.groups = len(found)
        log.info("gold: %d groups to recompute", len(found))
        if not found:
            # New rows that touch no group: only the positions move.
            for name in GOLD_TABLES:
                lake.append(name, lake.schema(name).empty_table(), positions=positions)
                run.rows_written[name] = 0
            return run
        # Collected once, handed back as a small local relation: every use is a broadcast.
        keys = local_frame(lake.spark, found, "cluster string, group_id string")
    clusters = None if keys is None else {c for c, _ in found}
    inputs = read_inputs(lake, p.versions, keys, clusters=clusters, broker_clocks=broker_clocks)
    if cluster_settings is not None:
        inputs.cluster_settings = settings.to_spark(lake.spark, cluster_settings)
    written: dict[str, int] = {}

    def write(name, df) -> None:
        if keys is None:
            version = lake.write_df(name, df, mode="overwrite", partition_by=["cluster"], positions=positions)
        else:
            version = lake.replace_rows(name, df, keys, incremental.KEY, partition_by=["cluster"],
                                        positions=positions, key_partitions={(c,) for c, _ in found})
        written[name] = version
        run.rows_written[name] = lake.commit_rows(name, version)
        log.info("gold %s: %d rows written", name, run.rows_written[name])

    # On a cluster, the results build_all pins go to storage under the lake (see pin).
    with reliable_checkpoints(lake.spark, lake.root):
        write_concurrently(lake.spark, write, build_all(inputs, params))
    # The summary folds the tables just written (their rows of the groups this run covers),
    # so its figures are those tables' by construction; written last, so a run killed
    # before it recomputes it (it is behind) from tables already up to date.
    tables = {}
    for name in summary.READS:
        # Only the touched clusters' files: the other clusters' rows would be read to be dropped.
        t = lake.read(name, written[name], clusters=clusters)
        tables[name] = t if keys is None else t.join(F.broadcast(keys), incremental.KEY, "left_semi")
    write(summary.TABLE, summary.build_group_summary(tables, inputs))
    return run
