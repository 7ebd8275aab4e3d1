"""A group's coordinator killed mid-scenario on a three-broker cluster: the history goes on.

The coordinator of a group is the leader of its `__consumer_offsets` partition. SIGKILL
that broker while two members consume and commit: the partition's leadership moves to
another replica (its leader epoch goes up), the new coordinator loads the group from the
log and the members find it. Silver keeps each record's `coordinator_epoch`, so the move
is in the history, at one log offset, after the kill; nothing else changes: one group
incarnation, generations that never go back, every commit a member saw acknowledged in
`offset_commits`, and `run` passes every blocking check.
"""
from __future__ import annotations


import pytest

from pipelines.lake import Lake
from testbed import KafkaCluster
from testbed.scenario import (
    CreateTopic, Drain, Join, Settle, Sleep, StartProducer, StopAll, StopCoordinator, StopProducer, run_scenario,
)
from tests.cli import need_kafka, run_cli
from tests.scenario_truth import read_truth

pytestmark = [pytest.mark.broker, pytest.mark.spark]

CLUSTER = "failover"
GROUP = "failover-orders"
TOPIC = "failover-orders-in"



@pytest.fixture(scope="module")
def failed_over(tmp_path_factory):
    need_kafka()
    root = tmp_path_factory.mktemp("failover")
    lake_dir = root / "lake"
    steps = [
        # Three replicas: the data must outlive the broker that goes, as the offsets do.
        CreateTopic(TOPIC, 6, replication_factor=3),
        StartProducer(TOPIC, 20),
        Join("c1", commit="auto", assignor="range"),
        Join("c2", commit="manual", commit_interval_s=1.0, assignor="range"),
        Settle(),
        Sleep(4),
        StopCoordinator(kill=True),
        Sleep(4),
        Settle(),
        Sleep(4),
        StopProducer(),
        Drain(),
        StopAll(),
    ]
    with KafkaCluster(root / "cluster", brokers=3, install=True) as cluster:
        result = run_scenario(cluster, steps, group_id=GROUP, workdir=root / "truth")
        run_cli("ingest", "kafka", "--lake", str(lake_dir), "--cluster", CLUSTER,
             "--bootstrap-servers", cluster.bootstrap_servers, "--timeout", "30")
    run = run_cli("run", "--lake", str(lake_dir), "--cluster", CLUSTER, timeout=1200, check=False)
    return result, Lake(lake_dir), run


def _rows(lake: Lake, table: str) -> list[dict]:
    return [r for r in lake.read_arrow(table).to_pylist() if r["cluster"] == CLUSTER and r.get("group_id") == GROUP]


def test_the_move_is_in_silver_after_the_kill(failed_over):
    result, lake, _ = failed_over
    [kill] = [e for e in result.driver_events() if e["event"] == "broker_stopped" and e.get("coordinator")]
    commits = sorted(_rows(lake, "offset_commits"), key=lambda r: r["log_offset"])
    assert commits and all(r["coordinator_epoch"] is not None for r in commits)
    assert len({r["coordinator_partition"] for r in commits}) == 1
    epochs = [r["coordinator_epoch"] for r in commits]
    assert epochs == sorted(epochs), "the coordinator's epoch went back"
    assert epochs[-1] > epochs[0], "no move in the history"
    # The first record of the new term was written after the old coordinator died.
    first_new = next(r for r in commits if r["coordinator_epoch"] > epochs[0])
    assert first_new["record_ts"].timestamp() * 1000 >= kill["ts"]


def test_the_history_goes_on_across_the_move(failed_over):
    result, lake, run = failed_over
    assert run.returncode == 0, run.stderr[-3000:]
    generations = sorted((r for r in _rows(lake, "group_generations") if not r["is_deletion"]),
                         key=lambda r: r["log_offset"])
    assert {r["incarnation"] for r in generations} == {0}
    numbers = [r["generation"] for r in generations]
    assert numbers == sorted(numbers)
    # Every commit a member saw acknowledged, before and after the move, is in the lake.
    truth = read_truth(result)
    lake_commits: dict[tuple, set[int]] = {}
    for r in _rows(lake, "offset_commits"):
        lake_commits.setdefault((r["topic"], r["partition"]), set()).add(r["offset"])
    missing = {tp: sorted(offsets - lake_commits.get(tp, set())) for tp, offsets in truth.commits.items()
               if offsets - lake_commits.get(tp, set())}
    assert truth.commits and not missing, missing
    # Gold follows the partitions across the move: every partition has an owner at the end.
    intervals = _rows(lake, "ownership_intervals")
    assert {r["partition"] for r in intervals if r["owner_kind"] == "member"} == set(range(6))
