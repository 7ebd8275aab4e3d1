"""rebalance_episodes: one rebalance of one group.

Classic groups: an episode ends when a new generation is persisted; it starts at the
coordinator's "Preparing to rebalance" line (logs) — without logs the start is bounded by
the previous persisted generation (`started_after_ts`) and the join completion
(`joined_at`, the record's currentStateTimestamp). A generation number skipped between
records that are otherwise contiguous (no missing log offsets between them) is an episode
that never completed. With logs, an episode whose record compaction removed is completed by
the coordinator's "Assignment received from leader" line (`_completed_in_logs`). Cooperative groups hand partitions over in two generations: the
second carries the first's `logical_rebalance_id`.

KIP-848 groups: one episode per group epoch bump, completed when every member of that
epoch's target assignment has reconciled to it (state STABLE at that epoch or later).
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from . import events as ev_mod
from . import pin
from .model import GoldInputs, GoldParams, converted, ms
from .ownership import GROUP_KEYS, TP_KEYS

COLUMNS = [
    "cluster", "group_id", "incarnation", "protocol_kind", "protocol", "from_generation", "to_generation",
    "started_at", "started_after_ts", "joined_at", "completed_at", "duration_ms", "trigger", "trigger_member",
    "reason", "members_before", "members_after", "partitions_moved", "partitions_revoked",
    "logical_rebalance_id", "phase", "empty_transition", "start_source", "unconsumed_ms", "lag_at_start",
    "lag_sampled_at",
]

# How far a logged rebalance start may lie after the record completing it (clock skew).
CLOCK_SKEW_TOLERANCE_MS = 1000


def _snapshot_owners(inputs: GoldInputs, snaps: DataFrame) -> DataFrame:
    owned = inputs.member_assignments.where(F.col("topic").isNotNull())
    parts = owned.select(*TP_KEYS).distinct()
    grid = snaps.select(*GROUP_KEYS, "snap_pos").join(parts, GROUP_KEYS)
    o = owned.select(*TP_KEYS, F.col("log_offset").alias("snap_pos"), "member_id")
    return grid.join(o, TP_KEYS + ["snap_pos"], "left")


def _after_conversion(inputs: GoldInputs, snaps: DataFrame) -> DataFrame:
    """`_converted_back`: the snapshot is the group's first classic record after a conversion
    to the consumer protocol (a `converted` tombstone between it and the one before)."""
    g = inputs.group_generations
    conv = g.where(F.col("is_deletion") & converted(g)) \
        .select(*GROUP_KEYS, F.col("log_offset").alias("_conv_pos"))
    hit = snaps.select(*GROUP_KEYS, "snap_pos", "prev_pos").join(conv, GROUP_KEYS) \
        .where((F.col("_conv_pos") < F.col("snap_pos")) & (F.col("_conv_pos") > F.coalesce("prev_pos", F.lit(-1)))) \
        .select(*GROUP_KEYS, "snap_pos").distinct().withColumn("_converted_back", F.lit(True))
    return snaps.join(hit, GROUP_KEYS + ["snap_pos"], "left") \
        .withColumn("_converted_back", F.coalesce(F.col("_converted_back"), F.lit(False)))


def _classic(inputs: GoldInputs, snaps: DataFrame, holes: DataFrame | None) -> DataFrame:
    w = Window.partitionBy(*GROUP_KEYS).orderBy("snap_pos")
    s = snaps.withColumn("prev_gen", F.lag("generation").over(w)).withColumn("prev_pos", F.lag("snap_pos").over(w)) \
        .withColumn("prev_ts", F.lag("snap_ts").over(w)).withColumn("prev_count", F.lag("member_count").over(w))
    # Ownership change between consecutive snapshots.
    own = _snapshot_owners(inputs, snaps)
    wo = Window.partitionBy(*TP_KEYS).orderBy("snap_pos")
    own = own.withColumn("_prev_owner", F.lag("member_id").over(wo))
    moves = own.groupBy(*GROUP_KEYS, "snap_pos").agg(
        F.count("*").alias("n_parts"),
        F.count("member_id").alias("n_owned"),
        F.count("_prev_owner").alias("n_owned_before"),
        F.sum(F.when(F.col("member_id").isNotNull() & ~F.col("member_id").eqNullSafe(F.col("_prev_owner")), 1).otherwise(0)).alias("moved_in"),
        F.sum(F.when(F.col("_prev_owner").isNotNull() & ~F.col("_prev_owner").eqNullSafe(F.col("member_id")), 1).otherwise(0)).alias("moved_out"),
    )
    s = s.join(moves, GROUP_KEYS + ["snap_pos"], "left")
    # Pinned, and `changed` below: each is read by several branches, and every branch of an
    # unpinned plan re-plans and re-runs the whole chain beneath it (`pin`).
    s = pin(s.withColumn("prev_unowned", F.lag(F.col("n_parts") - F.col("n_owned")).over(w)))
    changed = _after_conversion(inputs, s.where(F.col("generation") > F.coalesce("prev_gen", F.lit(0))))
    if holes is not None:
        gap = changed.select(*GROUP_KEYS, "coordinator_partition", "snap_pos", "prev_pos").join(holes, ["cluster", "coordinator_partition"]) \
            .where((F.col("hole_from") < F.col("snap_pos")) & (F.col("hole_to") > F.coalesce("prev_pos", F.lit(-1)))) \
            .select(*GROUP_KEYS, "snap_pos").distinct().withColumn("_hole", F.lit(True))
        changed = changed.join(gap, GROUP_KEYS + ["snap_pos"], "left")
    else:
        changed = changed.withColumn("_hole", F.lit(None).cast("boolean"))
    changed = pin(changed)
    coop = F.coalesce(F.col("protocol"), F.lit("")).contains("cooperative")
    phase2 = coop & (F.coalesce("prev_unowned", F.lit(0)) > 0) & (F.col("moved_in") > 0) & (F.col("prev_gen") == F.col("generation") - 1)
    # The first classic record after the group was a consumer group is the conversion back,
    # not a classic rebalance: its generation is the consumer group's epoch, and the
    # rebalance the conversion starts is the next generation. No episode, no skipped ones.
    changed = changed.where(~F.col("_converted_back"))
    done = changed.select(
        *GROUP_KEYS, F.lit("classic").alias("protocol_kind"), "protocol",
        F.coalesce("prev_gen", F.col("generation") - 1).alias("from_generation"),
        F.col("generation").alias("to_generation"),
        F.col("prev_ts").alias("started_after_ms"), F.col("join_ts").alias("joined_ms"), F.col("snap_ts").alias("completed_ms"),
        F.coalesce("prev_count", F.lit(0)).alias("members_before"), F.col("member_count").alias("members_after"),
        F.coalesce("moved_in", F.lit(0)).alias("partitions_moved"),
        F.when(coop, F.coalesce("moved_out", F.lit(0))).otherwise(F.coalesce("n_owned_before", F.lit(0))).alias("partitions_revoked"),
        F.when(phase2, F.lit(2)).otherwise(F.lit(1)).alias("phase"),
        "_hole", "snap_pos",
    )
    # Skipped generation numbers: started, never persisted (unless the input has a hole there).
    skipped = changed.where((F.col("generation") - F.coalesce("prev_gen", F.lit(0)) > 1) & F.col("_hole").isNull()
                            & (F.col("generation") > 1)) \
        .select(*GROUP_KEYS, "protocol", F.col("prev_ts").alias("started_after_ms"),
                F.coalesce("prev_count", F.lit(0)).alias("members_before"),
                F.explode(F.sequence(F.coalesce("prev_gen", F.lit(0)) + 1, F.col("generation") - 1)).alias("to_generation")) \
        .select(*GROUP_KEYS, F.lit("classic").alias("protocol_kind"), "protocol", (F.col("to_generation") - 1).alias("from_generation"),
                "to_generation", "started_after_ms", F.lit(None).cast("long").alias("joined_ms"),
                F.lit(None).cast("long").alias("completed_ms"), "members_before", F.lit(None).cast("int").alias("members_after"),
                F.lit(None).cast("long").alias("partitions_moved"), F.lit(None).cast("long").alias("partitions_revoked"),
                F.lit(1).alias("phase"), F.lit(None).cast("boolean").alias("_hole"), F.lit(None).cast("long").alias("snap_pos"))
    # A late first generation after a hole is not an episode we saw start: keep it, but no skipped rows.
    eps = done.unionByName(skipped)
    wl = Window.partitionBy(*GROUP_KEYS).orderBy("to_generation")
    eps = eps.withColumn("_logical_start", F.when(F.col("phase") == 1, F.col("to_generation")))
    eps = eps.withColumn("logical_rebalance_id", F.last("_logical_start", ignorenulls=True).over(
        wl.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    return eps.drop("_logical_start", "_hole", "snap_pos")


def _completed_in_logs(inputs: GoldInputs, eps: DataFrame) -> DataFrame:
    """Episodes without a persisted completion take the coordinator's "Assignment received
    from leader ... for generation N" line as theirs: the sync that ends a classic rebalance
    happened, and the GroupMetadata record it wrote is gone (compaction keeps only a group's
    latest). Without this, every rebalance whose record was compacted would read as one that
    never completed. A generation that never got its assignment keeps no completion."""
    ev = ev_mod.events(inputs)
    if ev is None:
        return eps
    synced = ev.where((F.col("event") == "assignment_received") & F.col("generation").isNotNull()) \
        .groupBy("cluster", "group_id", F.col("generation").cast("int").alias("to_generation")) \
        .agg(F.collect_list("ts").alias("_synced"))
    # The first such line after the episode began: a group deleted and recreated numbers its
    # generations again, and an earlier incarnation's line is not this episode's end.
    start = F.coalesce("started_ms", "started_after_ms", F.lit(-(2**62)))
    synced_ms = F.array_min(F.filter("_synced", lambda t: t >= start))
    return eps.join(synced, ["cluster", "group_id", "to_generation"], "left") \
        .withColumn("completed_ms", F.coalesce("completed_ms", synced_ms)).drop("_synced")


def _with_logs(inputs: GoldInputs, eps: DataFrame) -> DataFrame:
    starts = ev_mod.rebalance_starts(inputs)
    if starts is None:
        return eps.withColumn("started_ms", F.lit(None).cast("long")).withColumn("trigger", F.lit(None).cast("string")) \
            .withColumn("trigger_member", F.lit(None).cast("string")).withColumn("reason", F.lit(None).cast("string")) \
            .withColumn("start_source", F.lit("records"))
    st = starts.select("cluster", "group_id", (F.col("old_generation") + 1).alias("to_generation"),
                       F.col("start_ts").alias("started_ms"), "trigger", "trigger_member", "reason").dropDuplicates(
        ["cluster", "group_id", "to_generation"])
    # Groups the logs know: their episodes are the logged starts (plus record-only changes the logs missed).
    j = eps.join(st, ["cluster", "group_id", "to_generation"], "full_outer")
    j = _completed_in_logs(inputs, j)
    # A logged episode no record completed takes the group's latest known protocol. (Not the
    # first row's: rows come in no set order, and an empty group's generation has none.)
    latest = F.when(F.col("protocol").isNotNull(), F.struct("incarnation", "to_generation"))
    inc = eps.groupBy("cluster", "group_id").agg(F.max("incarnation").alias("_inc"), F.max_by("protocol", latest).alias("_proto"))
    j = j.join(inc, ["cluster", "group_id"], "left")
    return j.withColumn("incarnation", F.coalesce("incarnation", "_inc", F.lit(0))) \
        .withColumn("protocol_kind", F.coalesce("protocol_kind", F.lit("classic"))) \
        .withColumn("protocol", F.coalesce("protocol", "_proto")) \
        .withColumn("from_generation", F.coalesce("from_generation", F.col("to_generation") - 1)) \
        .withColumn("phase", F.coalesce("phase", F.lit(1))) \
        .withColumn("logical_rebalance_id", F.coalesce("logical_rebalance_id", "to_generation")) \
        .withColumn("start_source", F.when(F.col("started_ms").isNotNull(), "log").otherwise("records")) \
        .drop("_inc", "_proto")


def _consumer(inputs: GoldInputs) -> DataFrame | None:
    if inputs.consumer_group_epochs is None or inputs.current_assignments is None or inputs.target_assignments is None:
        return None  # no KIP-848 group in the lake (silver writes these tables together)
    e = inputs.consumer_group_epochs.where(~F.col("is_deletion"))
    w = Window.partitionBy("cluster", "group_id").orderBy("log_offset")
    e = e.withColumn("prev_epoch", F.lag("epoch").over(w)).where(F.col("epoch") > F.coalesce("prev_epoch", F.lit(0)))
    e = e.select("cluster", "group_id", F.coalesce("prev_epoch", F.lit(0)).alias("from_generation"),
                 F.col("epoch").alias("to_generation"), ms("record_ts").alias("started_ms"), F.col("log_offset").alias("epoch_pos"))
    t = inputs.target_assignments
    tm = t.groupBy("cluster", "group_id", F.col("assignment_epoch").alias("to_generation")).agg(
        F.countDistinct("member_id").alias("members_after"))
    # Partition moves between consecutive target assignments.
    tt = t.select("cluster", "group_id", F.col("assignment_epoch").alias("ep"), "topic_id", "partition", "member_id")
    wt = Window.partitionBy("cluster", "group_id", "topic_id", "partition").orderBy("ep")
    tt = tt.withColumn("_prev", F.lag("member_id").over(wt))
    mv = tt.groupBy("cluster", "group_id", F.col("ep").alias("to_generation")).agg(
        F.sum(F.when(~F.col("member_id").eqNullSafe(F.col("_prev")), 1).otherwise(0)).alias("partitions_moved"),
        F.sum(F.when(F.col("_prev").isNotNull() & (F.col("member_id") != F.col("_prev")), 1).otherwise(0)).alias("partitions_revoked"),
    )
    ca = inputs.current_assignments.where(~F.col("is_deletion") & (F.col("state") == 0)).select(
        "cluster", "group_id", "member_id", "member_epoch", ms("record_ts").alias("rts"))
    reach = t.select("cluster", "group_id", F.col("assignment_epoch").alias("to_generation"), "member_id").distinct() \
        .join(ca, ["cluster", "group_id", "member_id"], "left").where(
            F.col("member_epoch").isNull() | (F.col("member_epoch") >= F.col("to_generation"))) \
        .groupBy("cluster", "group_id", "to_generation", "member_id").agg(F.min("rts").alias("reached"))
    done = reach.groupBy("cluster", "group_id", "to_generation").agg(
        F.when(F.count("reached") == F.count("*"), F.max("reached")).alias("completed_ms"))
    ep = e.join(tm, ["cluster", "group_id", "to_generation"], "left").join(mv, ["cluster", "group_id", "to_generation"], "left") \
        .join(done, ["cluster", "group_id", "to_generation"], "left")
    wm = Window.partitionBy("cluster", "group_id").orderBy("to_generation")
    ep = ep.withColumn("members_after", F.coalesce("members_after", F.lit(0))) \
        .withColumn("members_before", F.coalesce(F.lag("members_after").over(wm), F.lit(0)))
    # An epoch with no target assignment (the group emptied) completes as it is written.
    ep = ep.withColumn("completed_ms", F.when(F.col("members_after") == 0, F.col("started_ms")).otherwise(F.col("completed_ms")))
    trig = F.when(F.col("members_after") > F.col("members_before"), "join").when(
        F.col("members_after") < F.col("members_before"), "leave").otherwise("metadata_change")
    out = ep.select(
        "cluster", "group_id", F.lit(0).alias("incarnation"), F.lit("consumer").alias("protocol_kind"),
        F.lit(None).cast("string").alias("protocol"), "from_generation", "to_generation",
        "started_ms", F.lit(None).cast("long").alias("started_after_ms"), F.lit(None).cast("long").alias("joined_ms"),
        "completed_ms", trig.alias("trigger"), F.lit(None).cast("string").alias("trigger_member"),
        F.lit(None).cast("string").alias("reason"), "members_before", F.col("members_after").cast("int"),
        F.coalesce("partitions_moved", F.lit(0)).cast("long").alias("partitions_moved"),
        F.coalesce("partitions_revoked", F.lit(0)).cast("long").alias("partitions_revoked"),
        F.col("to_generation").alias("logical_rebalance_id"), F.lit(1).alias("phase"), F.lit("records").alias("start_source"),
    )
    ev = ev_mod.events(inputs)
    if ev is not None:
        # A fence in the second before the bump is the cause (crash); the leave trigger otherwise.
        f = ev.where(F.col("event") == "member_fenced").select(F.col("cluster").alias("_fc"), F.col("group_id").alias("_fg"),
                                                               F.col("ts").alias("_fts"), F.col("member_id").alias("_fm"))
        # The window goes into the join condition: an epoch with no fence near it keeps its row.
        near = (out["cluster"] == f["_fc"]) & (out["group_id"] == f["_fg"]) & (f["_fts"] <= out["started_ms"]) \
            & (f["_fts"] >= out["started_ms"] - 1000)
        o = out.join(f, near, "left")
        out = o.withColumn("trigger", F.when(F.col("_fm").isNotNull(), "crash").otherwise(F.col("trigger"))) \
            .withColumn("trigger_member", F.coalesce("trigger_member", "_fm")) \
            .dropDuplicates(["cluster", "group_id", "to_generation"]).drop("_fc", "_fg", "_fts", "_fm")
    return out


def build_rebalance_episodes(inputs: GoldInputs, snaps: DataFrame, holes: DataFrame | None,
                             params: GoldParams | None = None) -> DataFrame:
    """`holes`: coverage.missing_offsets of the same inputs (a generation skipped across a
    hole is compaction, not a rebalance that never completed)."""
    eps = _with_logs(inputs, _classic(inputs, snaps, holes))
    eps = eps.withColumn(
        "trigger",
        F.coalesce("trigger", F.when(F.col("members_after") > F.col("members_before"), "join")
                   .when(F.col("members_after") < F.col("members_before"), "leave_or_failure")
                   .when(F.col("completed_ms").isNull(), "unknown").otherwise("rejoin_or_metadata")),
    )
    # A logged start and a record's completion come from two clocks: log4j's when the line was
    # written and the log's when the record was appended (on another broker's clock after a
    # coordinator move). A start a few ms after the completion is that skew, not a rebalance
    # that ended before it began: the rebalance took no measurable time. A larger inversion is
    # left as it is, for the quality check to report.
    late = F.col("started_ms") - F.col("completed_ms")
    eps = eps.withColumn("started_ms", F.when((late > 0) & (late <= CLOCK_SKEW_TOLERANCE_MS), F.col("completed_ms"))
                         .otherwise(F.col("started_ms")))
    cons = _consumer(inputs)
    if cons is not None:
        eps = eps.unionByName(cons, allowMissingColumns=True)
    return eps.select(
        "cluster", "group_id", "incarnation", "protocol_kind", "protocol", "from_generation", "to_generation",
        F.timestamp_millis("started_ms").alias("started_at"), F.timestamp_millis("started_after_ms").alias("started_after_ts"),
        F.timestamp_millis("joined_ms").alias("joined_at"), F.timestamp_millis("completed_ms").alias("completed_at"),
        (F.col("completed_ms") - F.col("started_ms")).alias("duration_ms"), "trigger", "trigger_member", "reason",
        "members_before", "members_after", "partitions_moved", "partitions_revoked", "logical_rebalance_id", "phase",
        ((F.coalesce("members_before", F.lit(0)) == 0) | (F.coalesce("members_after", F.lit(1)) == 0)).alias("empty_transition"),
        "start_source", "started_ms", "completed_ms",
    )


def with_unconsumed(eps: DataFrame, handed: DataFrame) -> DataFrame:
    """`eps` with `unconsumed_ms`: how long partitions stood unconsumed because of the
    rebalance, from the old owner's last sign of life to the new owner's start.

    * A revoked partition waits for its new owner: an eager rebalance revokes everything
      when it starts and assigns when it completes (start to completion); a cooperative one
      revokes in one round and assigns in the next (a round's completion to the next
      one's; a member leaving revokes its own as it leaves); KIP-848 reconciles within the epoch (the epoch's start to every member's
      reconciliation, an upper bound).
    * When the rebalance is how the coordinator noticed an owner had stopped, its
      partitions stood still from then: each handover's `stop_estimate_ms` of cause crash
      (a session timeout before the expiry) or poll timeout (max.poll.interval.ms before
      the leave), from duplicates.handover_estimates: one rule for when an owner stopped,
      shared with the duplicate windows, to the logical rebalance's completion.

    The longer of the two. A rebalance that revoked nothing and noticed no failure stopped
    nothing (0). Without a known start or completion the figure is unknown (null), like the
    duration. A logical rebalance's figure sits on its first round, 0 on the others, so a
    group's sum counts each once. Tested against what consumers really processed."""
    logical = Window.partitionBy("cluster", "group_id", "incarnation", "logical_rebalance_id")
    rounds = logical.orderBy("to_generation")
    # Every round completed: the last one's completion; else unknown.
    e = eps.withColumn("_start", F.min(F.when(F.col("phase") == 1, F.col("started_ms"))).over(logical)) \
        .withColumn("_end", F.when(F.count("completed_ms").over(logical) == F.count("*").over(logical),
                                   F.max("completed_ms").over(logical))) \
        .withColumn("_wait", F.max(F.when(F.col("phase") == 2, F.col("completed_ms") - F.lag("completed_ms").over(rounds)))
                    .over(logical))
    # Failures noticed by this logical rebalance: handovers whose new owner started inside it
    # (up to the two clocks' skew).
    spans = e.where(F.col("phase") == 1).select("cluster", "group_id", "incarnation", "logical_rebalance_id",
                                                "_start", "_end")
    stops = handed.where(F.col("_cause").isin("crash", "poll_timeout") & F.col("stop_estimate_ms").isNotNull()).select(
        "cluster", "group_id", F.col("from_ms").alias("_new"), F.col("stop_estimate_ms").alias("_stop"))
    inside = F.col("_new").between(F.col("_start") - CLOCK_SKEW_TOLERANCE_MS, F.col("_end") + CLOCK_SKEW_TOLERANCE_MS)
    failed = spans.join(stops, ["cluster", "group_id"]).where(inside) \
        .groupBy("cluster", "group_id", "incarnation", "logical_rebalance_id").agg(F.max(F.col("_end") - F.col("_stop")).alias("_failed"))
    e = e.join(failed, ["cluster", "group_id", "incarnation", "logical_rebalance_id"], "left")
    coop = F.coalesce(F.col("protocol"), F.lit("")).contains("cooperative")
    # A cooperative rebalance in one round (a member left: its partitions, revoked as it
    # left, are assigned when the round completes) waits from start to completion.
    one_round = F.when(F.coalesce("partitions_moved", F.lit(0)) > 0, F.col("_end") - F.col("_start"))
    revoked = (F.when(coop, F.coalesce("_wait", one_round, F.lit(0)))
               .when(F.coalesce("partitions_revoked", F.lit(0)) > 0, F.col("_end") - F.col("_start"))
               .otherwise(F.lit(0)))
    known = F.col("_start").isNotNull() & F.col("_end").isNotNull()
    unconsumed = (F.when(F.col("phase") != 1, F.lit(0))
                  .when(known, F.greatest(F.coalesce("_failed", F.lit(0)), revoked, F.lit(0))))
    return e.withColumn("unconsumed_ms", unconsumed.cast("long")).drop("_start", "_end", "_wait", "_failed")
