"""duplicate_windows: offsets at risk of being consumed twice, at every handover and rewind.

At a handover A → B of one partition, B resumes from the last committed offset
(`start_offset`). What A processed past that offset is consumed again. A's progress is
not in the records; it is bounded from its own commits:

* its commit cadence: had A kept going for a whole commit interval after its last commit,
  there would be another commit, so A stopped within one interval (`end_offset_high`,
  at A's peak commit rate; never later than the handover itself);
* when it stopped (`end_offset_estimate`, at A's mean rate):
  - crash: the coordinator expires a session `session.timeout.ms` after the last
    heartbeat, which on average came half a heartbeat interval before the crash;
  - poll timeout (librdkafka leaves with a plain LeaveGroup, the Java client says so in its
    reason): A stopped polling `max.poll.interval.ms` (the rebalance timeout stored in
    group metadata) before it left, and librdkafka's twice-a-second check a quarter of a
    second before that on average;
  - revocation without a final commit: A processed until the rebalance started;
  - a static member replaced by its own restart (same group.instance.id, no exit): unknown
    (the session never expired), bounded by the replacement;
  - when the stop time is unknown or falls outside the commit interval, the middle of the
    interval (a stop is equally likely anywhere in it).
* log-end offsets sampled in live mode cap both.

A handover whose old owner's last commit is a final one (written during the rebalance,
i.e. less than a heartbeat-and-a-bit before the join completed, as long before the owner's
own LeaveGroup, or off its regular cadence, as a commit on close or revoke is) has no
window; unless the coordinator removed the owner (dynamic: no LeaveGroup, so no close)
from a rebalance that started after that commit: then nothing asked for a final commit,
and the last was a regular one however early it came. (A member that leaves without a
commit of its own, right after a regular one, is taken as clean: it can only have processed
what came in that moment.) In a transactional group the committed offset is exactly what
the committed output covers: anything re-processed was inside an aborted or fenced
transaction, so there is no window either.

Offsets rewound by a later commit (a seek back) are a window with cause `offset_rewind`.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from . import events as ev_mod
from . import settings
from .model import GoldInputs, GoldParams
from .ownership import COMMIT_PARTITION, rewound, with_neighbours

TP = COMMIT_PARTITION

# librdkafka's max.poll.interval.ms check runs on a timer of this period.
LIBRDKAFKA_POLL_CHECK_MS = 500

WINDOW_COLUMNS = [
    "cluster", "group_id", "incarnation", "topic", "partition", "from_member", "to_member",
    "from_instance_id", "to_instance_id", "handover_ts", "start_offset", "end_offset_estimate", "end_offset_high",
    "estimated_records", "cause", "last_commit_ts", "stop_estimate_ts", "commit_interval_ms", "rate_per_s",
    "handover_pos",
]


def owner_commit_gaps(attributed: DataFrame) -> DataFrame:
    """Each owner's commits per ownership interval, with the gap since its previous one
    (`gap_ms`, `d_off`, `gap_rate`), its rank from the start (`_n`) and whether the gap is a
    usual one (`usual_gap_ms`: every gap but the last)."""
    c = attributed.where(F.col("member_id").isNotNull())
    k = TP + ["member_id", "interval_start_pos"]
    w = Window.partitionBy(*k).orderBy("effective_log_offset")
    c = c.withColumn("gap_ms", F.col("commit_ms") - F.lag("commit_ms").over(w)) \
        .withColumn("d_off", F.col("offset") - F.lag("offset").over(w))
    c = c.withColumn("gap_rate", F.when((F.col("gap_ms") >= 500) & (F.col("d_off") >= 0), F.col("d_off") / F.col("gap_ms")))
    c = c.withColumn("_n", F.row_number().over(w)) \
        .withColumn("_from_end", F.row_number().over(Window.partitionBy(*k).orderBy(F.desc("effective_log_offset"))))
    # The owner's usual gap leaves its last one out: that is the gap under judgement (a
    # final commit on close comes early), and it must not set the measure it is held to.
    return c.withColumn("usual_gap_ms", F.when(F.col("_from_end") > 1, F.col("gap_ms")))


def owner_commit_stats(gaps: DataFrame) -> DataFrame:
    """Per ownership interval: the owner's last commit, its cadence and rate on the partition."""
    return gaps.groupBy(*TP, "member_id", "interval_start_pos").agg(
        F.count("*").alias("n_commits"),
        F.max_by("offset", "effective_log_offset").alias("last_offset"),
        F.max_by("commit_ms", "effective_log_offset").alias("last_ms"),
        F.max_by("gap_ms", "effective_log_offset").alias("last_gap_ms"),
        F.max(F.when(F.col("_n") == 2, F.col("offset"))).alias("second_offset"),
        F.max(F.when(F.col("_n") == 2, F.col("commit_ms"))).alias("second_ms"),
        F.percentile_approx("usual_gap_ms", 0.5).alias("cadence_ms"),
        F.percentile_approx("usual_gap_ms", 0.9).alias("cadence_high_ms"),
        F.max("gap_rate").alias("peak_rate"),
        F.max(F.coalesce("transactional", F.lit(False)).cast("int")).alias("txn"),
    ).withColumnRenamed("member_id", "from_member").withColumnRenamed("interval_start_pos", "from_start_pos")


def member_cadences(gaps: DataFrame) -> DataFrame:
    """Per member: its commit cadence over all its partitions. A consumer commits on one
    timer for everything it owns, so a partition it got lately (too few commits of its own
    there) keeps the member's cadence, not the other owners' of that partition."""
    return gaps.groupBy("cluster", "group_id", F.col("member_id").alias("from_member")).agg(
        F.percentile_approx("usual_gap_ms", 0.5).alias("member_cadence_ms"),
        F.percentile_approx("usual_gap_ms", 0.9).alias("member_cadence_high_ms"),
    )


def partition_rates(attributed: DataFrame) -> DataFrame:
    """The group's commit rate and cadence on each partition, for owners with too few commits of their own.

    The rate is the median of the rates between consecutive commits: each new owner first
    catches up on the backlog a rebalance left (and the first owner on what was produced
    before the group started), a burst that an average over all commits would spread into
    the partition's rate (a third too high on a partition with one handover and a manual
    committer). The mean over all commits stands in when no gap is long enough to measure."""
    c = with_neighbours(attributed, {"offset": "_prev_off", "commit_ms": "_prev_ms"})
    c = c.withColumn("gap_ms", F.col("commit_ms") - F.col("_prev_ms")).withColumn("d_off", F.col("offset") - F.col("_prev_off"))
    gap_rate = F.when((F.col("gap_ms") >= 500) & (F.col("d_off") >= 0), F.col("d_off") / F.col("gap_ms"))
    mean_rate = (F.sum(F.when((F.col("gap_ms") > 0) & (F.col("d_off") >= 0), F.col("d_off")))
                 / F.sum(F.when((F.col("gap_ms") > 0) & (F.col("d_off") >= 0), F.col("gap_ms"))))
    return c.groupBy(*TP).agg(
        F.coalesce(F.percentile_approx(gap_rate, 0.5), mean_rate).alias("tp_rate"),
        F.max(gap_rate).alias("tp_peak_rate"),
        F.percentile_approx("gap_ms", 0.5).alias("tp_cadence_ms"),
    )


def handovers(intervals: DataFrame) -> DataFrame:
    """Consecutive ownership intervals of one partition with different members (same group incarnation)."""
    m = intervals.where(F.col("owner_kind") == "member")
    w = Window.partitionBy(*TP).orderBy("start_pos")
    prev = {c: F.lag(c).over(w) for c in ("member_id", "group_instance_id", "start_pos", "end_pos", "end_join_ts",
                                           "to_ms", "owner_left", "session_timeout_ms", "rebalance_timeout_ms",
                                           "incarnation", "end_generation", "protocol_kind")}
    h = m
    for c, expr in prev.items():
        h = h.withColumn("prev_" + c, expr)
    return h.where(F.col("prev_member_id").isNotNull() & (F.col("prev_member_id") != F.col("member_id"))
                   & (F.col("prev_incarnation") == F.col("incarnation")))


def resumed_from(starts: DataFrame, attributed: DataFrame) -> DataFrame:
    """The committed offset a new owner resumed from: for each (partition, `start_pos`) of
    `starts`, the last commit before that position (`start_offset`, `resume_commit_ms`).

    An as-of lookup in one ordered pass over the partition's commits and starts together
    (a start sorts before a commit at its own position: only commits before it count); a
    join of every start with every earlier commit grows with their product."""
    starts = starts.select(*TP, F.col("start_pos").alias("_pos"), F.lit(0).alias("_kind"),
                           F.lit(None).cast("struct<o:bigint,ms:bigint>").alias("_c"))
    commits = attributed.select(*TP, F.col("effective_log_offset").alias("_pos"), F.lit(1).alias("_kind"),
                                F.struct(F.col("offset").alias("o"), F.col("commit_ms").alias("ms")).alias("_c"))
    w = Window.partitionBy(*TP).orderBy("_pos", "_kind").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    last = F.last("_c", ignorenulls=True).over(w)
    return starts.unionByName(commits).withColumn("_last", last).where(F.col("_kind") == 0).select(
        *TP, F.col("_pos").alias("start_pos"), F.col("_last.o").alias("start_offset"), F.col("_last.ms").alias("resume_commit_ms"))


def handover_estimates(inputs: GoldInputs, intervals: DataFrame, attributed: DataFrame, params: GoldParams) -> DataFrame:
    """Every handover with what its old owner did last: its last commit (`last_ms`), when it
    stopped processing (`stop_estimate_ms`, null when no record says: a static member's
    restart), whether its last commit was a final one (`_final`), the offsets it may have
    processed past it and the cause (`_cause`). The duplicate windows are cut from these
    rows; the episodes take their partitions' unconsumed time from the same stops."""
    h = handovers(intervals)
    gaps = owner_commit_gaps(attributed)
    stats = owner_commit_stats(gaps)
    h = h.withColumn("from_member", F.col("prev_member_id")).withColumn("from_start_pos", F.col("prev_start_pos")) \
        .join(stats, TP + ["from_member", "from_start_pos"], "left")
    h = h.join(partition_rates(attributed), TP, "left")
    h = h.join(member_cadences(gaps), ["cluster", "group_id", "from_member"], "left")
    h = h.join(resumed_from(h.select(*TP, "start_pos").distinct(), attributed), TP + ["start_pos"], "left")

    exits = ev_mod.member_exits(inputs)
    if exits is not None:
        h = h.join(exits.withColumnRenamed("member_id", "prev_member_id"), ["cluster", "group_id", "prev_member_id"], "left")
    else:
        h = h.withColumn("exit_ts", F.lit(None).cast("long")).withColumn("exit_kind", F.lit(None).cast("string"))
    starts = ev_mod.rebalance_starts(inputs)
    if starts is not None:
        st = starts.select("cluster", "group_id", F.col("old_generation"), F.col("start_ts").alias("rebalance_start_ts"))
        st = st.withColumn("prev_end_generation", F.col("old_generation") + 1).drop("old_generation")
        h = h.join(st, ["cluster", "group_id", "prev_end_generation"], "left")
    else:
        h = h.withColumn("rebalance_start_ts", F.lit(None).cast("long"))

    h = settings.attach(h, inputs.cluster_settings, params)
    classic = F.col("prev_protocol_kind") == "classic"
    hb = F.when(classic, F.col("classic_heartbeat_interval_ms")).otherwise(F.col("consumer_heartbeat_interval_ms"))
    session = F.coalesce(F.col("prev_session_timeout_ms").cast("long"), F.col("consumer_session_timeout_ms"))
    hb = F.least(hb, session / 3)
    # A static member (group.instance.id) restarted inside its session timeout is replaced
    # under the same instance id with no rebalance and no exit: the new process resumes from
    # the last commit. The replacement (the new owner's first record) ends the old owner's
    # time; when within it the old process stopped, nothing records.
    static_replaced = (F.col("prev_group_instance_id") == F.col("group_instance_id")) & F.col("exit_ts").isNull()
    static_replaced = F.coalesce(static_replaced, F.lit(False))
    end_join = F.when(static_replaced, F.col("from_ms")).otherwise(F.coalesce("prev_end_join_ts", "prev_to_ms"))
    gap_to_join = end_join - F.col("last_ms")
    cadence = F.coalesce("cadence_ms", "member_cadence_ms", "tp_cadence_ms")
    cadence_high = F.coalesce("cadence_high_ms", "member_cadence_high_ms", "tp_cadence_ms")
    # A final commit: written while the rebalance was under way, just before the owner's
    # own LeaveGroup (a consumer closing commits, then leaves), or off the owner's cadence:
    # a fifth early, or, for an owner whose commits keep time (auto-commit's timer), clearly
    # earlier than its usual gap less three times its jitter (a close or a revocation
    # commits at once; a crash leaves the last regular commit). Jitter needs two usual gaps
    # to be measured (the last gap, under judgement, is not one): with one, only a fifth counts.
    grace = F.least(hb + 1000, session / 2)
    jitter = F.col("cadence_high_ms") - F.col("cadence_ms")
    early = F.col("cadence_ms") - F.greatest(3 * jitter, F.lit(0.05) * F.col("cadence_ms"))
    before_own_leave = (F.col("exit_kind") == "leave") & (F.col("exit_ts") - F.col("last_ms")).between(0, grace)
    # A static member's replacement is no rebalance: a supervisor restarts a crashed process
    # as quickly as a closed one, so how soon the replacement came says nothing of a final
    # commit. Where the owner's cadence can judge its last commit (three commits or more),
    # only the cadence does; a crash a second after a regular commit still has its window.
    judged_by_cadence = static_replaced & F.coalesce(F.col("n_commits") >= 3, F.lit(False))
    during_rebalance = (gap_to_join <= grace) & ~judged_by_cadence
    final_commit = during_rebalance | before_own_leave | ((F.col("n_commits") >= 3) & (
        (F.col("last_gap_ms") < F.lit(params.off_cadence_ratio) * F.col("cadence_ms"))
        | ((F.col("n_commits") >= 4) & (F.col("last_gap_ms") < early))))
    # The timing rules are guesses where the coordinator's lines say what happened: a dynamic
    # owner the coordinator removed (session expiry, poll timeout: no LeaveGroup, so no
    # close), from a rebalance that started after its last commit (so no revocation asked for
    # one), wrote a regular last commit, however early it came. On a loaded machine one late
    # loop makes the next gap look short: with a single usual gap to measure against, the
    # cadence rule alone judged such crashes final and left their partitions without a
    # window. A static member (group.instance.id) closes without a LeaveGroup and its
    # session then expires: its early last commit may well be a close's.
    expired = F.col("prev_group_instance_id").isNull() & F.col("prev_owner_left") \
        & F.col("exit_kind").isin("crash", "poll_timeout") \
        & (F.col("exit_ts") >= F.col("last_ms")) \
        & F.coalesce(F.col("rebalance_start_ts") > F.col("last_ms"), F.lit(True))
    h = h.withColumn("_final", F.coalesce(final_commit & ~F.coalesce(expired, F.lit(False)), F.lit(False)))
    # Commits stop when there is nothing new to commit (auto-commit and most manual loops
    # skip unchanged offsets). A silence before the handover longer than the owner's cadence
    # that neither a failure detection (session timeout) nor a poll timeout (rebalance
    # timeout) explains means the owner had nothing left to process: no window.
    detect = F.least(session, F.coalesce(F.col("prev_rebalance_timeout_ms").cast("long"), session))
    silent = gap_to_join > cadence_high + grace
    explained = (F.coalesce("prev_owner_left", F.lit(False)) & (gap_to_join >= detect - hb - cadence_high)) \
        | static_replaced
    h = h.withColumn("_idle_owner", F.coalesce(silent & ~explained, F.lit(False)))
    h = h.withColumn("_txn", F.coalesce(F.col("txn") == 1, F.lit(False)))

    left = F.coalesce("prev_owner_left", F.lit(False))
    # librdkafka leaves on a poll timeout with a plain LeaveGroup (no reason): a leave whose
    # owner had been silent for about max.poll.interval.ms (the rebalance timeout) is one.
    silent_before_exit = F.col("exit_ts") - F.col("last_ms")
    poll_like = silent_before_exit >= F.col("prev_rebalance_timeout_ms") - cadence_high
    librdkafka_poll = (F.col("exit_kind") == "leave") & F.coalesce(poll_like, F.lit(False))
    kind = F.when(librdkafka_poll, "poll_timeout").otherwise(F.col("exit_kind"))
    # When did the old owner stop processing?
    stop_crash = F.coalesce("exit_ts", end_join) - session + hb / 2
    # librdkafka looks at the time since the last poll twice a second: it leaves on average a
    # quarter of a second after max.poll.interval.ms ran out.
    stop_poll = F.col("exit_ts") - F.col("prev_rebalance_timeout_ms") \
        - F.when(librdkafka_poll, F.lit(LIBRDKAFKA_POLL_CHECK_MS / 2)).otherwise(F.lit(0))
    stop_revoke = F.coalesce("rebalance_start_ts", end_join)
    stop = (F.when(static_replaced, F.lit(None))
            .when(left & (kind == "poll_timeout"), stop_poll)
            .when(left & (kind == "leave"), stop_poll)
            .when(left, stop_crash)
            .otherwise(stop_revoke))
    h = h.withColumn("stop_estimate_ms", stop.cast("long"))
    dt_known = F.col("stop_estimate_ms") - F.col("last_ms")
    # How long the owner processed after its last commit: up to its stop when the stop is
    # known and the owner's own cadence allows it; had it gone on past its cadence it would
    # have committed again, so half a cadence otherwise. Only the owner's own cadence (on
    # the partition, or on its other partitions) can overrule a known stop: the partition's
    # cadence is other owners' timers (a manual committer every 6 s on a partition an
    # auto-committer took over every second), and it says nothing of this owner.
    own_cadence_high = F.coalesce("cadence_high_ms", "member_cadence_high_ms")
    stop_known = dt_known > 0
    within_own = own_cadence_high.isNull() | (dt_known <= own_cadence_high)
    dt_est = F.when(stop_known & within_own, dt_known).otherwise(cadence / 2)
    dt_est = F.least(dt_est, F.greatest(gap_to_join, F.lit(0)))
    # The bound: a known stop without a cadence of the owner's is uncertain by a heartbeat
    # (the session's or the poll check's timing); else at most one of its commit intervals.
    dt_high = F.when(stop_known & own_cadence_high.isNull(), F.greatest(dt_known + hb, cadence_high)) \
        .otherwise(cadence_high)
    dt_high = F.least(dt_high, F.greatest(gap_to_join, F.lit(0)))
    # The owner's processing rate over its commits. A new owner first catches up on what was
    # produced while the partition sat unowned during the rebalance, so its first commit
    # interval measures a burst, not its rate: from the second commit on when there are
    # two intervals after it to measure, else the partition's rate over all its commits.
    mean_rate = F.when((F.col("n_commits") >= 3) & (F.col("last_ms") - F.col("second_ms") >= 1000),
                       (F.col("last_offset") - F.col("second_offset")) / (F.col("last_ms") - F.col("second_ms")))
    rate = F.coalesce(mean_rate, F.col("tp_rate"))
    peak = F.greatest(F.coalesce("peak_rate", rate), F.coalesce("tp_peak_rate", rate), rate)
    h = h.withColumn("rate_ms", rate).withColumn("peak_ms", peak)
    h = h.withColumn("end_offset_estimate", (F.col("start_offset") + F.round(F.col("rate_ms") * dt_est)).cast("long"))
    h = h.withColumn("end_offset_high", (F.col("start_offset") + F.ceil(F.col("peak_ms") * dt_high)).cast("long"))
    h = _cap_by_end_offsets(inputs, h)
    cause = (F.when(static_replaced, "static_member_replaced")
             .when(~left & (F.col("prev_protocol_kind") == "classic"), "eager_revocation_without_final_commit")
             .when(~left, "revocation_without_final_commit")
             .when(kind == "crash", "crash")
             .when(kind == "poll_timeout", "poll_timeout")
             .when(kind == "leave", "leave_without_final_commit")
             .otherwise("removed_without_final_commit"))
    return h.withColumn("_cause", cause).withColumn("_cadence", cadence)


def build_duplicate_windows(h: DataFrame, attributed: DataFrame) -> DataFrame:
    """The windows of the handovers `handover_estimates` gave, and the offset rewinds."""
    # A handover on a partition that had no traffic (peak rate 0, or capped by the sampled log
    # end at the resume offset) has an empty [start, end_high): nothing can be read twice,
    # so it is not a window.
    windows = h.where(~F.col("_final") & ~F.col("_txn") & ~F.col("_idle_owner") & F.col("start_offset").isNotNull()
                      & F.col("rate_ms").isNotNull() & (F.col("end_offset_high") > F.col("start_offset"))) \
        .select(
            "cluster", "group_id", "incarnation", "topic", "partition",
            F.col("prev_member_id").alias("from_member"), F.col("member_id").alias("to_member"),
            F.col("prev_group_instance_id").alias("from_instance_id"), F.col("group_instance_id").alias("to_instance_id"),
            F.timestamp_millis("from_ms").alias("handover_ts"), "start_offset",
            "end_offset_estimate", "end_offset_high",
            (F.col("end_offset_estimate") - F.col("start_offset")).alias("estimated_records"),
            F.col("_cause").alias("cause"),
            F.timestamp_millis("last_ms").alias("last_commit_ts"),
            F.timestamp_millis("stop_estimate_ms").alias("stop_estimate_ts"),
            F.col("_cadence").cast("long").alias("commit_interval_ms"),
            (F.col("rate_ms") * 1000).alias("rate_per_s"),
            F.col("start_pos").alias("handover_pos"),
        )
    return windows.unionByName(_rewinds(attributed))


def _cap_by_end_offsets(inputs: GoldInputs, h: DataFrame) -> DataFrame:
    """Live mode: nobody can have processed past the log end sampled after the handover."""
    if inputs.partition_end_offsets is None:
        return h
    e = inputs.partition_end_offsets.select("cluster", "topic", "partition", F.col("end_offset").alias("_eo"),
                                            F.unix_millis("sampled_at").alias("_es"))
    cap = h.select("cluster", "topic", "partition", "from_ms").distinct().join(e, ["cluster", "topic", "partition"]) \
        .where(F.col("_es") >= F.col("from_ms")).groupBy("cluster", "topic", "partition", "from_ms").agg(F.min_by("_eo", "_es").alias("_cap"))
    h = h.join(cap, ["cluster", "topic", "partition", "from_ms"], "left")
    for c in ("end_offset_estimate", "end_offset_high"):
        h = h.withColumn(c, F.when(F.col("_cap").isNotNull(), F.least(c, "_cap")).otherwise(F.col(c)))
    return h.drop("_cap")


def _rewinds(attributed: DataFrame) -> DataFrame:
    """A commit lower than the previous one: the offsets in between are consumed again by
    whoever resumes from it. Unless nobody does: when the same owner's next commit is back
    at or past the old offset, the owner kept its position and the low commit was only the
    latest on record for a moment (librdkafka retrying an older commit after a newer one
    was written, seen live on KIP-848 groups). That stays a `rewind` in commit_anomalies."""
    c = with_neighbours(attributed, {"offset": "_prev_off", "member_id": "_prev_member", "incarnation": "_prev_inc"},
                        {"offset": "_next_off", "member_id": "_next_member"})
    superseded = (F.col("_next_member") == F.col("member_id")) & (F.col("_next_off") >= F.col("_prev_off"))
    r = c.where(rewound() & ~F.coalesce(superseded, F.lit(False)))
    return r.select(
        "cluster", "group_id", "incarnation", "topic", "partition",
        F.col("_prev_member").alias("from_member"), F.col("member_id").alias("to_member"),
        F.lit(None).cast("string").alias("from_instance_id"), F.col("group_instance_id").alias("to_instance_id"),
        F.col("record_ts").alias("handover_ts"), F.col("offset").alias("start_offset"),
        F.col("_prev_off").alias("end_offset_estimate"), F.col("_prev_off").alias("end_offset_high"),
        (F.col("_prev_off") - F.col("offset")).alias("estimated_records"),
        F.lit("offset_rewind").alias("cause"), F.col("record_ts").alias("last_commit_ts"),
        F.lit(None).cast("timestamp").alias("stop_estimate_ts"), F.lit(None).cast("long").alias("commit_interval_ms"),
        F.lit(None).cast("double").alias("rate_per_s"), F.col("effective_log_offset").alias("handover_pos"),
    )
