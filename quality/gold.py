"""Gold suites: the derived history is self-consistent (no double ownership, spans that end
after they start, windows whose start is below their end)."""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .model import ERROR, WARN, Context, Invariant, Suite, fmt, null_check, row_check, unique_check, violation

_TP = ["cluster", "group_id", "incarnation", "topic", "partition"]

# Default K of a storm (docs/gold.md: at least K logical rebalances in W minutes); pipelines.gold.GoldParams.
STORM_MIN_REBALANCES = 5


def _intervals_never_overlap(t: DataFrame, _ctx: Context) -> DataFrame:
    """Ordered by where they start, each interval of a partition ends no later than the next
    one starts; an open interval (end null: still owned) must be the last."""
    w = Window.partitionBy(*_TP).orderBy("start_pos", "end_pos")
    o = t.where(F.col("partition").isNotNull()) \
        .withColumn("_next_start", F.lead("start_pos").over(w)) \
        .withColumn("_next_member", F.lead("member_id").over(w))
    bad = o.where(F.col("_next_start").isNotNull()
                  & (F.col("end_pos").isNull() | (F.col("end_pos") > F.col("_next_start"))))
    return violation(bad, [*_TP, "member_id", "start_pos"], fmt(
        "held by %s from log offset %s to %s, but %s owns it from %s",
        "member_id", "start_pos", F.coalesce(F.col("end_pos").cast("string"), F.lit("(still open)")),
        "_next_member", "_next_start"))


OWNERSHIP_INTERVALS = Suite("ownership_intervals", "gold", (
    Invariant("intervals_never_overlap", "ownership intervals of one partition never overlap", ERROR,
              (*_TP, "member_id", "start_pos", "end_pos"), _intervals_never_overlap, scope=tuple(_TP)),
    row_check("interval_ends_after_start", lambda: F.col("end_pos") < F.col("start_pos"),
              [*_TP, "member_id", "start_pos"], lambda: fmt("ends at log offset %s before it starts at %s", "end_pos", "start_pos"),
              ("start_pos", "end_pos"), "an interval ends at or after where it starts"),
    null_check("member_interval_has_owner", ("member_id",), [*_TP, "start_pos"],
               where=lambda: F.col("owner_kind") == "member", description="a member's interval names the member"),
))

COMMIT_ATTRIBUTION = Suite("commit_attribution", "gold", (
    unique_check("commit_attributed_once", ["cluster", "coordinator_partition", "log_offset"],
                 "each commit is attributed to at most one owner"),
))


def _window_ordered(start: str, end: str, key: list[str], name: str, what: str, strict: bool = True) -> Invariant:
    op = "<" if strict else "<="
    cond = (lambda: F.col(start) >= F.col(end)) if strict else (lambda: F.col(start) > F.col(end))
    return row_check(name, cond, key, lambda: fmt(f"{start} %s, {end} %s", start, end), (start, end),
                     f"every {what}'s {start} {op} its {end}")


_DW_KEY = [*_TP, "from_member", "to_member", "handover_pos"]
DUPLICATE_WINDOWS = Suite("duplicate_windows", "gold", (
    _window_ordered("start_offset", "end_offset_high", _DW_KEY, "window_start_below_end", "duplicate window"),
    row_check("estimate_inside_window",
              lambda: (F.col("end_offset_estimate") < F.col("start_offset")) | (F.col("end_offset_estimate") > F.col("end_offset_high")),
              _DW_KEY, lambda: fmt("estimate %s outside [%s, %s]", "end_offset_estimate", "start_offset", "end_offset_high"),
              ("start_offset", "end_offset_estimate", "end_offset_high"),
              "the estimated end of a duplicate window lies between its start and its upper bound"),
    row_check("estimated_records_non_negative", lambda: F.col("estimated_records") < 0, _DW_KEY,
              lambda: fmt("%s records", "estimated_records"), ("estimated_records",),
              "a duplicate window's estimated record count is >= 0"),
    null_check("window_has_cause", ("cause",), _DW_KEY, description="every duplicate window states its cause"),
))

_SW_KEY = ["cluster", "group_id", "topic", "partition", "commit_ts"]
SKIP_WINDOWS = Suite("skip_windows", "gold", (
    _window_ordered("start_offset", "end_offset", _SW_KEY, "window_start_below_end", "skip window"),
))

_EP_KEY = ["cluster", "group_id", "incarnation", "from_generation", "to_generation"]
REBALANCE_EPISODES = Suite("rebalance_episodes", "gold", (
    _window_ordered("started_at", "completed_at", _EP_KEY, "episode_completes_after_start", "rebalance episode", strict=False),
    row_check("duration_non_negative", lambda: F.col("duration_ms") < 0, _EP_KEY, lambda: fmt("%s ms", "duration_ms"),
              ("duration_ms",), "an episode's duration is >= 0"),
    row_check("generation_moves_forward", lambda: F.col("to_generation") < F.col("from_generation"), _EP_KEY,
              lambda: fmt("from generation %s to %s", "from_generation", "to_generation"),
              ("from_generation", "to_generation"), "an episode goes to a generation >= the one it starts from"),
))

COMMIT_ANOMALIES = Suite("commit_anomalies", "gold", (
    _window_ordered("started_at", "ended_at", ["cluster", "group_id", "topic", "partition", "kind", "started_at"],
                    "span_ordered", "commit anomaly", strict=False),
))

COVERAGE_GAPS = Suite("coverage_gaps", "gold", (
    _window_ordered("from_ts", "to_ts", ["cluster", "group_id", "topic", "partition", "kind", "from_ts"],
                    "gap_ordered", "coverage gap", strict=False),
    null_check("gap_has_kind", ("kind",), ["cluster", "group_id", "from_ts"],
               description="every coverage gap says what removed the history (kind)"),
))

_IDLE_KEY = ["cluster", "group_id", "incarnation", "member_id", "generation"]
IDLE_CONSUMERS = Suite("idle_consumers", "gold", (
    _window_ordered("from_ts", "to_ts", _IDLE_KEY, "idle_span_ordered", "idle span", strict=False),
    null_check("idle_has_member_and_cause", ("member_id", "cause"), _IDLE_KEY,
               description="every idle consumer names the member and the cause"),
))


def _storm_size(t: DataFrame, ctx: Context) -> DataFrame:
    k = int(ctx.params.get("storm_min_rebalances", STORM_MIN_REBALANCES))
    return violation(t.where(F.col("episodes") < k), ["cluster", "group_id", "incarnation", "started_at"],
                     fmt(f"%s episodes (a storm has at least {k})", "episodes"))


_ST_KEY = ["cluster", "group_id", "incarnation", "started_at"]
REBALANCE_STORMS = Suite("rebalance_storms", "gold", (
    _window_ordered("started_at", "ended_at", _ST_KEY, "storm_span_ordered", "storm", strict=False),
    Invariant("storm_has_enough_rebalances", f"a storm holds at least K (default {STORM_MIN_REBALANCES}) rebalances",
              WARN, ("episodes", "started_at", "incarnation", "group_id"), _storm_size, scope=()),
))

_LAG_KEY = ["cluster", "group_id", "topic", "partition", "sampled_at"]
CONSUMER_LAG = Suite("consumer_lag", "gold", (
    unique_check("one_row_per_sample", _LAG_KEY, description="one lag per group, partition and sample"),
    row_check("lag_is_end_minus_committed",
              lambda: F.col("lag").isNull() != F.col("committed_offset").isNull(), _LAG_KEY,
              lambda: fmt("lag %s with committed offset %s", "lag", "committed_offset"), ("lag", "committed_offset"),
              "a lag is known exactly when the committed offset is (a deleted commit leaves neither)"),
    row_check("committed_before_the_sample", lambda: F.col("committed_at") > F.col("sampled_at"), _LAG_KEY,
              lambda: fmt("committed at %s, sampled at %s", "committed_at", "sampled_at"), ("committed_at", "sampled_at"),
              "the commit a lag is measured from was written before the sample"),
    row_check("lag_non_negative", lambda: F.col("lag") < 0, _LAG_KEY,
              lambda: fmt("lag %s (end %s, committed %s)", "lag", "end_offset", "committed_offset"),
              ("lag", "end_offset", "committed_offset"),
              "a committed offset past the log end (the commit_jump / committed_past_log_end skip windows say why)",
              severity=WARN),
))

GROUP_SUMMARY = Suite("group_summary", "gold", (
    unique_check("one_row_per_group", ["cluster", "group_id"], "one summary row per consumer group"),
    row_check("rebalances_within_episodes", lambda: F.col("rebalances") > F.col("episodes"), ["cluster", "group_id"],
              lambda: fmt("%s logical rebalances from %s episodes", "rebalances", "episodes"), ("rebalances", "episodes"),
              "a logical rebalance is one or more episodes"),
))

SUITES = (OWNERSHIP_INTERVALS, COMMIT_ATTRIBUTION, DUPLICATE_WINDOWS, SKIP_WINDOWS, REBALANCE_EPISODES,
          COMMIT_ANOMALIES, COVERAGE_GAPS, IDLE_CONSUMERS, REBALANCE_STORMS, CONSUMER_LAG, GROUP_SUMMARY)
