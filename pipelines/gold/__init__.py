"""Gold jobs: a consumer group's rebalance history and the findings derived from it.

Every `build_<table>` takes silver DataFrames (and optional coordinator events) and returns
a DataFrame with the meaning given in docs/gold.md. `build_all` wires them together.
"""
from __future__ import annotations

from .model import GoldInputs, GoldParams


def pin(df):
    """Materialize a result several tables build on, and cut its lineage.

    Without this every table re-plans (and re-runs) the whole chain beneath it; the plans of
    the later tables grow to thousands of nodes and Spark spends more time planning and
    scheduling than computing. In local mode the result is checkpointed in the executor's
    memory and disk. On a cluster an executor can go away (a lost node, a preempted VM) and
    take such blocks with it, failing every later job that reads them: there it is written
    to the checkpoint folder under the lake (`pipelines.spark.reliable_checkpoints`, which
    the gold runner opens), which every executor reads.
    """
    sc = df.sparkSession.sparkContext
    if sc.master.startswith("local") or sc.getCheckpointDir() is None:
        return df.localCheckpoint(eager=True)
    return df.checkpoint(eager=True)


def build_all(inputs: GoldInputs, params: GoldParams | None = None) -> dict:
    """Every gold table for the given silver inputs.

    The shared intermediate results (snapshots, ownership, attribution, episodes) are
    computed here, once; the tables returned are lazy DataFrames over them.
    """
    from . import anomalies, coverage, duplicates, episodes, idle, lag, ownership, storms, transactions

    from pipelines.spark import run_concurrently

    params = params or GoldParams()
    # Inputs are not pinned: each table's plan reads the few it needs straight from their
    # Parquet files (a pin costs a Spark job per input and holds every input in memory).
    # The intermediate results several tables share are pinned once.
    snaps = ownership.assignment_snapshots(inputs)  # a projection: cheaper re-read than pinned

    def ownership_chain() -> tuple:
        holdings = pin(ownership.build_ownership_intervals(inputs, snaps, params))
        # Live-read commits of an app committing through its producer carry no flag: told
        # by their markers' offsets (transactions.py).
        attributed = pin(transactions.with_inferred(inputs, ownership.build_commit_attribution(inputs, holdings)))
        # Each handover's old owner's stop: the duplicate windows and the episodes' unconsumed time.
        return holdings, attributed, pin(duplicates.handover_estimates(inputs, holdings, attributed, params))

    def episodes_chain() -> tuple:
        # The missing offsets of the coordinator partitions (few rows, pinned where they
        # are computed): the episodes and the coverage gaps both read them.
        holes = coverage.missing_offsets(inputs)
        # Lag: a table of its own, and each episode's lag when it started.
        lags = pin(lag.build_consumer_lag(inputs))
        return holes, lags, pin(episodes.build_rebalance_episodes(inputs, snaps, holes, params))

    # The two chains share no result: side by side, the many small jobs of one fill the
    # cores while the driver plans and schedules the other's (on a small lake each pin is
    # mostly that latency).
    (holdings, attributed, handed), (holes, lags, base_episodes) = run_concurrently(
        inputs.offset_commits.sparkSession, [ownership_chain, episodes_chain])
    # The episodes pinned before their unconsumed time: `with_unconsumed` joins them with
    # an aggregate of themselves, which unpinned plans (and runs) their whole chain twice.
    eps = pin(lag.with_lag_at_start(episodes.with_unconsumed(base_episodes, handed), lags))
    out = {
        "ownership_intervals": holdings,
        "commit_attribution": attributed,
        "rebalance_episodes": eps,
        "duplicate_windows": duplicates.build_duplicate_windows(handed, attributed),
        "skip_windows": anomalies.build_skip_windows(inputs, attributed, params),
        "commit_anomalies": anomalies.build_commit_anomalies(inputs, holdings, params, attributed),
        "idle_consumers": idle.build_idle_consumers(inputs, snaps),
        "rebalance_storms": storms.build_rebalance_storms(
            eps, params, storms.membership_identities(inputs.member_assignments, inputs.consumer_group_members),
            holdings),
        "coverage_gaps": coverage.build_coverage_gaps(inputs, holes),
        "consumer_lag": lags,
    }
    return out


__all__ = ["GoldInputs", "GoldParams", "build_all"]
