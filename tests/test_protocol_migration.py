"""A group that moves from the classic protocol to KIP-848's and back keeps one history.

Kafka 4.x converts a classic group online when a member with ``group.protocol=consumer``
joins it, and converts it back when the last such member leaves while classic members stay
(``group.consumer.migration.policy``, ``bidirectional`` by default). On a real Kafka 4.4
broker (testbed), a ``range`` group of two classic members is upgraded member by member
(each leaves cleanly and comes back as a consumer-protocol member under the same client id),
one of the upgraded members is SIGKILLed 4 s after a commit, a classic member joins, and
the last consumer-protocol member leaves: the group is classic again.

The lake is filled the way a user fills it (``ingest kafka``, ``ingest logs``, ``run`` with its
defaults), and judged against what the consumers did: every acknowledged commit is in silver, the records consumed twice after the crash are inside
duplicate windows estimated within a quarter, no window claims records where none were
consumed twice, and the conversions are neither a storm nor idle members. Gold's blocking
checks pass, and what-if's: each protocol phase is replayed on its own.
"""
from __future__ import annotations

from collections import defaultdict

import pytest

from pipelines.lake import Lake
from testbed import KafkaCluster
from testbed.scenario import (
    CRASH_AFTER_COMMIT_S, CRASH_COMMIT_S, CLASSIC_MEMBER_DEFAULTS, CreateTopic, Crash, Drain, Join, Leave, Settle,
    Sleep, StartProducer, StopAll, StopProducer, run_scenario,
)
from tests.cli import need_kafka, run_cli
from tests.scenario_truth import crashed_progress, read_truth

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.alone]

CLUSTER = "migration"
GROUP = "migrating"
TOPIC = f"{GROUP}-in"


def _steps() -> list:
    def classic(name: str, commit: str = "auto") -> Join:
        return Join(name, commit=commit, assignor="range")

    def consumer(name: str, client_id: str, **kw) -> Join:
        return Join(name, protocol="consumer", assignor="uniform", client_id=client_id, **kw)

    return [
        CreateTopic(TOPIC, 6),
        StartProducer(TOPIC, 40.0),
        classic("c1"),
        classic("c2"),
        Settle(),
        Sleep(3),
        # Upgrade, one member at a time: the first consumer-protocol member converts the group.
        Leave("c1"),
        Settle(),
        consumer("c1-848", "c1", commit="auto"),
        Settle(),
        Sleep(3),
        Leave("c2"),
        Settle(),
        consumer("c2-848", "c2", commit="manual", commit_interval_s=CRASH_COMMIT_S),
        Settle(),
        Sleep(2 * CRASH_COMMIT_S + 1),  # two of its commit intervals: a cadence to judge by
        Crash("c2-848", after_commit_s=CRASH_AFTER_COMMIT_S),
        Settle(),
        Sleep(2),
        # Downgrade: a classic member joins; the last consumer-protocol member leaves.
        classic("c3"),
        Settle(),
        Sleep(2),
        Leave("c1-848"),
        Settle(),
        Sleep(3),
        StopProducer(),
        Drain(),
        StopAll(),
    ]



@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    need_kafka()
    root = tmp_path_factory.mktemp("migration")
    lake_dir = root / "lake"
    with KafkaCluster(root / "cluster", install=True) as cluster:
        result = run_scenario(cluster, _steps(), group_id=GROUP, workdir=root / "truth")
        run_cli("ingest", "kafka", "--lake", str(lake_dir), "--cluster", CLUSTER,
             "--bootstrap-servers", cluster.bootstrap_servers, "--timeout", "30")
        run_cli("ingest", "logs", "--lake", str(lake_dir), "--cluster", CLUSTER,
             *(f"--broker={n.node_id}={n.log_dir}" for n in cluster.brokers))
    run = run_cli("run", "--lake", str(lake_dir), "--cluster", CLUSTER,
                  "--client-heartbeat-ms", str(CLASSIC_MEMBER_DEFAULTS["heartbeat.interval.ms"]), timeout=1200, check=False)
    return result, Lake(lake_dir), run


def _rows(lake: Lake, table: str) -> list[dict]:
    return [r for r in lake.read_arrow(table).to_pylist() if r["cluster"] == CLUSTER and r.get("group_id") == GROUP]


def _covered(windows, duplicates):
    return {(t, p, o) for t, p, o in duplicates
            if any(w["topic"] == t and w["partition"] == p and w["start_offset"] <= o < w["end_offset_high"]
                   for w in windows)}


def test_the_run_passes_every_blocking_check(migrated):
    _, _, run = migrated
    assert run.returncode == 0, run.stderr[-3000:]


def test_what_if_replays_each_protocol_from_the_state_its_conversion_carried(migrated):
    """Each protocol phase is a what-if history of its own. A conversion writes what the
    members owned as the new protocol's first step, under the number the old protocol had
    reached: there every replay starts, and it is no round of theirs."""
    _, lake, _ = migrated
    kinds = {r["segment"]: r["group_kind"] for r in _rows(lake, "whatif_summary")}
    assert kinds == {0: "classic", 1: "consumer", 2: "classic"}, kinds
    rounds: dict[int, list[int]] = defaultdict(list)  # segment → generations of the actual rounds
    for r in sorted(_rows(lake, "whatif_episodes"), key=lambda r: r["round"]):
        if r["assignor"] == "actual":
            rounds[r["segment"]].append(r["generation"])
    epochs = {r["assignment_epoch"] for r in _rows(lake, "target_assignments")}
    generations = {r["generation"] for r in _rows(lake, "group_generations") if not r["is_deletion"]}
    for segment, recorded in ((1, epochs), (2, generations)):
        carried = rounds[segment - 1][-1]
        assert carried in recorded, (segment, carried, sorted(recorded))  # Kafka wrote the carried state
        assert rounds[segment] and min(rounds[segment]) > carried, (segment, carried, rounds)


def test_both_protocols_are_in_silver_and_every_acknowledged_commit(migrated):
    result, lake, _ = migrated
    protocols = {r["protocol_type"] for r in _rows(lake, "group_generations") if not r["is_deletion"]}
    assert "consumer" in protocols, protocols  # the classic phases
    assert _rows(lake, "consumer_group_epochs")  # the KIP-848 phase
    truth = read_truth(result)
    stored: dict[tuple, set[int]] = defaultdict(set)
    for r in _rows(lake, "offset_commits"):
        if not r["is_deletion"]:
            stored[(r["topic"], r["partition"])].add(r["offset"])
    missing = {tp: sorted(o - stored[tp]) for tp, o in truth.commits.items() if o - stored[tp]}
    assert not missing, missing
    crashed = crashed_progress(result)
    unexplained = {tp: sorted(o for o in offs - truth.commits.get(tp, set()) if o > crashed.get(tp, -1))
                   for tp, offs in stored.items()}
    assert not {tp: o for tp, o in unexplained.items() if o}, unexplained


def test_what_was_consumed_twice_is_in_windows_estimated_near_the_truth(migrated):
    result, lake, _ = migrated
    truth, windows = read_truth(result), _rows(lake, "duplicate_windows")
    duplicates = truth.duplicates
    covered = _covered(windows, duplicates)
    estimated = sum(w["estimated_records"] or 0 for w in windows)
    print(f"migration: {len(duplicates)} records consumed twice, {len(covered)} inside a window; "
          f"estimated {estimated} in {len(windows)} windows")
    assert duplicates, "the crash re-consumed nothing: the scenario tests nothing"
    assert len(covered) >= 0.99 * len(duplicates), sorted(duplicates - covered)[:20]
    assert abs(estimated - len(duplicates)) <= 0.25 * len(duplicates), (estimated, len(duplicates))
    empty = [w for w in windows if (w["estimated_records"] or 0) > 0 and not _covered([w], duplicates)]
    assert not empty, empty


def test_the_conversions_are_no_storm_and_leave_nobody_idle(migrated):
    _, lake, _ = migrated
    assert _rows(lake, "rebalance_episodes")
    assert not _rows(lake, "rebalance_storms")
    lasting = [r for r in _rows(lake, "idle_consumers") if not r["transient"]]
    assert not lasting, lasting


def _bronze_in_commits(source: Lake, lake_dir, commits: list) -> Lake:
    """A lake whose bronze holds `source`'s records, stored in one commit per predicate of
    (partition, offset), with silver updated after each commit (as scheduled runs do)."""
    from pipelines.ingest.bronze import Summary, offsets_writer
    from pipelines.silver.runner import update_offsets_silver

    rows = source.read_arrow("offsets_records").to_pylist()
    lake = Lake(lake_dir)
    writer = offsets_writer(lake, Summary())
    for keep in commits:
        for r in rows:
            if keep(r["partition"], r["offset"]):
                writer.add({k: v for k, v in r.items() if k != "ingest_version"})
        writer.flush()
        update_offsets_silver(lake)
    return lake


def _classic_history(lake: Lake) -> tuple[list, list]:
    gens = sorted((r["coordinator_partition"], r["log_offset"], r["generation"], r["is_deletion"],
                   bool(r["converted"]), r["incarnation"]) for r in _rows(lake, "group_generations"))
    members = sorted((r["log_offset"], r["member_id"], r["topic"], r["partition"], r["incarnation"])
                     for r in _rows(lake, "member_assignments"))
    return gens, members


def test_a_conversion_split_across_two_ingestion_commits_is_still_one(migrated, tmp_path):
    """Live ingestion commits every N records wherever a batch ends, so the conversion's
    batch (the classic record's tombstone, then the consumer group's records) can land in
    two bronze commits, and silver sees the tombstone one run before what follows it. The
    next run recognizes the conversion and renumbers the group: the same silver as the batch
    read whole (before, the tombstone stayed a deletion and the classic records after the
    conversion back were another incarnation)."""
    _, lake, _ = migrated
    conversions = [r for r in _rows(lake, "group_generations") if r["converted"]]
    assert conversions
    p, at = conversions[0]["coordinator_partition"], conversions[0]["log_offset"]
    whole = _bronze_in_commits(lake, tmp_path / "whole", [lambda part, off: True])
    split = _bronze_in_commits(lake, tmp_path / "split", [lambda part, off: part != p or off <= at,
                                                          lambda part, off: part == p and off > at])
    assert _classic_history(split) == _classic_history(whole)
    assert _classic_history(whole)[0] == _classic_history(lake)[0]
