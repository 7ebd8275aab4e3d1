"""Starting and stopping the testbed's JVMs: nothing survives a stop or a crashed driver."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.testbed import KafkaBroker, TestbedUnavailable, find_java, offsets_partition_for
from pipelines.testbed.broker import java_string_hash

REPO = Path(__file__).resolve().parents[1]


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
    assert [java_string_hash(s) for s in samples] == from_java
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE
    assert offsets_partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0


@pytest.mark.broker
def test_stop_ends_both_jvms_and_removes_the_temporary_workdir(java):
    broker = KafkaBroker(install=True)
    with broker:
        pids = broker.pids
        assert set(pids) == {"zookeeper", "kafka"}
        assert all(_alive(p) for p in pids.values())
        text = broker.server_log.read_text()
        assert "[Kafka Server 0], started (kafka.server.KafkaServer)" in text
        assert [d.name for d in broker.offsets_partition_dirs()] == [
            "__consumer_offsets-0", "__consumer_offsets-1", "__consumer_offsets-2"]
        assert all(d.is_dir() for d in broker.offsets_partition_dirs())
        workdir = broker.workdir
    assert not any(_alive(p) for p in pids.values())
    assert not workdir.exists()


@pytest.mark.broker
def test_jvms_die_with_a_killed_driver(java, tmp_path):
    """SIGKILL the Python process that started the broker: the watchdogs end the JVMs."""
    script = (
        "import json, sys, time\n"
        "from pipelines.testbed import KafkaBroker\n"
        f"b = KafkaBroker({str(tmp_path / 'wd')!r}, install=True).start()\n"
        "print(json.dumps(b.pids), flush=True)\n"
        "time.sleep(600)\n"
    )
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        line = driver.stdout.readline()
        assert line, "the driver exited before the broker started"
        pids = json.loads(line)
        assert all(_alive(p) for p in pids.values())
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 45
        while any(_alive(p) for p in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.5)
        survivors = {n: p for n, p in pids.items() if _alive(p)}
        assert not survivors, f"JVMs outlived their driver: {survivors}"
        # The broker shut down cleanly (SIGTERM while ZooKeeper was still up).
        assert "shut down completed (kafka.server.KafkaServer)" in (tmp_path / "wd/logs/server.log").read_text()
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid in (locals().get("pids") or {}).values():
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)


@pytest.mark.broker
def test_restart_keeps_data_and_ports(java, tmp_path):
    from confluent_kafka import Producer

    from pipelines.testbed import read_offsets_topic

    with KafkaBroker(tmp_path / "wd", install=True) as broker:
        broker.ensure_topic("restart-check", 2)
        producer = Producer(broker.client_config())
        for i in range(10):
            producer.produce("restart-check", value=b"v%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        before = broker.bootstrap_servers
        old_pids = broker.pids
        broker.restart()
        assert broker.bootstrap_servers == before
        assert not set(old_pids.values()) & set(broker.pids.values())
        records = read_offsets_topic(broker.bootstrap_servers, topic="restart-check")
        assert sorted(r.value for r in records) == sorted(b"v%d" % i for i in range(10))
        assert [(r.partition, r.offset) for r in records] == [(p, o) for p in (0, 1) for o in range(5)]
        assert broker.server_log.read_text().count("started (kafka.server.KafkaServer)") == 2
    assert (tmp_path / "wd" / "kafka-data" / "restart-check-0").is_dir()  # a given workdir is kept
