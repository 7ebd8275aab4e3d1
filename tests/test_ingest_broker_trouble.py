"""Live ingestion (`rebalance-audit ingest kafka`) while brokers fail, on a three-broker Kafka 4.x
cluster (testbed) whose `__consumer_offsets` has Kafka's defaults: 50 partitions, three replicas.

Each case starts an ingestion of a topic full of offset commits into a lake of its own, and
once that run has committed to the lake (so it is mid-ingestion):
* SIGKILLs the broker leading the most of the data, and starts it again 3 s later;
* freezes (SIGSTOP) the broker leading the most of the data for 6 s: a slow broker;
* stops every broker for longer than the run's `--timeout`: the run fails with one line that
  names the partitions, their leaders and the brokers' errors; the brokers come back and the
  next run goes on from where the failed one stopped.
Then, in every case, the lake equals what a read_committed reader of the topic sees, byte
for byte, with no row twice, and the stored positions are the partitions' ends.
"""
from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO
from pipelines.lake import Lake

pytestmark = pytest.mark.broker

CLI = [sys.executable, "-m", "rebalance_audit.cli", "ingest", "kafka"]
OFFSETS = "__consumer_offsets"
GROUPS, PARTITIONS, ROUNDS = 12, 24, 120  # 34,560 offset commit records per load
# Small fetches and commits: a run takes seconds, so trouble can strike in the middle of it.
# The prefetch queue is kept small too: with librdkafka's default (64 MB) the whole load
# (about 3.5 MB) sits in the client's queue a moment after the start, and a run whose
# brokers all die then still writes everything and ends well (seen in CI under load).
SLOW_READER = ["--commit-every", "1500", "-X", "message.max.bytes=16384", "-X", "fetch.max.bytes=32768",
               "-X", "max.partition.fetch.bytes=8192", "-X", "queued.max.messages.kbytes=64"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from testbed import KafkaCluster, TestbedUnavailable, find_java

    try:
        find_java()
    except TestbedUnavailable as exc:
        pytest.skip(f"no real Kafka cluster: {exc}")
    with KafkaCluster(tmp_path_factory.mktemp("kafka-trouble"), brokers=3, install=True) as c:
        yield c


def _quiet() -> logging.Logger:
    log = logging.getLogger("tests.broker_trouble.librdkafka")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return log


def _load(cluster, prefix: str) -> list[str]:
    """ROUNDS synchronous offset commits of PARTITIONS partitions by each of GROUPS groups:
    offset commit records on the `__consumer_offsets` partitions of every broker."""
    from confluent_kafka import Consumer, TopicPartition

    topic = f"{prefix}-in"
    cluster.ensure_topic(topic, PARTITIONS)
    groups = [f"{prefix}-{g}" for g in range(GROUPS)]
    consumers = [Consumer(cluster.client_config(**{"group.id": g, "enable.auto.commit": False, "logger": _quiet()}))
                 for g in groups]
    try:
        for r in range(1, ROUNDS + 1):
            for c in consumers:
                c.commit(offsets=[TopicPartition(topic, p, r) for p in range(PARTITIONS)], asynchronous=False)
    finally:
        for c in consumers:
            c.close()
    return groups


def _leaders(cluster) -> dict[int, int]:
    """`__consumer_offsets` partition → the node id leading it."""
    from confluent_kafka import Consumer

    c = Consumer(cluster.client_config(**{"group.id": "leaders", "logger": _quiet()}))
    try:
        md = c.list_topics(OFFSETS, timeout=30)
        return {p: meta.leader for p, meta in md.topics[OFFSETS].partitions.items()}
    finally:
        c.close()


def _busiest_leader(cluster, groups: list[str]) -> int:
    """The broker leading the partitions that hold most of these groups' commits."""
    leaders = _leaders(cluster)
    return Counter(leaders[cluster.partition_for(g)] for g in groups).most_common(1)[0][0]


def _commits(lake_dir: Path) -> int:
    return len(list((lake_dir / "offsets_records" / "_delta_log").glob("*.json")))


def _start_ingest(cluster, lake_dir: Path, *extra: str) -> subprocess.Popen:
    cmd = [*CLI, "--lake", str(lake_dir), "--bootstrap-servers", cluster.bootstrap_servers, "--no-end-offsets",
           *SLOW_READER, *extra]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _mid_run(proc: subprocess.Popen, lake_dir: Path, commits: int = 2, timeout: float = 120) -> None:
    """Wait until the run has made `commits` commits to the lake, and is still running."""
    deadline = time.monotonic() + timeout
    while _commits(lake_dir) < commits:
        assert proc.poll() is None, f"the run ended before trouble could strike: {proc.communicate()}"
        assert time.monotonic() < deadline, "the run made no commit"
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before trouble could strike: load more commits"


def _finish(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _ends(cluster) -> dict[int, int]:
    """Each partition's last stable offset (= its end: no transaction here)."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient(cluster.client_config(logger=_quiet()))
    asked = {TopicPartition(OFFSETS, p): OffsetSpec.latest() for p in range(cluster.offsets_partitions)}
    got = admin.list_offsets(asked, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=30)
    return {tp.partition: f.result().offset for tp, f in got.items()}


def _assert_lake_is_the_topic(cluster, lake_dir: Path) -> int:
    from testbed.offsets_topic import read_offsets_topic

    topic = read_offsets_topic(cluster.bootstrap_servers, isolation="read_committed", timeout=120)
    rows = Lake(lake_dir).read_arrow("offsets_records", columns=["cluster", "partition", "offset", "key", "value"])
    keys = list(zip(rows["cluster"].to_pylist(), rows["partition"].to_pylist(), rows["offset"].to_pylist()))
    assert len(keys) == len(set(keys)), "a row was stored twice"
    got = sorted(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), rows["key"].to_pylist(),
                     rows["value"].to_pylist()))
    assert got == sorted((r.partition, r.offset, r.key, r.value) for r in topic), "rows lost, extra or changed"
    positions = Lake(lake_dir).positions("offsets_records", "kafka:default")
    assert {int(k.rsplit(":", 1)[1]): v for k, v in positions.items()} == _ends(cluster)
    return len(got)


def test_a_broker_killed_and_restarted_mid_run(cluster, tmp_path):
    groups = _load(cluster, "killed")
    victim = _busiest_leader(cluster, groups)
    lake_dir = tmp_path / "lake"
    proc = _start_ingest(cluster, lake_dir, "--timeout", "60")
    _mid_run(proc, lake_dir)
    cluster.stop_node(victim, kill=True)
    time.sleep(3)
    cluster.start_node(victim)
    rc, out, err = _finish(proc)
    assert rc == 0, err
    assert "caught up" in out
    assert _leaders(cluster)  # the cluster answers again
    _assert_lake_is_the_topic(cluster, lake_dir)


def test_a_frozen_broker_slows_the_run_and_loses_nothing(cluster, tmp_path):
    groups = _load(cluster, "frozen")
    victim = cluster.node(_busiest_leader(cluster, groups))
    lake_dir = tmp_path / "lake"
    proc = _start_ingest(cluster, lake_dir, "--timeout", "60")
    _mid_run(proc, lake_dir)
    os.kill(victim.pid, signal.SIGSTOP)
    try:
        time.sleep(6)
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    rc, out, err = _finish(proc)
    assert rc == 0, err
    assert "caught up" in out
    _assert_lake_is_the_topic(cluster, lake_dir)


def test_every_broker_gone_past_the_timeout_fails_naming_them_and_the_next_run_resumes(cluster, tmp_path):
    _load(cluster, "gone")
    lake_dir = tmp_path / "lake"
    proc = _start_ingest(cluster, lake_dir, "--timeout", "8")
    _mid_run(proc, lake_dir)
    stored = Lake(lake_dir).read_arrow("offsets_records", columns=["offset"]).num_rows
    brokers = [n.node_id for n in cluster.brokers]
    for node_id in brokers:
        cluster.stop_node(node_id, kill=True)
    try:
        rc, out, err = _finish(proc, timeout=120)
    finally:
        for node_id in brokers:
            cluster.start_node(node_id)
    assert rc == 1
    (line,) = err.splitlines()
    assert line.startswith("rebalance-audit ingest: error: no data from Kafka at") and "for 8s" in line
    assert "all brokers down" in line and "latest broker errors: " in line
    # Every broker is named, by the address it listens on, with why it cannot be reached.
    for node in cluster.brokers:
        assert re.search(re.escape(node.address) + r"( \(node \d\))?: Connect to .* failed", line), line
    # What the failed run committed stays (and its position with it): the next run goes on from there.
    assert Lake(lake_dir).read_arrow("offsets_records", columns=["offset"]).num_rows >= stored > 0
    done = subprocess.run([*CLI, "--lake", str(lake_dir), "--bootstrap-servers", cluster.bootstrap_servers,
                           "--no-end-offsets", "--timeout", "60"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "caught up" in done.stdout
    _assert_lake_is_the_topic(cluster, lake_dir)
