"""Gold findings on all fourteen recordings, checked against the consumers' ground truth.

Gold is built in few passes over the shared recordings lakes (tests/recordings_lake.py,
one `cluster` per recording), and every test then filters by cluster:

* `update_gold` on the segments lake (segment files + server.log), written to the lake:
  the findings tests read the written tables back;
* one `build_all` pass over both lakes *without* logs, the segments lake's clusters as
  `segments/<scenario>` and the wire lake's as `wire/<scenario>`: the two inputs must give
  identical tables, and the same handovers, owners and windows as with logs.

Ground truth: `consumers/*.jsonl` summarized in each recording's `truth_summary.json`
(../shared/recordings/README.md). Per-recording settings (client heartbeat interval,
KIP-848 broker session settings) come from `scenario.json` and `server.properties`, as a
user would pass them; every other parameter is the default a user's `run` gets (storms:
K=5 stop-the-world rebalances' worth inside W=10 minutes).
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from functools import lru_cache

import pytest
from pyspark.sql import functions as F

from pipelines.gold import GoldParams, build_all, runner, settings
from tests.conftest import RECORDINGS
from tests.recordings_lake import SCENARIOS, WIRE_SCENARIOS, segments_lake, spark, wire_lake  # noqa: F401

pytestmark = pytest.mark.skipif(not SCENARIOS, reason="recordings not found")

PARAMS = GoldParams()
TRANSIENT = {"cooperative_handover_in_progress", "kip848_pending_revocation"}


# ----------------------------------------------------------------------------- ground truth
@lru_cache(maxsize=None)
def truth(scenario: str) -> dict:
    return json.loads((RECORDINGS / scenario / "truth_summary.json").read_text())


def real_duplicates(scenario: str) -> dict[str, set]:
    """Per group: the (topic, partition, offset) really processed more than once.

    Transactional groups: only processing inside committed transactions counts (an
    aborted transaction's output never became visible)."""
    out = {}
    for g, v in truth(scenario)["groups"].items():
        d = v["duplicates"]
        if d.get("effective_duplicates_in_committed_transactions") is not None:
            # [client, member, ts, incarnation, generation_hint, txn_seq, txn_committed]
            offs = {(t, p, o) for t, p, o, procs in d["list"] if sum(1 for x in procs if x[6]) > 1}
            assert len(offs) == d["effective_duplicates_in_committed_transactions"]
        else:
            offs = {(t, p, o) for t, p, o, _ in d["list"]}
        out[g] = offs
    return out


def recording_settings(scenario: str, cluster: str | None = None) -> dict:
    """The settings a user of this recording's cluster would give: the clients' heartbeat
    interval (scenario.json) and the broker's group.consumer.* (server.properties)."""
    sc = json.loads((RECORDINGS / scenario / "scenario.json").read_text())
    found: list[int] = []

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "heartbeat.interval.ms":
                    found.append(int(v))
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(sc)
    hb = Counter(found).most_common(1)[0][0] if found else None
    return settings.from_broker_properties(cluster or scenario, (RECORDINGS / scenario / "server.properties").read_text(), hb)


# ----------------------------------------------------------------------------- gold passes
class Tables:
    """Gold tables as Python rows, by cluster."""

    def __init__(self, rows: dict[str, list[dict]]):
        self.rows = rows

    def of(self, table: str, cluster: str, group: str | None = None) -> list[dict]:
        return [r for r in self.rows[table] if r["cluster"] == cluster and (group is None or r["group_id"] == group)]


@pytest.fixture(scope="module")
def gold_run(segments_lake):
    run = runner.update_gold(segments_lake, PARAMS, cluster_settings=[recording_settings(s) for s in SCENARIOS])
    return run


@pytest.fixture(scope="module")
def gold(segments_lake, gold_run) -> Tables:
    """The tables update_gold wrote, read back from the lake (no Spark job)."""
    return Tables({t: segments_lake.read_arrow(t).to_pylist() for t in runner.GOLD_TABLES})


def _renamed(inputs, prefix: str, with_logs: bool):
    out = {}
    for name, df in vars(inputs).items():
        if df is None or (name == "coordinator_events" and not with_logs):
            continue
        out[name] = df.withColumn("cluster", F.concat(F.lit(prefix), F.col("cluster")))
    return out


@pytest.fixture(scope="module")
def without_logs(segments_lake, wire_lake, spark) -> Tables:  # noqa: F811
    """One pass, no logs: clusters `segments/<scenario>` and `wire/<scenario>`."""
    from pipelines.gold import GoldInputs

    seg = _renamed(runner.read_inputs(segments_lake), "segments/", with_logs=False)
    wire = _renamed(runner.read_inputs(wire_lake), "wire/", with_logs=False)
    merged = {}
    for name in set(seg) | set(wire):
        parts = [d[name] for d in (seg, wire) if name in d]
        df = parts[0]
        for p in parts[1:]:
            df = df.unionByName(p, allowMissingColumns=True)
        merged[name] = df
    rows = [recording_settings(s, p + s) for p in ("segments/", "wire/") for s in SCENARIOS]
    merged["cluster_settings"] = settings.to_spark(spark, rows)
    merged.pop("partition_end_offsets", None)
    out = build_all(GoldInputs(**merged), PARAMS)
    wanted = ("rebalance_episodes", "duplicate_windows", "ownership_intervals", "idle_consumers", "rebalance_storms")
    return Tables({t: [r.asDict() for r in out[t].collect()] for t in wanted})


# ----------------------------------------------------------------------------- figures
def window_figures(tables: Tables, scenario: str, cluster: str | None = None) -> dict:
    cluster = cluster or scenario
    real = real_duplicates(scenario)
    wins = tables.of("duplicate_windows", cluster)
    total = sum(len(s) for s in real.values())
    covered = sum(
        1 for g, offs in real.items() for (t, p, o) in offs
        if any(w["group_id"] == g and w["topic"] == t and w["partition"] == p
               and w["start_offset"] <= o < w["end_offset_high"] for w in wins)
    )
    return {
        "real": total,
        "covered": covered,
        "high": sum(w["end_offset_high"] - w["start_offset"] for w in wins),
        "estimate": sum(w["estimated_records"] for w in wins),
        "windows": len(wins),
    }


# ----------------------------------------------------------------------------- duplicates
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_windows_cover_real_duplicates(gold, scenario):
    f = window_figures(gold, scenario)
    total = f["real"]
    assert f["covered"] >= math.ceil(0.99 * total), f
    assert f["high"] <= 3 * total, f
    assert abs(f["estimate"] - total) <= 0.25 * total, f


def test_classic_episodes_carry_their_groups_protocol(gold):
    """An episode the records do not name a protocol for (a logged start no record completed,
    an empty group's generation) takes its group's latest: never null while the group has
    one on record. (It once took the first row's, null when that row was an empty
    generation, and which row came first depended on how Spark had laid the rows out.)"""
    eps = [r for r in gold.rows["rebalance_episodes"] if r["protocol_kind"] == "classic"]
    named = {(r["cluster"], r["group_id"]) for r in eps if r["protocol"] is not None}
    unnamed = [(r["cluster"], r["group_id"], r["to_generation"]) for r in eps
               if r["protocol"] is None and (r["cluster"], r["group_id"]) in named]
    assert named and not unnamed


def test_window_causes(gold):
    # README: c2 SIGKILLed (crash_autocommit); c2 stalled past max.poll.interval.ms and
    # librdkafka left the group (poll_timeout); k2 SIGKILLed and fenced (kip848).
    for scenario, cause in (("crash_autocommit", "crash"), ("poll_timeout", "poll_timeout"),
                            ("kip848_consumer_protocol", "crash")):
        assert {w["cause"] for w in gold.of("duplicate_windows", scenario)} == {cause}, scenario


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_no_estimated_duplicates_where_none_happened(gold, scenario):
    real = real_duplicates(scenario)
    bad = [w for w in gold.of("duplicate_windows", scenario) if not real.get(w["group_id"]) and w["estimated_records"] > 0]
    assert bad == []


# ----------------------------------------------------------------------------- idle members
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_idle_members_found(gold, scenario):
    rows = gold.of("idle_consumers", scenario)
    found = {(r["group_id"], r["member_id"], r["generation"]): r for r in rows}
    expected = set()
    for g, v in truth(scenario)["groups"].items():
        for gen, members in (v.get("idle_members_per_generation") or {}).items():
            for m in members:
                expected.add((g, m["member_id"], int(gen)))
    missing = expected - set(found)
    assert not missing, missing
    # What the consumers never saw as idle can only be a transient state (a member between
    # the two rounds of a cooperative handover, or reconciling under KIP-848).
    extra = {k: found[k]["cause"] for k in set(found) - expected if not found[k]["transient"]}
    assert not extra, extra
    for k in expected:
        protocol_transient = found[k]["cause"] in TRANSIENT
        assert found[k]["transient"] == protocol_transient, found[k]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_idle_members_carry_the_client_id_they_ran_with(gold, scenario):
    """An SRE knows a consumer by its client.id; a KIP-848 member id is a bare UUID, and a
    member that left has a tombstone as its last record."""
    clients = {mid: client for v in truth(scenario)["groups"].values()
               for client, m in (v.get("members") or {}).items() for mid in m.get("member_ids") or []}
    rows = [r for r in gold.of("idle_consumers", scenario) if r["member_id"] in clients]
    assert [(r["member_id"], r["client_id"]) for r in rows if r["client_id"] != clients[r["member_id"]]] == []
    if scenario in ("kip848_consumer_protocol", "idle_overprovisioned"):
        assert rows


def test_idle_causes(gold):
    causes = {(r["member_id"][:2], r["generation"]): r["cause"] for r in gold.of("idle_consumers", "idle_overprovisioned")}
    assert causes == {("c5", 1): "more_members_than_partitions", ("c6", 1): "more_members_than_partitions",
                      ("c6", 2): "more_members_than_partitions"}
    coop = gold.of("idle_consumers", "cooperative_rolling")
    assert coop and all(r["cause"] == "cooperative_handover_in_progress" and r["transient"] for r in coop)


# ----------------------------------------------------------------------------- storms
def _strategies(scenario: str, group: str) -> set[str]:
    """The partition.assignment.strategy (or group.protocol=consumer) of the group's clients."""
    sc = json.loads((RECORDINGS / scenario / "scenario.json").read_text())
    out = set()
    for runs in sc.get("client_configs", {}).values():
        for cfg in runs:
            if cfg.get("group") == group:
                props = cfg.get("props") or cfg.get("conf") or {}
                out.add("consumer" if props.get("group.protocol") == "consumer"
                        else props.get("partition.assignment.strategy", "range"))
    return out


def expected_storm_groups(scenario: str) -> set[str]:
    """From the truth, by the definition in docs/gold.md: an eager group storms when K of its
    rebalances between two non-empty generations (each stops every partition; the
    coordinator's "Stabilized" lines) fall inside W minutes. Incremental groups (cooperative,
    KIP-848) revoke a partition share per rebalance; none of the recordings' reaches K.
    Only rebalances whose generation the coordinator's records still hold count: the lake
    cannot know membership that compaction erased (coverage_gaps says so)."""
    k, w_ms = PARAMS.storm_min_rebalances, PARAMS.storm_window_minutes * 60_000
    out = set()
    for group, v in truth(scenario)["groups"].items():
        if any("cooperative" in s.lower() or s == "consumer" for s in _strategies(scenario, group)):
            continue
        kept = set(v["rebalances"].get("offsets_topic_generations_with_members", []))
        stabilized = [s for s in v["rebalances"].get("server_log_stabilized", []) if s["generation"] in kept]
        stops = [b["ts_ms"] for a, b in zip(stabilized, stabilized[1:]) if a["members"] and b["members"]]
        if any(sum(1 for t in stops if t0 <= t <= t0 + w_ms) >= k for t0 in stops):
            out.add(group)
    return out


def test_storms_are_the_eager_groups_that_kept_stopping():
    """Not vacuous: the flapping recording storms, and the rolling restart does not."""
    assert "g-storm" in expected_storm_groups("storm_flapping")
    assert not expected_storm_groups("cooperative_rolling")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_storm_flagged_where_the_group_kept_stopping(gold, scenario):
    rows = gold.of("rebalance_storms", scenario)
    assert {r["group_id"] for r in rows} == expected_storm_groups(scenario)


def test_storm_details(gold):
    (storm,) = gold.of("rebalance_storms", "storm_flapping")
    assert storm["episodes"] >= PARAMS.storm_min_rebalances
    # Every flapper run is a new process with a new member id but the same client id and host.
    assert storm["flapping_members"] and all(m.startswith("flapper") for m in storm["flapping_members"]), storm
    assert storm["dominant_trigger"] in ("join", "leave")


# ----------------------------------------------------------------------------- episodes
def expected_episodes_with_logs(scenario: str, group: str) -> int:
    r = truth(scenario)["groups"][group]["rebalances"]
    if r["consumer_protocol_group_epochs"]:
        return len(r["consumer_protocol_group_epochs"])  # KIP-848: one per group epoch bump
    return len(r["server_log_preparing_rebalance"])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_one_episode_per_preparing_line(gold, scenario):
    for g in truth(scenario)["groups"]:
        eps = gold.of("rebalance_episodes", scenario, g)
        assert len(eps) == expected_episodes_with_logs(scenario, g), (g, sorted(e["to_generation"] for e in eps))
        assert len({e["to_generation"] for e in eps}) == len(eps), g


def synced_generations(scenario: str) -> set[tuple[str, int]]:
    """(group, generation) pairs whose sync the broker logged ("Assignment received from
    leader ... for generation N"): those rebalances completed, whatever compaction kept."""
    line = re.compile(r"Assignment received from leader .*? for group (\S+) for generation (\d+)\.")
    text = (RECORDINGS / scenario / "server.log").read_text(errors="replace")
    return {(m.group(1), int(m.group(2))) for m in line.finditer(text)}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_rebalance_the_coordinator_completed_is_never_counted_as_incomplete(gold, scenario):
    synced = synced_generations(scenario)
    open_ = {(e["group_id"], e["to_generation"]) for e in gold.of("rebalance_episodes", scenario)
             if e["completed_at"] is None and e["protocol_kind"] == "classic"}
    assert not open_ & synced, sorted(open_ & synced)


def test_compaction_removed_completions_the_log_still_has():
    """Not vacuous: in the compacted recording the broker logged syncs of generations whose
    GroupMetadata records compaction removed."""
    kept = set(truth("compressed_compacted")["groups"]["g-cmp-a"]["rebalances"]["offsets_topic_distinct_generations"])
    logged = {g for grp, g in synced_generations("compressed_compacted") if grp == "g-cmp-a"}
    assert logged - kept


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_one_episode_per_persisted_generation_without_logs(without_logs, scenario):
    for g, v in truth(scenario)["groups"].items():
        r = v["rebalances"]
        if r["consumer_protocol_group_epochs"]:
            expected = set(r["consumer_protocol_group_epochs"])
        else:
            expected = {m["generation"] for m in v["offsets_topic_group_metadata"]} - {0}
        eps = without_logs.of("rebalance_episodes", "segments/" + scenario, g)
        completed = {e["to_generation"] for e in eps if e["completed_at"] is not None}
        assert completed == expected, g
        assert all(e["start_source"] == "records" for e in eps)


# ----------------------------------------------------------------------------- inputs agree
def _key(table: str, r: dict) -> tuple:
    drop = {"cluster"}
    return tuple(sorted((k, str(v)) for k, v in r.items() if k not in drop))


@pytest.mark.parametrize("scenario", WIRE_SCENARIOS)
def test_segments_and_wire_agree(without_logs, scenario):
    for table in without_logs.rows:
        a = sorted(_key(table, r) for r in without_logs.of(table, "segments/" + scenario))
        b = sorted(_key(table, r) for r in without_logs.of(table, "wire/" + scenario))
        assert a == b, table


HANDOVER = ("group_id", "topic", "partition", "from_member", "to_member", "start_offset", "end_offset_high")
OWNER = ("group_id", "topic", "partition", "member_id", "start_pos", "end_pos")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_logs_change_only_times_and_reasons(gold, without_logs, scenario):
    for table, cols in (("duplicate_windows", HANDOVER), ("ownership_intervals", OWNER)):
        a = sorted(tuple(r[c] for c in cols) for r in gold.of(table, scenario))
        b = sorted(tuple(r[c] for c in cols) for r in without_logs.of(table, "segments/" + scenario))
        assert a == b, table


# ----------------------------------------------------------------------------- runner
def test_update_gold_twice_is_identical(segments_lake, gold, gold_run):
    versions = {t: segments_lake.version(t) for t in runner.GOLD_TABLES}
    again = runner.update_gold(segments_lake, PARAMS, cluster_settings=[recording_settings(s) for s in SCENARIOS])
    # Nothing new in silver: no commit at all.
    assert again.mode == "none"
    assert {t: segments_lake.version(t) for t in runner.GOLD_TABLES} == versions
    forced = runner.update_gold(segments_lake, PARAMS, cluster_settings=[recording_settings(s) for s in SCENARIOS], full=True)
    assert forced.rows_written == gold_run.rows_written
    for t in runner.GOLD_TABLES:
        rows = segments_lake.read_arrow(t).to_pylist()
        assert sorted(map(repr, rows)) == sorted(map(repr, gold.rows[t])), t
        assert {r["cluster"] for r in rows} <= set(SCENARIOS)


def test_a_broker_clock_a_little_ahead_gives_no_negative_durations(segments_lake, gold, spark):  # noqa: F811
    """The coordinator's log and the records come from two clocks. With crash_autocommit's
    server.log moved just past its shortest rebalance (a broker clock a few ms ahead), that
    rebalance starts when it completes (duration 0) instead of ending before it began; every
    other logged start moves by the skew."""
    from pipelines.gold import GoldInputs
    from pipelines.gold.episodes import CLOCK_SKEW_TOLERANCE_MS

    scenario = "crash_autocommit"
    before = [r for r in gold.of("rebalance_episodes", scenario)
              if r["start_source"] == "log" and r["duration_ms"] is not None]
    shortest = min(r["duration_ms"] for r in before)
    skew = shortest + 3
    assert skew <= CLOCK_SKEW_TOLERANCE_MS
    inputs = {}
    for name, df in vars(runner.read_inputs(segments_lake)).items():
        if df is None or "cluster" not in df.columns:
            continue
        df = df.where(F.col("cluster") == scenario)
        inputs[name] = df.withColumn("ts", F.col("ts") + skew) if name == "coordinator_events" else df
    inputs.pop("partition_end_offsets", None)
    inputs["cluster_settings"] = settings.to_spark(spark, [recording_settings(scenario)])
    after = {(r["group_id"], r["to_generation"]): r.asDict()
             for r in build_all(GoldInputs(**inputs), PARAMS)["rebalance_episodes"].collect()}
    assert all(r["duration_ms"] is None or r["duration_ms"] >= 0 for r in after.values())
    # Spark collects naive local datetimes, delta-rs gives UTC ones: compare instants.
    for r in before:
        a = after[(r["group_id"], r["to_generation"])]
        assert a["completed_at"].timestamp() == r["completed_at"].timestamp()
        if r["duration_ms"] < skew:   # the skew would have put the start after the completion
            assert (a["started_at"].timestamp(), a["duration_ms"]) == (r["completed_at"].timestamp(), 0)
        else:
            assert a["duration_ms"] == r["duration_ms"] - skew


def test_a_recreated_topic_flags_each_commit_once_however_often_it_is_sampled(segments_lake, spark):  # noqa: F811
    """Live mode samples log-end offsets at every run. After a topic is deleted and recreated
    (its log end back at 0), each commit made before is past the new log end; it is flagged
    once, against the first sample after it, not again at every later sample."""
    from pipelines.gold import GoldInputs, anomalies, ownership

    scenario = "crash_autocommit"
    inputs = {}
    for name, df in vars(runner.read_inputs(segments_lake)).items():
        if df is not None and "cluster" in df.columns:
            inputs[name] = df.where(F.col("cluster") == scenario)
    inputs["cluster_settings"] = settings.to_spark(spark, [recording_settings(scenario)])
    commits = inputs["offset_commits"].where(~F.col("is_deletion"))
    last = commits.agg(F.max("record_ts")).first()[0]
    parts = commits.select("cluster", "topic", "partition").distinct()

    def flagged(samples: int) -> int:
        at = [F.lit(last) + F.expr(f"INTERVAL {60 * (i + 1)} SECONDS") for i in range(samples)]
        ends = parts.withColumn("sampled_at", F.explode(F.array(*at))).withColumn("end_offset", F.lit(0).cast("long"))
        gi = GoldInputs(**{**inputs, "partition_end_offsets": ends})
        snaps = ownership.assignment_snapshots(gi)
        attributed = ownership.build_commit_attribution(gi, ownership.build_ownership_intervals(gi, snaps, PARAMS))
        skips = anomalies.build_skip_windows(gi, attributed, PARAMS)
        return skips.where(F.col("cause") == "committed_past_log_end").count()

    once = flagged(1)
    assert 0 < once <= commits.where(F.col("offset") > 0).count()
    assert flagged(4) == once


def test_a_rewind_the_owner_overtakes_at_once_is_no_window(segments_lake, gold, spark):  # noqa: F811
    """librdkafka sometimes writes a retried older commit after a newer one (seen live on a
    KIP-848 group: 122, 127, 122, then 138 by the same member). The owner kept its
    position, so nothing is consumed twice: a rewind in commit_anomalies, no window. The
    same low commit as the owner's last before a handover is a window: the next owner
    resumes from it. Both are made from a recording's real commits by lowering one."""
    from pipelines.gold import GoldInputs, duplicates
    from pyspark.sql import Window

    scenario = "crash_autocommit"
    inputs = GoldInputs(**{name: (df.where(F.col("cluster") == scenario) if df is not None and "cluster" in df.columns else df)
                           for name, df in vars(runner.read_inputs(segments_lake)).items()})
    inputs = GoldInputs(**{**vars(inputs), "cluster_settings": settings.to_spark(spark, [recording_settings(scenario)])})
    intervals = segments_lake.read("ownership_intervals").where(F.col("cluster") == scenario)
    attributed = segments_lake.read("commit_attribution").where(F.col("cluster") == scenario)
    assert not [w for w in gold.of("duplicate_windows", scenario) if w["cause"] == "offset_rewind"]
    tp = ["cluster", "group_id", "topic", "partition"]
    w = Window.partitionBy(*tp).orderBy("effective_log_offset")
    ordered = attributed.where(F.col("member_id").isNotNull()).select(
        *tp, "effective_log_offset", "offset", "member_id",
        F.lag("offset").over(w).alias("prev_off"), F.lag("member_id").over(w).alias("prev_member"),
        F.lead("offset").over(w).alias("next_off"), F.lead("member_id").over(w).alias("next_member"))
    # Inside an owner's run of commits that advance (the retry case), and an owner's last
    # commit before another member's (the handover case).
    inside = ordered.where((F.col("prev_member") == F.col("member_id")) & (F.col("next_member") == F.col("member_id"))
                           & (F.col("prev_off") > 0) & (F.col("next_off") > F.col("prev_off"))).orderBy(*tp, "effective_log_offset").first()
    last = ordered.where((F.col("prev_member") == F.col("member_id")) & (F.col("next_member") != F.col("member_id"))
                         & (F.col("prev_off") > 0)).orderBy(*tp, "effective_log_offset").first()
    assert inside is not None and last is not None

    def windows_with_lowered(row) -> list:
        target = (F.col("group_id") == row.group_id) & (F.col("topic") == row.topic) \
            & (F.col("partition") == row.partition) & (F.col("effective_log_offset") == row.effective_log_offset)
        lowered = attributed.withColumn("offset", F.when(target, F.lit(row.prev_off - 1)).otherwise(F.col("offset")))
        handed = duplicates.handover_estimates(inputs, intervals, lowered, PARAMS)
        found = duplicates.build_duplicate_windows(handed, lowered).where(
            (F.col("cause") == "offset_rewind") & (F.col("group_id") == row.group_id)
            & (F.col("partition") == row.partition)).collect()
        return [(r.start_offset, r.end_offset_estimate) for r in found]

    assert windows_with_lowered(inside) == []
    assert windows_with_lowered(last) == [(last.prev_off - 1, last.prev_off)]


# ----------------------------------------------------------------------------- consumer lag
# Not transactional_commits (its commits take effect at markers) nor compressed_compacted (the
# cleaner removed the commits in force at the early samples: that lag is not in the lake).
LAG_SCENARIOS = [s for s in SCENARIOS if s not in ("transactional_commits", "compressed_compacted")]


def _lag_samples_and_truth(scenario: str, min_gap_ms: int = 400) -> tuple[list[tuple], dict]:
    """Log-end samples as live ingestion takes them, and the lag each must give, from the
    recording's own clients: the producer's deliveries (offset N delivered by time t: the
    log end is past N) and the commits each consumer saw acknowledged. Samples are taken
    halfway between acknowledgements at least `min_gap_ms` apart, so that no commit is in
    flight at a sample (written by the broker, not yet acknowledged)."""
    import datetime as dt

    def events(path):
        return [json.loads(line) for line in path.read_text().splitlines()]

    delivered = sorted((e["ts_ms"], e["topic"], e["partition"], e["offset"])
                       for e in events(RECORDINGS / scenario / "producer.jsonl")
                       if e["event"] == "delivered" and e.get("error") is None)
    acks = sorted((e["ts_ms"], e["group"], o["topic"], o["partition"], o["offset"])
                  for f in sorted((RECORDINGS / scenario / "consumers").glob("*.jsonl")) for e in events(f)
                  if e["event"] == "commit" and e.get("result") == "ok"
                  for o in e["offsets"] if o.get("error") is None and o["offset"] >= 0)
    times = sorted({a[0] for a in acks})
    samples, truth = [], {}
    for before, after in zip(times, times[1:]):
        if after - before < min_gap_ms:
            continue
        t = (before + after) // 2
        end: dict = {}
        for ts, topic, partition, offset in delivered:
            if ts <= t:
                end[(topic, partition)] = max(end.get((topic, partition), 0), offset + 1)
        committed: dict = {}
        for ts, group, topic, partition, offset in acks:
            if ts <= t:
                committed[(group, topic, partition)] = offset
        at = dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc).replace(tzinfo=None)
        samples += [(scenario, topic, partition, 0, e, at) for (topic, partition), e in end.items()]
        for (group, topic, partition), offset in committed.items():
            if (topic, partition) in end:
                truth[(scenario, group, topic, partition, at)] = end[(topic, partition)] - offset
    return samples, truth


@pytest.fixture(scope="module")
def sampled_lag(segments_lake, spark):  # noqa: F811
    """The recordings' lake as live ingestion at every quiet moment would see it: (samples,
    the lag each must give, gold's consumer_lag over them)."""
    from pipelines.gold import GoldInputs
    from pipelines.gold.lag import build_consumer_lag

    samples, truth = [], {}
    for scenario in LAG_SCENARIOS:
        s, t = _lag_samples_and_truth(scenario)
        samples += s
        truth.update(t)
    ends = spark.createDataFrame(samples, "cluster string, topic string, partition int, start_offset long, "
                                          "end_offset long, sampled_at timestamp")
    inputs = runner.read_inputs(segments_lake)
    return samples, truth, build_consumer_lag(GoldInputs(**{**vars(inputs), "partition_end_offsets": ends}))


def test_consumer_lag_at_every_sample_is_the_log_end_minus_the_acknowledged_commit(sampled_lag):
    _, truth, lag = sampled_lag
    got = {(r["cluster"], r["group_id"], r["topic"], r["partition"], r["sampled_at"]): r["lag"]
           for r in lag.where(F.col("cluster").isin(LAG_SCENARIOS)).collect()}
    assert len(truth) > 1000
    wrong = {k: (got.get(k), v) for k, v in truth.items() if got.get(k) != v}
    assert not wrong, sorted(wrong.items())[:10]
    # A sample before a group's first commit on a partition is no row: it had no position.
    assert set(got) >= set(truth) and all(v is not None for v in got.values())


def test_each_rebalance_carries_the_groups_lag_at_its_latest_sample_before_it(segments_lake, gold, sampled_lag):  # noqa: F811
    """`lag_at_start`: the lag of the group's partitions summed at the latest sample taken
    at or before the rebalance started, from the recordings' own producer and consumers."""
    from pipelines.gold.lag import with_lag_at_start

    samples, truth, lag = sampled_lag
    eps = segments_lake.read("rebalance_episodes").where(F.col("cluster").isin(LAG_SCENARIOS))
    got = with_lag_at_start(eps, lag).collect()
    assert len(got) == eps.count()
    times: dict = {}
    for cluster, *_, at in samples:
        times.setdefault(cluster, set()).add(at)
    checked = nonzero = 0
    for e in got:
        before = [t for t in times[e["cluster"]] if e["started_at"] is not None and t <= e["started_at"]]
        at = max(before, default=None)
        parts = [v for (c, g, _, _, t), v in truth.items() if (c, g, t) == (e["cluster"], e["group_id"], at)]
        if not parts:
            assert e["lag_at_start"] is None and e["lag_sampled_at"] is None, e
            continue
        assert (e["lag_at_start"], e["lag_sampled_at"]) == (sum(parts), at), (e["cluster"], e["group_id"], e["started_at"])
        checked += 1
        nonzero += e["lag_at_start"] > 0
    assert checked >= 20 and nonzero, (checked, nonzero)


# ----------------------------------------------------------------------------- unconsumed time
def processing_gaps(scenario: str, group: str, min_ms: int = 300) -> list[tuple[int, int]]:
    """Every stretch longer than `min_ms` in which a partition of `group` was processed by
    nobody, as (last message before, first message after) in epoch ms, from what the
    consumers really processed. The producer writes every partition many times a second, so
    a longer stretch is the group standing still."""
    seen: dict[tuple, list[int]] = {}
    for f in (RECORDINGS / scenario / "consumers").glob("*.jsonl"):
        for line in f.read_text().splitlines():
            d = json.loads(line)
            if d.get("event") == "processed" and d.get("group") == group:
                seen.setdefault((d["topic"], d["partition"]), []).append(d["ts_ms"])
    gaps = []
    for ts in seen.values():
        ts.sort()
        gaps += [(a, b) for a, b in zip(ts, ts[1:]) if b - a > min_ms]
    return gaps


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_episode_says_how_long_its_partitions_really_stood_still(gold, scenario):
    """Every rebalance with a logged start and a completion: its `unconsumed_ms` matches the
    longest stretch any partition of the group went unprocessed around it (ground truth:
    every message each consumer processed), within a heartbeat and a second (when within
    its last heartbeat a member died or heard of the rebalance, and how soon the new
    owner's first fetch returned, no record holds). A crash's partitions stand still from
    the crash until the new owner starts: the session timeout and then some, though the
    coordinator's rebalance itself takes under a second; so does a poll timeout's."""
    hb = recording_settings(scenario)["classic_heartbeat_interval_ms"] or PARAMS.classic_heartbeat_interval_ms
    checked, failures = 0, 0
    for g in truth(scenario)["groups"]:
        gaps = processing_gaps(scenario, g)
        for e in gold.of("rebalance_episodes", scenario, g):
            if e["started_at"] is None or e["completed_at"] is None or e["phase"] != 1:
                continue
            start, end = e["started_ms"], e["completed_ms"]
            real = max((b - a for a, b in gaps if a <= end and b >= start), default=0)
            assert abs(e["unconsumed_ms"] - real) <= hb + 1_000, (g, e["to_generation"], e["trigger"], e["unconsumed_ms"], real)
            if e["trigger"] in ("crash", "poll_timeout") or e["unconsumed_ms"] > 5_000:
                assert e["duration_ms"] < 2_000 < 5_000 < real, (g, e["to_generation"], e["duration_ms"], real)
                failures += 1
            checked += 1
    assert checked or not any(gold.of("rebalance_episodes", scenario))
    if scenario in ("crash_autocommit", "poll_timeout", "static_membership", "kip848_consumer_protocol"):
        assert failures, "the recording's failure was not found"
