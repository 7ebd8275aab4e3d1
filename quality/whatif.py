"""What-if suites: a replayed assignment never gives a partition twice, and settles complete.

A cooperative assignor hands a moving partition over in two rounds: the first revokes it
(it is unassigned in between), the follow-up gives it to its new owner. When membership
changes before the follow-up (a rolling restart), the next rebalance takes its place and
may itself leave partitions moving, so the recordings show chains of incomplete rounds
(cooperative_rolling: generations 2 and 3 with 3 and 7 of 8 partitions, complete at 4).
Completeness is therefore required of every eager round and of the last round of a replay.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .model import ERROR, Context, Invariant, Suite, fmt, null_check, unique_check, violation

# A group converted between protocols has one replay per protocol segment.
_GROUP = ["cluster", "group_id", "incarnation", "segment", "assignor"]
_ROUND = [*_GROUP, "step", "round"]


def _given(t: DataFrame) -> DataFrame:
    m = F.from_json("assignment", "map<string,array<string>>")
    return t.withColumn("_given", F.flatten(F.map_values(m)))


def _no_partition_twice(t: DataFrame, _ctx: Context) -> DataFrame:
    g = _given(t.where(F.col("assignment").isNotNull()))
    g = g.withColumn("_twice", F.array_distinct(F.expr("filter(_given, x -> size(filter(_given, y -> y = x)) > 1)")))
    bad = g.where(F.size("_twice") > 0)
    return violation(bad, _ROUND, F.concat(F.lit("given twice: "), F.concat_ws(", ", "_twice")))


def _complete_when_settled(t: DataFrame, _ctx: Context) -> DataFrame:
    """Eager rounds always assign every partition (everything is revoked and reassigned at
    once). Incremental protocols (cooperative, KIP-848) may leave moving partitions
    unassigned in a round, but only while another round follows to hand them over: the
    follow-up, or a rebalance that supersedes it when membership changes in between (a
    rolling restart does exactly that). So the last round of a group's replay must be
    complete, as must every eager round."""
    w = Window.partitionBy(*_GROUP).orderBy("round")
    r = t.where(F.col("error").isNull()).withColumn("_next", F.lead("round").over(w))
    bad = r.where(~F.coalesce("complete", F.lit(False)) & ((F.col("protocol") == "eager") | F.col("_next").isNull()))
    return violation(bad, _ROUND, fmt("generation %s ends with %s of %s partitions assigned (%s, %s%s)",
                                      "generation", "assigned", "partitions", "protocol", "phase",
                                      F.when(F.col("_next").isNull(), F.lit(", last round")).otherwise(F.lit(""))))


WHATIF_EPISODES = Suite("whatif_episodes", "whatif", (
    Invariant("no_partition_given_twice", "no replayed (or actual) round gives a partition to two members", ERROR,
              (*_ROUND, "assignment"), _no_partition_twice, scope=()),
    Invariant("complete_when_settled",
              "every eager round, and the last round of every replay, assigns every partition; an incremental "
              "(cooperative, KIP-848) handover leaves moving partitions unassigned only while a later round follows",
              ERROR, (*_ROUND, "error", "complete", "generation", "assigned", "partitions", "phase", "protocol"),
              _complete_when_settled, scope=tuple(_GROUP)),
    unique_check("round_once", _ROUND, "one row per (group incarnation, protocol segment, assignor, step, round)"),
))

WHATIF_SUMMARY = Suite("whatif_summary", "whatif", (
    unique_check("summary_once", _GROUP, "one summary per group incarnation, protocol segment and assignor"),
    null_check("summary_complete", ("steps", "rounds"), _GROUP, description="every summary counts its steps and rounds"),
))

SUITES = (WHATIF_EPISODES, WHATIF_SUMMARY)
