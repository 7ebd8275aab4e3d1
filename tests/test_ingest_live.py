"""Live ingestion against a real Kafka 0.9.0.1 broker (pipelines.testbed) with real
librdkafka consumer groups running: killed with SIGKILL at random points and re-run, the
bronze table ends up equal to the topic's records, no loss and no duplicate."""
from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import pyarrow.dataset as ds
import pytest

from conftest import REPO
from pipelines.lake import Lake

CLI = [sys.executable, "-m", "rebalance_audit.cli", "ingest", "kafka"]
COMPAT = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0.1"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from pipelines.testbed import KafkaBroker, TestbedUnavailable

    try:
        b = KafkaBroker(tmp_path_factory.mktemp("kafka"))
        b.start()
    except TestbedUnavailable as exc:
        pytest.skip(f"no Kafka testbed: {exc}")
    yield b
    b.stop()


def _ingest(lake_dir, broker, *extra, timeout=120):
    cmd = CLI + ["--lake", str(lake_dir), "--bootstrap-servers", broker.bootstrap_servers, *COMPAT, "--timeout", "20", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout)


@pytest.mark.broker
def test_killed_and_rerun_ingestion_equals_the_topic(broker, tmp_path):
    from pipelines.testbed.offsets_topic import read_offsets_topic
    from pipelines.testbed.scenario import default_scenario, run_scenario

    lake_dir = tmp_path / "lake"
    errors: list[BaseException] = []

    def scenario():
        try:
            run_scenario(broker, default_scenario(), workdir=tmp_path / "scenario")
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    runner = threading.Thread(target=scenario)
    runner.start()
    rng = random.Random(20261123)
    kills = 0
    completed = 0
    cmd = CLI + ["--lake", str(lake_dir), "--bootstrap-servers", broker.bootstrap_servers, *COMPAT,
                 "--timeout", "20", "--commit-every", "3", "--no-end-offsets"]
    # Kill at random points while the groups commit, at least 20 times.
    while kills < 20 or runner.is_alive():
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 4.0))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        else:
            completed += 1
        proc.wait()
    runner.join()
    assert not errors, errors
    assert kills >= 20
    final = _ingest(lake_dir, broker)
    assert final.returncode == 0, final.stderr

    topic = read_offsets_topic(broker.bootstrap_servers)
    lake = Lake(lake_dir)
    rows = lake.read_arrow("offsets_records", columns=["cluster", "partition", "offset", "key", "value", "source"])
    got = sorted(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), rows["key"].to_pylist(), rows["value"].to_pylist()))
    want = sorted((r.partition, r.offset, r.key, r.value) for r in topic)
    assert len(want) > 50
    assert len(got) == len(set((p, o) for p, o, _, _ in got))  # no duplicate
    assert got == want  # no loss, nothing extra, bytes untouched
    assert set(rows["source"].to_pylist()) == {"kafka"}
    # The stored positions are where the topic ends.
    ends = {}
    for r in topic:
        ends[r.partition] = max(ends.get(r.partition, 0), r.offset + 1)
    positions = lake.app_versions("offsets_records", prefix="kafka:default:")
    for p, end in ends.items():
        assert positions[f"kafka:default:{p}"] == end


@pytest.mark.broker
def test_run_samples_end_offsets_and_resumes(broker, tmp_path):
    from pipelines.testbed.scenario import CreateTopic, Join, Settle, Sleep, StartProducer, StopAll, StopProducer, run_scenario

    run_scenario(
        broker,
        [CreateTopic("lagged", 3), StartProducer("lagged", 30.0), Join("m1", commit="auto"), Settle(), Sleep(3), StopProducer(), StopAll()],
        group_id="lag-group",
        workdir=tmp_path / "scenario",
    )
    lake_dir = tmp_path / "lake"
    first = _ingest(lake_dir, broker, "--cluster", "test-1")
    assert first.returncode == 0, first.stderr
    assert "caught up" in first.stdout
    lake = Lake(lake_dir)
    ends = lake.read_arrow("partition_end_offsets", filter=ds.field("topic") == "lagged").to_pylist()
    assert sorted(r["partition"] for r in ends) == [0, 1, 2]
    assert all(r["cluster"] == "test-1" and r["end_offset"] > 0 for r in ends)
    n = lake.read_arrow("offsets_records").num_rows
    second = _ingest(lake_dir, broker, "--cluster", "test-1")
    assert second.returncode == 0, second.stderr
    assert "0 read" in second.stdout  # resumed at the stored positions, nothing re-read
    assert lake.read_arrow("offsets_records").num_rows == n
    bounded = _ingest(tmp_path / "lake2", broker, "--max-records", "5", "--no-end-offsets")
    assert bounded.returncode == 0, bounded.stderr
    assert Lake(tmp_path / "lake2").read_arrow("offsets_records").num_rows == 5
    assert "stopped at a bound" in bounded.stdout


def test_unreachable_broker_errors_within_the_timeout(tmp_path):
    port = _free_port()
    secret = "Sup3r-Secret-Pw"
    cmd = CLI + ["--lake", str(tmp_path / "lake"), "--bootstrap-servers", f"127.0.0.1:{port}", *COMPAT, "--timeout", "3",
                 "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=u",
                 "-X", f"sasl.password={secret}"]
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120)
    elapsed = time.monotonic() - start
    assert r.returncode == 1
    assert f"cannot reach Kafka at 127.0.0.1:{port} within 3s" in r.stderr
    assert secret not in r.stderr + r.stdout
    assert elapsed < 3 + 30  # the timeout plus interpreter start-up on a loaded machine
    for root, _, files in os.walk(tmp_path):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                assert secret.encode() not in f.read()


def test_properties_that_break_exactly_once_are_refused(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("# test\nbootstrap.servers=127.0.0.1:9\nisolation.level = read_uncommitted\n")
    r = subprocess.run(CLI + ["--lake", str(tmp_path / "lake"), "--properties", str(props)], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 1 and "isolation.level is fixed to read_committed" in r.stderr
    r = subprocess.run(CLI + ["--lake", str(tmp_path / "lake"), "-X", "nonsense"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "key=value" in r.stderr
    r = subprocess.run(CLI + ["--lake", str(tmp_path / "lake"), "-X", "bootstrap.servers=127.0.0.1:9", "-X", "no.such.property=hidden-value"],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 1 and "invalid Kafka client configuration" in r.stderr
    assert "hidden-value" not in r.stderr
