"""group_summary: one row per consumer group with the figures every page, tile and `sql` quotes.

Each measure is defined here, once: the report's overview and group pages read these rows as
they are, and a `sql` user gets the same numbers from `group_summary`. The figures fold the
group's rows of the other gold tables (as just written, so the same definitions they were
built with) and of three silver tables (which groups exist, which partitions they commit
to, when). One union of the inputs and one groupBy: a single shuffle.

Definitions (docs/gold.md has the table's columns):

* `rebalances`: logical rebalances (a cooperative rebalance's two rounds are one; a
  transition into or out of Empty, a group starting or everyone leaving, is not one);
  `episodes`: the episode rows (generations or KIP-848 epochs);
* `incomplete_rebalances`: episodes with no completion. Compaction and retention never make
  one: an episode whose completion compaction removed takes it from the coordinator's log,
  and one the records cannot date at all is a coverage gap, not an episode;
* `rebalancing_ms`: the sum of the durations the coordinator's log gives; null ("unknown")
  when the group rebalanced and no episode has a known duration (no `server.log`: the
  rebalances took time, just no known amount); `rebalances_without_duration` says how many
  episodes the sum leaves out;
* `unconsumed_ms`: the sum of the episodes' `unconsumed_ms` (partitions standing still from
  the old owner's last sign of life to the new owner's start), null when none is known;
* `records_at_risk`: the estimated records of the duplicate windows (at least 0 each);
* `idle_members`: distinct members idle for a whole generation or epoch;
  `transient_idle_members`: distinct members only ever idle in a transient state (a
  cooperative handover between its rounds, KIP-848 reconciliation), labelled apart, never
  dropped;
* the other counts are the rows of the table they are named for.
"""
from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .model import GoldInputs

TABLE = "group_summary"
KEY = ("cluster", "group_id")
# The gold tables the summary folds (read back as written).
READS = ("rebalance_episodes", "ownership_intervals", "duplicate_windows", "skip_windows", "idle_consumers",
         "rebalance_storms", "commit_anomalies", "coverage_gaps", "consumer_lag")

COLUMNS = (
    "cluster", "group_id", "protocol_kind", "rebalances", "episodes", "incomplete_rebalances", "rebalancing_ms",
    "rebalances_without_duration", "unconsumed_ms", "partitions_moved", "partitions_revoked", "last_rebalance_at",
    "duplicate_windows", "records_at_risk", "skip_windows", "skipped_records", "idle_members",
    "transient_idle_members", "idle_spans", "storms", "commit_anomalies", "coverage_gaps", "ownership_intervals",
    "committed_partitions", "first_commit_at", "last_commit_at", "lag_samples", "max_lag",
)


def _values(gold: Mapping[str, DataFrame], inputs: GoldInputs) -> list[tuple[DataFrame, dict[str, Column]]]:
    """Per input: its rows and the per-row values the one groupBy folds (a value another
    input fills is null in this input's branch of the union)."""
    one = F.lit(1).cast("long")
    out: list[tuple[DataFrame, dict[str, Column]]] = [(inputs.group_generations, {})]
    if inputs.consumer_group_epochs is not None:
        out.append((inputs.consumer_group_epochs, {}))
    c = inputs.offset_commits
    # Commits that carry an offset: a deletion (tombstone) commits nothing.
    ok = F.col("offset").isNotNull() & ~F.coalesce(F.col("is_deletion"), F.lit(False))
    out.append((c, {"_part": F.when(ok, F.struct(F.col("topic"), F.col("partition"))),
                    "_t": F.when(ok, F.col("record_ts"))}))
    e = gold["rebalance_episodes"]
    real = ~F.coalesce(F.col("empty_transition"), F.lit(False))
    out.append((e, {
        "_rebalance": F.when(real, F.struct(F.col("incarnation"), F.col("logical_rebalance_id"))),
        "_episode": one,
        "_incomplete": F.when(F.col("completed_at").isNull(), 1).otherwise(0).cast("long"),
        "_duration": F.col("duration_ms").cast("long"),
        "_unconsumed": F.col("unconsumed_ms").cast("long"),
        "_moved": F.col("partitions_moved").cast("long"),
        "_revoked": F.col("partitions_revoked").cast("long"),
        "_last": F.coalesce(F.col("completed_at"), F.col("started_at")),
        "_pk_e": F.col("protocol_kind"),
    }))
    out.append((gold["ownership_intervals"], {"_interval": one, "_pk_o": F.col("protocol_kind")}))
    out.append((gold["duplicate_windows"], {
        "_dup": one, "_dup_records": F.greatest(F.coalesce(F.col("estimated_records"), F.lit(0)), F.lit(0)).cast("long")}))
    out.append((gold["skip_windows"], {
        "_skip": one, "_skip_records": F.greatest(F.coalesce(F.col("records"), F.lit(0)), F.lit(0)).cast("long")}))
    transient = F.coalesce(F.col("transient"), F.lit(False))
    out.append((gold["idle_consumers"], {"_idle_span": one, "_idle_member": F.when(~transient, F.col("member_id")),
                                         "_transient_member": F.when(transient, F.col("member_id"))}))
    for name, col in (("rebalance_storms", "_storm"), ("commit_anomalies", "_anomaly"), ("coverage_gaps", "_gap")):
        out.append((gold[name], {col: one}))
    out.append((gold["consumer_lag"], {"_lag": one, "_lag_value": F.col("lag").cast("long")}))
    return out


def build_group_summary(gold: Mapping[str, DataFrame], inputs: GoldInputs) -> DataFrame:
    """One row per (cluster, group_id) of the silver inputs; `gold` holds the tables of
    `READS` for the same groups."""
    branches = []
    types: dict[str, T.DataType] = {}
    for df, values in _values(gold, inputs):
        sel = df.select(*KEY, *[v.alias(k) for k, v in values.items()])
        for f in sel.schema.fields[len(KEY):]:
            types.setdefault(f.name, f.dataType)
        branches.append((sel, set(values)))
    union = None
    for sel, have in branches:
        b = sel.select(*KEY, *[F.col(k) if k in have else F.lit(None).cast(types[k]).alias(k) for k in types])
        union = b if union is None else union.unionByName(b)
    assert union is not None

    def count(c: str) -> Column:
        return F.coalesce(F.sum(c), F.lit(0)).cast("long")

    def distinct(c: str) -> Column:
        # collect_set skips nulls and merges map-side: still one shuffle.
        return F.size(F.collect_set(c)).cast("long")

    lasting = F.collect_set("_idle_member")
    return union.groupBy(*KEY).agg(
        # The kind of the group's episodes, else of its ownership intervals.
        F.coalesce(F.max("_pk_e"), F.max("_pk_o")).alias("protocol_kind"),
        distinct("_rebalance").alias("rebalances"),
        count("_episode").alias("episodes"),
        count("_incomplete").alias("incomplete_rebalances"),
        F.when(F.count("_duration") > 0, F.sum("_duration"))
         .when(count("_episode") == 0, F.lit(0)).cast("long").alias("rebalancing_ms"),
        (count("_episode") - F.count("_duration")).cast("long").alias("rebalances_without_duration"),
        F.when(F.count("_unconsumed") > 0, F.sum("_unconsumed"))
         .when(count("_episode") == 0, F.lit(0)).cast("long").alias("unconsumed_ms"),
        count("_moved").alias("partitions_moved"),
        count("_revoked").alias("partitions_revoked"),
        F.max("_last").alias("last_rebalance_at"),
        count("_dup").alias("duplicate_windows"),
        count("_dup_records").alias("records_at_risk"),
        count("_skip").alias("skip_windows"),
        count("_skip_records").alias("skipped_records"),
        F.size(lasting).cast("long").alias("idle_members"),
        F.size(F.array_except(F.collect_set("_transient_member"), lasting)).cast("long").alias("transient_idle_members"),
        count("_idle_span").alias("idle_spans"),
        count("_storm").alias("storms"),
        count("_anomaly").alias("commit_anomalies"),
        count("_gap").alias("coverage_gaps"),
        count("_interval").alias("ownership_intervals"),
        distinct("_part").alias("committed_partitions"),
        F.min("_t").alias("first_commit_at"),
        F.max("_t").alias("last_commit_at"),
        count("_lag").alias("lag_samples"),
        F.max("_lag_value").alias("max_lag"),
    ).select(*COLUMNS)
