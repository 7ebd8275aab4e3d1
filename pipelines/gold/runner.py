"""Gold, lake-facing: read the silver tables, build every gold table, write them back.

Gold is a function of silver: each run recomputes every table from the whole of silver and
replaces it, cluster partition by cluster partition (`overwrite`), so a run is always
consistent with the silver it read and running it twice gives the same tables.

Per-cluster settings the records do not hold (heartbeat intervals, KIP-848 broker session
settings) come from the lake table `cluster_settings` when it exists (see `settings.py`;
`write_cluster_settings` stores them), else from `GoldParams`' defaults.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from . import settings
from .model import GoldInputs, GoldParams

log = logging.getLogger(__name__)

GOLD_TABLES = (
    "ownership_intervals",
    "commit_attribution",
    "rebalance_episodes",
    "duplicate_windows",
    "skip_windows",
    "commit_anomalies",
    "idle_consumers",
    "rebalance_storms",
    "coverage_gaps",
)

# Silver (and bronze/live) tables → GoldInputs fields. The first three are required.
REQUIRED = ("offset_commits", "group_generations", "member_assignments")
OPTIONAL = ("consumer_group_epochs", "consumer_group_members", "current_assignments", "target_assignments",
            "topic_ids", "coordinator_events", "partition_end_offsets", settings.TABLE)


class GoldInputError(RuntimeError):
    """The lake has no decoded silver to derive gold from."""


@dataclass
class GoldRun:
    rows_written: dict[str, int] = field(default_factory=dict)


def read_inputs(lake) -> GoldInputs:
    """The lake's silver tables as GoldInputs (optional ones when they exist)."""
    missing = [t for t in REQUIRED if not lake.exists(t)]
    if missing:
        raise GoldInputError(f"silver tables missing from the lake: {', '.join(missing)} (run the silver update first)")
    kw = {t: lake.read(t) for t in REQUIRED}
    kw.update({t: lake.read(t) for t in OPTIONAL if lake.exists(t)})
    if lake.exists("offsets_records"):
        # Where the input has holes (compaction, retention): bronze positions per partition.
        kw["bronze_positions"] = lake.read("offsets_records").select("cluster", "partition", "offset", "control")
    return GoldInputs(**kw)


def write_cluster_settings(lake, rows: Iterable[Mapping]) -> int:
    """Store per-cluster settings, replacing the given clusters' rows; returns the table version."""
    data = settings.rows_table(rows)
    if not lake.exists(settings.TABLE):
        lake.create(settings.TABLE, settings.SCHEMA,
                    description="per-cluster settings gold needs and the records do not hold")
        return lake.append(settings.TABLE, data)
    given = set(data.column("cluster").to_pylist())
    kept = [r for r in lake.read_arrow(settings.TABLE).to_pylist() if r["cluster"] not in given]
    # The table is a handful of rows: rewrite it whole (every row has a cluster), in one commit.
    return lake.overwrite_where(settings.TABLE, settings.rows_table(kept + data.to_pylist()), "cluster IS NOT NULL")


def update_gold(lake, params: GoldParams | None = None, cluster_settings: Iterable[Mapping] | None = None) -> GoldRun:
    """Rebuild every gold table from the lake's silver; returns the rows written per table.

    `cluster_settings` (rows as dicts) overrides the lake's `cluster_settings` table for this run.
    """
    from . import build_all

    inputs = read_inputs(lake)
    if cluster_settings is not None:
        inputs.cluster_settings = settings.to_spark(lake.spark, cluster_settings)
    run = GoldRun()
    for name, df in build_all(inputs, params).items():
        df = df.localCheckpoint(eager=True)  # computed once, for the count and the write
        n = df.count()
        lake.write_df(name, df, mode="overwrite", partition_by=["cluster"])
        run.rows_written[name] = n
        log.info("gold %s: %d rows", name, n)
    return run
