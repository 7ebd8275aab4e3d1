"""The real Kafka 3.9 server.logs of every recording: every coordinator line becomes an event,
and the events agree with what the recordings README states happened."""
from __future__ import annotations

import re
from collections import Counter

import pytest

from pipelines.logs import ReadStats, parse_events
from pipelines.logs.reader import is_coordinator_logger

_LOGGER_RE = re.compile(r"\(([\w.$\-]+)\)\s*$")


def _events(path):
    stats = ReadStats()
    return list(parse_events([path], stats=stats)), stats


def _scenarios(recordings_dir):
    return sorted(p.parent.name for p in recordings_dir.glob("*/server.log"))


def test_every_coordinator_line_of_every_recording_is_an_event(recordings_dir):
    logs = sorted(recordings_dir.glob("*/server.log"))
    assert len(logs) >= 14
    for log in logs:
        # Independent count: lines whose trailing logger is a group-coordinator logger, and
        # the replica manager's removals of fetchers that name an offsets partition.
        expected = fetchers = 0
        for line in log.read_text(encoding="utf-8").splitlines():
            m = _LOGGER_RE.search(line)
            if m and line.startswith("[") and is_coordinator_logger(m.group(1), line.split("] ", 2)[-1]):
                expected += 1
            elif m and m.group(1) == "kafka.server.ReplicaFetcherManager" and "__consumer_offsets-" in line:
                fetchers += 1
        expected += fetchers
        records, stats = _events(log)
        kinds = Counter(r["event"] for r in records)
        assert kinds["unrecognized"] == 0, [r["message"] for r in records if r["event"] == "unrecognized"]
        assert kinds["error"] == 0
        assert stats.coordinator_lines == expected == len(records), log
        assert kinds["replica_fetchers_removed"] == fetchers > 0, log
        assert stats.lines_read == len(log.read_bytes().splitlines())
        for r in records:
            assert r["broker"] == 1 and r["ts"] is not None and r["file"] == str(log) and r["line"] >= 1


def test_crash_autocommit_heartbeat_expiry_removes_c2(recordings_dir):
    records, _ = _events(recordings_dir / "crash_autocommit" / "server.log")
    failed = [r for r in records if r["event"] == "member_failed"]
    assert len(failed) == 1 and failed[0]["member_id"].startswith("c2-") and failed[0]["group_id"] == "g-crash"
    crash = [r for r in records if r["event"] == "rebalance_started" and r["trigger"] == "crash"]
    assert len(crash) == 1
    assert crash[0]["member_id"] == failed[0]["member_id"]
    assert "heartbeat expiration" in crash[0]["reason"]
    # README: generations 1-4 stabilized with 2, 3, 2 and 3 members.
    stab = [(r["generation"], r["members"]) for r in records if r["event"] == "group_stabilized" and r["group_id"] == "g-crash"]
    assert stab == [(1, 2), (2, 3), (3, 2), (4, 3)]


def test_poll_timeout_shows_a_leavegroup_removal_of_c2(recordings_dir):
    records, _ = _events(recordings_dir / "poll_timeout" / "server.log")
    starts = [r for r in records if r["event"] == "rebalance_started" and r["group_id"] == "g-poll"]
    leave_c2 = [r for r in starts if r["trigger"] == "leave" and r["member_id"].startswith("c2-")]
    assert leave_c2, "librdkafka leaves with an ordinary LeaveGroup on max.poll.interval.ms"
    assert "on LeaveGroup" in leave_c2[0]["reason"]
    # c2 rejoined with a new member id (README: generation 4).
    joins_c2 = {r["member_id"] for r in starts if r["trigger"] == "join" and r["member_id"].startswith("c2-")}
    assert len(joins_c2) == 2


def test_storm_flapping_has_22_stabilized_generations_of_g_storm(recordings_dir):
    records, _ = _events(recordings_dir / "storm_flapping" / "server.log")
    stab = [r for r in records if r["event"] == "group_stabilized" and r["group_id"] == "g-storm"]
    assert [r["generation"] for r in stab] == list(range(1, 23))
    assert {r["members"] for r in stab[3:]} == {3, 4}
    flapper_joins = [r for r in records if r["event"] == "rebalance_started" and r["group_id"] == "g-storm"
                     and r["trigger"] == "join" and r["member_id"].startswith("flapper-")]
    assert len(flapper_joins) == 10
    assert all(r["coordinator_partition"] == 2 for r in stab)


def test_kip848_epoch_bumps_fence_and_target_assignments(recordings_dir):
    records, _ = _events(recordings_dir / "kip848_consumer_protocol" / "server.log")
    g = [r for r in records if r["group_id"] == "g-848"]
    bumps = [r["epoch"] for r in g if r["event"] == "group_epoch_bumped"]
    assert bumps == [1, 2, 3, 4]
    fenced = [r for r in g if r["event"] == "member_fenced"]
    assert len(fenced) == 1
    assert fenced[0]["reason"] == "the member session expired" and fenced[0]["trigger"] == "crash"
    targets = [r for r in g if r["event"] == "target_assignment_computed"]
    assert [t["epoch"] for t in targets] == [1, 2, 3, 4, 5, 6]       # README: assignment epochs 1-6
    assert {t["assignor"] for t in targets} == {"uniform"}
    states = [r for r in g if r["event"] == "member_assignment_state"]
    assert {s["state"] for s in states} == {"STABLE", "UNRELEASED_PARTITIONS", "UNREVOKED_PARTITIONS"}
    assert all(s["coordinator_partition"] == 0 for s in states)
    joins = [r for r in g if r["event"] == "member_joined"]
    leaves = [r for r in g if r["event"] == "member_left"]
    # README: "8 join, leave and fenced lines".
    assert len(joins) + len(leaves) + len(fenced) == 8


def test_new_coordinator_classic_lines_carry_partition_from_prefix(recordings_dir):
    records, _ = _events(recordings_dir / "new_coordinator_classic" / "server.log")
    stab = [r for r in records if r["event"] == "group_stabilized" and r["group_id"] == "g-scale"]
    assert [r["generation"] for r in stab] == [1, 2, 3, 4]
    assert all(r["coordinator_partition"] == 2 and r["logger"].startswith("org.apache.kafka.") for r in stab)
    leave_starts = [r for r in records if r["event"] == "rebalance_started" and r["group_id"] == "g-scale"
                    and r["trigger"] == "leave"]
    assert leave_starts and all(r["removed_members"] for r in leave_starts)


def test_static_membership_replacement_and_expiry(recordings_dir):
    records, _ = _events(recordings_dir / "static_membership" / "server.log")
    replaced = [r for r in records if r["event"] == "static_member_replaced"]
    assert len(replaced) == 1 and replaced[0]["group_instance_id"] == "static-c2"
    assert any(r["event"] == "static_member_no_rebalance" for r in records)
    crash = [r for r in records if r["event"] == "rebalance_started" and r["trigger"] == "crash"]
    assert len(crash) == 1 and crash[0]["member_id"].startswith("static-c3-")


def test_compressed_compacted_expiry_dead_and_deleted_groups(recordings_dir):
    records, _ = _events(recordings_dir / "compressed_compacted" / "server.log")
    assert any(r["event"] == "offsets_expired" and r["count"] == 8 for r in records)   # "Removed 8 expired offsets"
    assert any(r["event"] == "group_dead" and r["group_id"] == "g-cmp-short" for r in records)
    deleted = [r for r in records if r["event"] == "groups_deleted"]
    assert len(deleted) == 1 and deleted[0]["groups"] == ["g-cmp-b"]
    stab = [r["generation"] for r in records if r["event"] == "group_stabilized" and r["group_id"] == "g-cmp-a"]
    assert stab == [1, 2, 3, 4, 5, 6]                                                   # README: generations 1-6


@pytest.mark.parametrize("scenario", ["scale_out_range", "cooperative_rolling", "multi_topic_sticky"])
def test_stabilized_counts_match_readme(recordings_dir, scenario):
    expected = {"scale_out_range": ("g-scale", [1, 2, 4, 3]),
                "cooperative_rolling": ("g-coop", None),
                "multi_topic_sticky": ("g-multi", [1, 3, 4, 5, 4, 3, 2, 1])}[scenario]
    records, _ = _events(recordings_dir / scenario / "server.log")
    group, members = expected
    stab = [r for r in records if r["event"] == "group_stabilized" and r["group_id"] == group]
    if members is None:
        assert len(stab) == 17                                                          # README: 17 generations
    else:
        assert [r["members"] for r in stab] == members
