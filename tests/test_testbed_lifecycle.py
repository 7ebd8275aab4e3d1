"""Starting and stopping the testbed's Kafka 4.x nodes: nothing survives a stop or a crashed
driver, a restart keeps data and ports, a node that cannot start says why."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.assignors.javahash import coordinator_partition, string_hash
from testbed import BrokerError, KafkaCluster, TestbedUnavailable, find_java

REPO = Path(__file__).resolve().parents[1]
STARTED = "Kafka Server started (kafka.server.KafkaRaftServer)"
SHUT_DOWN = "shut down completed (kafka.server.BrokerServer)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def java():
    try:
        return find_java()
    except TestbedUnavailable as exc:
        pytest.skip(f"no real Kafka broker: {exc}")


def test_java_string_hash_matches_java(java, tmp_path):
    """Compare with String.hashCode() computed by the JVM itself (a source-file program)."""
    samples = ["", "hello", "orders-processor", "polygenelubricants", "gr\u00fcppe", "\U0001F600-group"]
    src = tmp_path / "Hash.java"
    src.write_text(
        "public class Hash { public static void main(String[] a) throws Exception {"
        " java.io.BufferedReader r = new java.io.BufferedReader(new java.io.InputStreamReader(System.in,"
        " java.nio.charset.StandardCharsets.UTF_8)); String l;"
        " while ((l = r.readLine()) != null) System.out.println(l.hashCode()); } }")
    done = subprocess.run([java, str(src)], input="\n".join(samples) + "\n", capture_output=True,
                          text=True, encoding="utf-8", timeout=60, check=True)
    from_java = [int(x) for x in done.stdout.split()]
    assert [string_hash(s) for s in samples] == from_java
    assert string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE
    assert coordinator_partition("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0


@pytest.mark.broker
def test_stop_ends_the_jvm_and_removes_the_temporary_workdir(java):
    with KafkaCluster(install=True) as cluster:
        pids = cluster.pids
        assert set(pids) == {"kafka-1"} and all(_alive(p) for p in pids.values())
        node = cluster.brokers[0]
        assert any(STARTED in p.read_text() for p in node.log_dir.glob("server.log*"))  # hourly rolls
        # The coordinator made __consumer_offsets itself, at Kafka's default 50 partitions (the
        # folders appear as the broker takes leadership, a moment after the metadata says so).
        want = [f"__consumer_offsets-{p}" for p in range(50)]
        deadline = time.monotonic() + 30
        while [d.name for d in node.offsets_partition_dirs()] != want and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [d.name for d in node.offsets_partition_dirs()] == want
        workdir = cluster.workdir
    assert not any(_alive(p) for p in pids.values())
    assert not workdir.exists()


@pytest.mark.broker
def test_jvms_die_with_a_killed_driver(java, tmp_path):
    """SIGKILL the Python process that started the cluster: the watchdogs stop the JVMs."""
    script = (
        "import json, sys, time\n"
        "from testbed import KafkaCluster\n"
        f"c = KafkaCluster({str(tmp_path / 'wd')!r}, install=True, offsets_partitions=3).start()\n"
        "print(json.dumps(c.pids), flush=True)\n"
        "time.sleep(600)\n"
    )
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    pids: dict[str, int] = {}
    try:
        line = driver.stdout.readline()
        assert line, "the driver exited before the cluster started"
        pids = json.loads(line)
        assert pids and all(_alive(p) for p in pids.values())
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 60
        while any(_alive(p) for p in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.5)
        survivors = {n: p for n, p in pids.items() if _alive(p)}
        assert not survivors, f"JVMs outlived their driver: {survivors}"
        # SIGTERM first: the broker shut down cleanly.
        assert SHUT_DOWN in (tmp_path / "wd/node-1/logs/server.log").read_text()
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid in pids.values():
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)


@pytest.mark.broker
def test_restart_keeps_data_and_ports(java, tmp_path):
    from confluent_kafka import Producer

    from testbed import read_offsets_topic

    with KafkaCluster(tmp_path / "wd", install=True, offsets_partitions=3) as cluster:
        cluster.ensure_topic("restart-check", 2)
        producer = Producer(cluster.client_config())
        for i in range(10):
            producer.produce("restart-check", value=b"v%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        before = cluster.bootstrap_servers
        old_pids = cluster.pids
        cluster.restart()
        assert cluster.bootstrap_servers == before
        assert not set(old_pids.values()) & set(cluster.pids.values())
        records = read_offsets_topic(cluster.bootstrap_servers, topic="restart-check")
        assert sorted(r.value for r in records) == sorted(b"v%d" % i for i in range(10))
        assert [(r.partition, r.offset) for r in records] == [(p, o) for p in (0, 1) for o in range(5)]
        # server.log rolls every hour: the two starts may sit in two files.
        logs = cluster.log_dirs[0].glob("server.log*")
        assert sum(p.read_text().count(STARTED) for p in logs) == 2
    assert (tmp_path / "wd" / "node-1" / "data" / "restart-check-0").is_dir()  # a given workdir is kept


@pytest.mark.broker
def test_a_node_that_cannot_start_says_why(java, tmp_path):
    # A setting Kafka refuses: StorageTool's own error, naming it.
    bad_setting = KafkaCluster(tmp_path / "bad-setting", install=True, server_properties={"num.io.threads": "many"})
    with pytest.raises(BrokerError, match=r"(?s)StorageTool format failed.*num\.io\.threads"):
        bad_setting.start()
    # A broker that dies while starting (a heap far too small): the last lines of its logs.
    starved = KafkaCluster(tmp_path / "starved", install=True, heap_mb=24, start_timeout=60)
    with pytest.raises(BrokerError) as failed:
        starved.start()
    assert "Kafka node 1 exited with code" in str(failed.value)
    assert "OutOfMemoryError" in str(failed.value)
    assert not starved.pids
