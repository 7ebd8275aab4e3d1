"""What-if suites: a replayed assignment never gives a partition twice, and each replayed
step ends complete.

A cooperative assignor hands a moving partition over in two rounds: the first revokes it
(it is unassigned in between), the follow-up gives it to its new owner. So completeness
is required of the *last* round of each replayed step, not of every round.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .model import ERROR, Context, Invariant, Suite, fmt, null_check, unique_check, violation

_GROUP = ["cluster", "group_id", "incarnation", "assignor"]
_ROUND = [*_GROUP, "step", "round"]


def _given(t: DataFrame) -> DataFrame:
    m = F.from_json("assignment", "map<string,array<string>>")
    return t.withColumn("_given", F.flatten(F.map_values(m)))


def _no_partition_twice(t: DataFrame, _ctx: Context) -> DataFrame:
    g = _given(t.where(F.col("assignment").isNotNull()))
    g = g.withColumn("_twice", F.array_distinct(F.expr("filter(_given, x -> size(filter(_given, y -> y = x)) > 1)")))
    bad = g.where(F.size("_twice") > 0)
    return violation(bad, _ROUND, F.concat(F.lit("given twice: "), F.concat_ws(", ", "_twice")))


def _complete_at_step_end(t: DataFrame, _ctx: Context) -> DataFrame:
    w = Window.partitionBy(*_GROUP, "step").orderBy(F.col("round").desc())
    last = t.where(F.col("error").isNull()).withColumn("_r", F.row_number().over(w)).where(F.col("_r") == 1)
    bad = last.where(~F.coalesce("complete", F.lit(False)))
    return violation(bad, _ROUND, fmt("generation %s ends with %s of %s partitions assigned (%s)",
                                      "generation", "assigned", "partitions", "phase"))


WHATIF_EPISODES = Suite("whatif_episodes", "whatif", (
    Invariant("no_partition_given_twice", "no replayed (or actual) round gives a partition to two members", ERROR,
              (*_ROUND, "assignment"), _no_partition_twice),
    Invariant("complete_at_step_end",
              "the last round of every replayed step assigns every partition (a cooperative handover may leave "
              "moving partitions unassigned only in between)", ERROR,
              (*_ROUND, "error", "complete", "generation", "assigned", "partitions", "phase"), _complete_at_step_end),
    unique_check("round_once", _ROUND, "one row per (group incarnation, assignor, step, round)"),
))

WHATIF_SUMMARY = Suite("whatif_summary", "whatif", (
    unique_check("summary_once", _GROUP, "one summary per group incarnation and assignor"),
    null_check("summary_complete", ("steps", "rounds"), _GROUP, description="every summary counts its steps and rounds"),
))

SUITES = (WHATIF_EPISODES, WHATIF_SUMMARY)
