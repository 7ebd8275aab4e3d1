"""Gold findings on the real recordings, checked against the consumers' ground truth.

Ground truth: `consumers/*.jsonl` and `truth_summary.json` of each recording
(../shared/recordings/README.md). Storm parameters fitted to the recordings' minute-long
timescale: K=10 logical rebalances inside W=1 minute.
"""
from __future__ import annotations

import math

import pytest

import gold_fixtures as gf

pytestmark = pytest.mark.skipif(not gf.SCENARIOS, reason="recordings not found")

STORM_K, STORM_W_MIN = 10, 1.0


def _real_duplicates(scenario: str) -> dict[str, set]:
    out = {}
    for g, v in gf.truth(scenario)["groups"].items():
        d = v["duplicates"]
        if d.get("effective_duplicates_in_committed_transactions") is not None:
            out[g] = set()  # transactional: only committed-transaction re-processing counts (there is none)
        else:
            out[g] = {(t, p, o) for t, p, o, _ in d["list"]}
    return out


def _windows(built):
    return [w for w in built.table("duplicate_windows")]


@pytest.mark.parametrize("scenario", ["crash_autocommit", "poll_timeout", "kip848_consumer_protocol"])
def test_windows_cover_real_duplicates(scenario):
    built = gf.build(scenario)
    real = _real_duplicates(scenario)
    wins = _windows(built)
    total = sum(len(s) for s in real.values())
    covered = sum(
        1 for g, offs in real.items() for (t, p, o) in offs
        if any(w["group_id"] == g and w["topic"] == t and w["partition"] == p
               and w["start_offset"] <= o < w["end_offset_high"] for w in wins)
    )
    high = sum(w["end_offset_high"] - w["start_offset"] for w in wins)
    est = sum(w["estimated_records"] for w in wins)
    assert covered >= math.ceil(0.99 * total), (covered, total)
    assert high <= 3 * total, (high, total)
    assert abs(est - total) <= 0.25 * total, (est, total)


@pytest.mark.parametrize("scenario", ["storm_flapping", "idle_overprovisioned", "static_membership", "transactional_commits"])
def test_no_estimated_duplicates_where_none_happened(scenario):
    built = gf.build(scenario)
    real = _real_duplicates(scenario)
    bad = [w for w in _windows(built) if not real.get(w["group_id"]) and w["estimated_records"] > 0]
    assert bad == []


@pytest.mark.parametrize("scenario", ["idle_overprovisioned", "cooperative_rolling", "kip848_consumer_protocol"])
def test_idle_members_found(scenario):
    built = gf.build(scenario)
    found = {(r["group_id"], r["member_id"], r["generation"]) for r in built.table("idle_consumers")}
    for g, v in gf.truth(scenario)["groups"].items():
        for gen, members in (v.get("idle_members_per_generation") or {}).items():
            for m in members:
                assert (g, m["member_id"], int(gen)) in found, (g, m, gen)


def test_storm_flagged_only_in_storm_group():
    from pipelines.gold import GoldParams, storms

    for scenario in ["storm_flapping", "cooperative_rolling", "multi_topic_sticky"]:
        built = gf.build(scenario)
        params = GoldParams(storm_min_rebalances=STORM_K, storm_window_minutes=STORM_W_MIN)
        rows = storms.build_rebalance_storms(built.gold["rebalance_episodes"], params).collect()
        groups = {r["group_id"] for r in rows}
        assert groups == ({"g-storm"} if scenario == "storm_flapping" else set()), (scenario, groups)


@pytest.mark.parametrize("scenario", ["crash_autocommit", "scale_out_range", "cooperative_rolling"])
def test_one_episode_per_preparing_line(scenario):
    built = gf.build(scenario)
    eps = built.table("rebalance_episodes")
    for g, v in gf.truth(scenario)["groups"].items():
        lines = v["rebalances"]["server_log_preparing_rebalance"]
        assert len([e for e in eps if e["group_id"] == g]) == len(lines), g


def test_segments_and_wire_agree():
    a = gf.build("crash_autocommit", "segments")
    b = gf.build("crash_autocommit", "wire")
    key = lambda w: (w["group_id"], w["topic"], w["partition"], w["from_member"], w["to_member"], w["start_offset"],
                     w["end_offset_estimate"], w["end_offset_high"], w["cause"])
    assert sorted(map(key, a.table("duplicate_windows"))) == sorted(map(key, b.table("duplicate_windows")))
