"""Live ingestion (`rebalance-audit ingest kafka`) against a real Apache Kafka 4.x cluster in
KRaft mode (testbed), with `__consumer_offsets` at Kafka's default 50 partitions.

The module starts a cluster of its own: the SIGKILL test reads the whole topic, and the
other tests' groups and transactions must not land in another module's broker.

* SIGKILLed at 20+ random points while a classic group, a KIP-848 group, a transactional
  consume-transform-produce group and a writer of aborted/committed transactional offset
  commits run, then run once to the end: bronze equals what a read_committed reader of the
  topic sees, byte for byte, with no duplicate, plus the aborted records of the ranges that
  reader skips, flagged `aborted`; the stored positions are the ends.
* A run stops at an open transaction (the last stable offset) and a later run goes on past
  its ABORT/COMMIT marker; the aborted commit never reaches bronze as one.
* A run ends while every partition keeps receiving commits.
"""
from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from conftest import REPO
from pipelines.lake import Lake

CLI = [sys.executable, "-m", "rebalance_audit.cli", "ingest", "kafka"]
OFFSETS_TOPIC = "__consumer_offsets"
PARTITIONS = 50
MIN_KILLS = 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from testbed import KafkaCluster, TestbedUnavailable, find_java

    try:
        find_java()
    except TestbedUnavailable as exc:
        pytest.skip(f"no real Kafka broker: {exc}")
    with KafkaCluster(tmp_path_factory.mktemp("kafka-live"), offsets_partitions=PARTITIONS, install=True) as c:
        yield c


def _ingest(lake_dir, cluster, *extra, timeout=120):
    cmd = CLI + ["--lake", str(lake_dir), "--bootstrap-servers", cluster.bootstrap_servers, "--timeout", "20", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout)


def _quiet_logger():
    import logging

    return logging.getLogger("tests.ingest_live.librdkafka")


def _ends(cluster, isolation: str) -> dict[int, int]:
    """Each partition's end offset as a reader with ``isolation`` sees it: the high watermark
    (read_uncommitted) or the last stable offset (read_committed). Kafka's own ListOffsets,
    through the admin API, not the code under test."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient(cluster.client_config(logger=_quiet_logger()))
    level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
    futures = admin.list_offsets({TopicPartition(OFFSETS_TOPIC, p): OffsetSpec.latest() for p in range(PARTITIONS)},
                                 isolation_level=level, request_timeout=30)
    return {tp.partition: f.result().offset for tp, f in futures.items()}


def _wait_until_stable(cluster, timeout: float = 90.0) -> dict[int, int]:
    """Wait until no transaction is open on any partition (last stable offset = high
    watermark) and nothing is written for a second; returns the ends."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        hw, lso = _ends(cluster, "read_uncommitted"), _ends(cluster, "read_committed")
        if hw == lso and hw == last:
            return hw
        if time.monotonic() > deadline:
            open_ = {p: (lso[p], hw[p]) for p in hw if lso[p] != hw[p]}
            raise AssertionError(f"__consumer_offsets did not settle within {timeout:.0f} s; open transactions: {open_}")
        last = hw if hw == lso else None
        time.sleep(1.0)


def _group_on_partition(cluster, prefix: str, avoid: set[int] = frozenset(), want: int | None = None) -> str:
    """A group id of ``prefix`` whose coordinator partition is ``want``, or not in ``avoid``."""
    for i in range(100_000):
        g = f"{prefix}-{i}"
        p = cluster.partition_for(g)
        if (want is None and p not in avoid) or p == want:
            return g
    raise AssertionError("no such group id")


def _keys_by_group(keys) -> dict[str, Counter]:
    """group → Counter of record types, from raw `__consumer_offsets` keys."""
    from pipelines.codec import decode_key

    out: dict[str, Counter] = {}
    for key in keys:
        if key is None:
            continue
        rtype, data = decode_key(key)
        group = data.get("group", data.get("groupId"))  # classic keys / KIP-848 keys
        out.setdefault(group, Counter())[rtype] += 1
    return out


class _TxnOffsetsWriter(threading.Thread):
    """Transactional offset commits for one group straight into ``__consumer_offsets``
    (AddOffsetsToTxn + TxnOffsetCommit), every second transaction aborted after its offsets
    were sent, every fifth held open for a while. What a consume-transform-produce app that
    aborts after sending its offsets writes: aborted records and ABORT markers in the topic.
    The last transaction commits, so the partition ends with a COMMIT marker."""

    def __init__(self, cluster, group_id: str, topic: str):
        super().__init__(name="txn-offsets-writer", daemon=True)
        from confluent_kafka import Consumer, Producer

        self.topic, self.group_id = topic, group_id
        self.metadata_client = Consumer(cluster.client_config(**{"group.id": group_id, "logger": _quiet_logger()}))
        self.producer = Producer(cluster.client_config(**{"transactional.id": f"{group_id}-txn", "logger": _quiet_logger()}))
        self.producer.init_transactions(30)
        self.stop_event = threading.Event()
        self.committed = self.aborted = 0
        self.errors: list[BaseException] = []

    def _one(self, n: int, abort: bool, hold: float) -> None:
        from confluent_kafka import TopicPartition

        self.producer.begin_transaction()
        self.producer.send_offsets_to_transaction(
            [TopicPartition(self.topic, 0, n), TopicPartition(self.topic, 1, 2 * n)],
            self.metadata_client.consumer_group_metadata(), 30)
        if hold:
            time.sleep(hold)
        if abort:
            self.producer.abort_transaction(30)
            self.aborted += 1
        else:
            self.producer.commit_transaction(30)
            self.committed += 1

    def run(self) -> None:
        n = 0
        try:
            while not self.stop_event.is_set():
                n += 1
                self._one(n, abort=n % 2 == 0, hold=1.5 if n % 5 == 0 else 0.0)
                self.stop_event.wait(0.2)
            self._one(n + 1, abort=False, hold=0.0)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)
        finally:
            self.metadata_client.close()

    def finish(self) -> None:
        self.stop_event.set()
        self.join(60)
        assert not self.is_alive(), "the transactional offsets writer did not stop"
        assert not self.errors, self.errors


def _bronze(lake_dir: Path):
    """(bronze rows, the (partition, offset, key, value) of those not flagged aborted: what a
    read_committed reader gets)."""
    rows = Lake(lake_dir).read_arrow("offsets_records",
                                     columns=["cluster", "partition", "offset", "key", "value", "source", "aborted"])
    got = sorted(r for r, aborted in zip(_records(rows), rows["aborted"].to_pylist()) if not aborted)
    return rows, got


def _records(rows) -> list[tuple]:
    return list(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), rows["key"].to_pylist(),
                    rows["value"].to_pylist()))


def _skipped_runs(committed: dict[int, list[int]], ends: dict[int, int]) -> set[tuple[int, int]]:
    """(partition, offset) inside the runs of two or more offsets a read_committed reader
    skips, from the partition's start (0: nothing deleted yet), between its records and up
    to the partition's end."""
    out = set()
    for p in ends:
        edges = [-1] + sorted(committed.get(p, [])) + [ends[p]]
        for lo, hi in zip(edges, edges[1:]):
            if hi - lo > 2:
                out.update((p, o) for o in range(lo + 1, hi))
    return out


def _delta_commits(lake_dir: Path) -> int:
    return len(list((lake_dir / "offsets_records" / "_delta_log").glob("*.json")))


@pytest.mark.broker
def test_sigkilled_ingestion_equals_a_read_committed_reader(cluster, tmp_path, capsys):
    from testbed.offsets_topic import read_offsets_topic
    from testbed.scenario import SCENARIOS, run_scenario

    t0 = time.monotonic()
    lake_dir = tmp_path / "lake"
    errors: list[BaseException] = []
    groups = {"classic": "classic-range", "kip848": "kip848-uniform", "txn": "transactional"}

    def scenario(key: str, name: str) -> None:
        try:
            run_scenario(cluster, SCENARIOS[name](topic=f"live-{key}-in"), group_id=f"live-{key}",
                         workdir=tmp_path / f"scenario-{key}")
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    runners = [threading.Thread(target=scenario, args=item, name=f"scenario-{item[0]}") for item in groups.items()]
    for r in runners:
        r.start()
    # Aborted transactional offset commits on a partition of their own, which ends with a
    # COMMIT marker: a position taken from the last record delivered would stop short of it.
    cluster.ensure_topic("live-raw-in", 2)
    raw_group = _group_on_partition(cluster, "live-raw", avoid={cluster.partition_for(f"live-{k}") for k in groups})
    raw = _TxnOffsetsWriter(cluster, raw_group, "live-raw-in")
    raw.start()
    try:
        rng = random.Random(20261123)
        kills = completed = killed_after_commit = 0
        run_times = [4.0]  # how long a whole run takes here (start-up included), learnt as it goes
        cmd = CLI + ["--lake", str(lake_dir), "--bootstrap-servers", cluster.bootstrap_servers,
                     "--timeout", "20", "--commit-every", "1", "--no-end-offsets"]
        # Kill at random points while the groups and the transactions run, at least 20 times.
        # Half the points are a random time into the run, spread over its whole life however
        # fast this machine is (mostly interpreter start-up: a run has a few seconds of new
        # records to read); the other half a random moment 0-150 ms after the run's random
        # 1st-3rd Delta commit, so that kills also land mid-ingestion, between and in commits.
        while kills < MIN_KILLS or any(r.is_alive() for r in runners):
            before = _delta_commits(lake_dir)
            started = time.monotonic()
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            typical = sorted(run_times)[len(run_times) // 2]
            if rng.random() < 0.5:
                deadline = started + rng.uniform(0.2, 1.1 * typical)
                while proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.01)
            else:
                after, pause = rng.randint(1, 3), rng.uniform(0.0, 0.15)
                while proc.poll() is None and _delta_commits(lake_dir) < before + after:
                    time.sleep(0.01)
                time.sleep(pause)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                killed_after_commit += _delta_commits(lake_dir) > before
            else:
                completed += 1
                run_times.append(time.monotonic() - started)
                assert proc.returncode == 0, proc.stderr.read().decode()
            proc.stderr.close()
        for r in runners:
            r.join()
        raw.finish()
    finally:
        # Never leave the writer's transactions open for the module's next tests.
        raw.stop_event.set()
    assert not errors, errors
    assert kills >= MIN_KILLS

    ends = _wait_until_stable(cluster)
    final = _ingest(lake_dir, cluster)
    assert final.returncode == 0, final.stderr
    assert "caught up" in final.stdout

    topic = read_offsets_topic(cluster.bootstrap_servers, isolation="read_committed")
    everything = read_offsets_topic(cluster.bootstrap_servers, isolation="read_uncommitted")
    rows, got = _bronze(lake_dir)
    want = sorted((r.partition, r.offset, r.key, r.value) for r in topic)
    keys = list(zip(rows["cluster"].to_pylist(), rows["partition"].to_pylist(), rows["offset"].to_pylist()))
    assert len(keys) == len(set(keys))  # no duplicate
    assert got == want  # no loss, nothing extra, bytes untouched
    assert set(rows["source"].to_pylist()) == {"kafka"}

    # The topic really held transactions: aborted commits (read_uncommitted has them, bronze
    # must not) and control records (offsets no reader gets), some at a partition's end.
    aborted = {(r.partition, r.offset) for r in everything} - {(r.partition, r.offset) for r in topic}
    assert len(aborted) >= raw.aborted > 0
    assert not aborted & {(p, o) for p, o, _, _ in got}
    # ... and what of them lies in runs of skipped offsets was read back: stored flagged
    # aborted, bytes untouched, never as a commit (silver drops them).
    committed: dict[int, list[int]] = {}
    for r in topic:
        committed.setdefault(r.partition, []).append(r.offset)
    runs = _skipped_runs(committed, ends)
    flagged = sorted(r for r, a in zip(_records(rows), rows["aborted"].to_pylist()) if a)
    assert flagged == sorted((r.partition, r.offset, r.key, r.value) for r in everything
                             if (r.partition, r.offset) in aborted and (r.partition, r.offset) in runs)
    assert len(flagged) >= raw.aborted  # two records each, in a run with their ABORT marker
    per_partition = Counter(r.partition for r in everything)
    markers = sum(ends[p] - per_partition[p] for p in range(PARTITIONS))  # nothing compacted yet
    assert markers >= raw.committed + raw.aborted
    last = {}
    for r in everything:
        last[r.partition] = r.offset
    trailing = [p for p in last if last[p] + 1 < ends[p]]
    assert cluster.partition_for(raw_group) in trailing
    # Every group's records are there: classic, KIP-848 (types 3+) and the transactional ones.
    by_group = _keys_by_group(rows["key"].to_pylist())
    for key in groups:
        assert by_group.get(f"live-{key}", {}).get(1), f"no offset commit of group live-{key} in bronze"
    assert any(t >= 3 for t in by_group["live-kip848"]), by_group["live-kip848"]
    assert by_group[raw_group][1] >= raw.committed * 2

    # The stored positions are the partitions' ends, control records included, on all 50.
    positions = Lake(lake_dir).positions("offsets_records", "kafka:default")
    assert {int(k.rsplit(":", 1)[1]): v for k, v in positions.items()} == ends
    # Kills landed mid-ingestion (after a commit of that run), not only during start-up.
    assert killed_after_commit >= 5, (killed_after_commit, kills, completed, run_times)

    with capsys.disabled():
        print(f"\nSIGKILLed ingest kafka {kills} times ({killed_after_commit} after a commit of that run, "
              f"{completed} runs ended on their own, median run {typical:.1f} s); {len(got)} rows, 0 lost, 0 duplicated; "
              f"{len(aborted)} aborted records ({len(flagged)} read back and flagged), {markers} control records; "
              f"{time.monotonic() - t0:.0f} s")


@pytest.mark.broker
def test_a_run_stops_at_an_open_transaction_and_the_next_goes_past_its_marker(cluster, tmp_path):
    """Under read_committed nothing past an open transaction is read: the position stays at
    the last stable offset. Once the transaction ends, the next run stores what was held
    back (not the aborted commit) and its position passes the ABORT/COMMIT marker."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from testbed.offsets_topic import read_offsets_topic

    cluster.ensure_topic("held-in", 1)
    txn_group = _group_on_partition(cluster, "held-txn")
    p = cluster.partition_for(txn_group)
    other_group = _group_on_partition(cluster, "held-plain", want=p)
    conf = cluster.client_config(logger=_quiet_logger())
    plain = Consumer({**conf, "group.id": other_group, "enable.auto.commit": False})
    meta = Consumer({**conf, "group.id": txn_group})
    producer = Producer({**conf, "transactional.id": f"{txn_group}-txn"})
    producer.init_transactions(30)
    lake_dir = tmp_path / "lake"

    def commit_plain(n: int) -> None:
        plain.commit(offsets=[TopicPartition("held-in", 0, n)], asynchronous=False)

    def positions() -> dict[int, int]:
        got = Lake(lake_dir).positions("offsets_records", "kafka:default")
        return {int(k.rsplit(":", 1)[1]): v for k, v in got.items()}

    def bronze_equals_a_read_committed_reader():
        _, got = _bronze(lake_dir)
        want = sorted((r.partition, r.offset, r.key, r.value) for r in read_offsets_topic(cluster.bootstrap_servers))
        assert got == want
        return got

    try:
        commit_plain(1)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("held-in", 0, 2)], meta.consumer_group_metadata(), 30)
        lso = _ends(cluster, "read_committed")[p]
        commit_plain(3)  # after the open transaction: held back from read_committed readers
        assert _ends(cluster, "read_uncommitted")[p] > lso + 1

        first = _ingest(lake_dir, cluster, "--no-end-offsets")
        assert first.returncode == 0, first.stderr
        assert "caught up" in first.stdout
        assert positions()[p] == lso
        # Said, not waited on silently: which partition, where it is held, how far the log goes.
        held = _ends(cluster, "read_uncommitted")[p]
        assert (f"partition {p}: an open transaction holds its last stable offset at {lso} (log end {held})"
                in first.stdout), first.stdout
        got = bronze_equals_a_read_committed_reader()
        assert max(o for q, o, _, _ in got if q == p) < lso

        producer.abort_transaction(30)
        # The coordinator writes the markers after it answers: wait until the ABORT marker,
        # the last offset, has freed the partition.
        end = _wait_until_stable(cluster)[p]
        second = _ingest(lake_dir, cluster, "--no-end-offsets")
        assert second.returncode == 0, second.stderr
        assert positions()[p] == end
        assert f"partition {p}: an open transaction" not in second.stdout
        got = bronze_equals_a_read_committed_reader()
        mine = [o for q, o, _, _ in got if q == p and o >= lso]
        assert mine and lso not in mine  # the plain commit now; never the aborted one

        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("held-in", 0, 4)], meta.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        end = _wait_until_stable(cluster)[p]
        third = _ingest(lake_dir, cluster, "--no-end-offsets")
        assert third.returncode == 0, third.stderr
        assert positions()[p] == end  # past the COMMIT marker, which no reader is given
        got = bronze_equals_a_read_committed_reader()
        assert max(o for q, o, _, _ in got if q == p) == end - 2
    finally:
        plain.close()
        meta.close()


@pytest.mark.broker
def test_an_aborted_transaction_that_opens_a_partition_is_read_back(cluster, tmp_path):
    """A partition whose log opens with an aborted transaction: read from its beginning, the
    first record a read_committed reader gets comes after the aborted commit and its ABORT
    marker. That run is read back like any other (stored flagged aborted), not left as a
    hole at the partition's start for gold to report as compaction."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from testbed.offsets_topic import read_offsets_topic

    empty = sorted(q for q, end in _ends(cluster, "read_uncommitted").items() if end == 0)
    assert empty, "every __consumer_offsets partition already holds records"
    p = empty[0]
    txn_group = _group_on_partition(cluster, "opens-txn", want=p)
    plain_group = _group_on_partition(cluster, "opens-plain", want=p)
    cluster.ensure_topic("opens-in", 2)
    conf = cluster.client_config(logger=_quiet_logger())
    plain = Consumer({**conf, "group.id": plain_group, "enable.auto.commit": False})
    meta = Consumer({**conf, "group.id": txn_group})
    producer = Producer({**conf, "transactional.id": f"{txn_group}-txn"})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        # Two records (one per partition), then the ABORT marker: a run of three offsets.
        producer.send_offsets_to_transaction([TopicPartition("opens-in", 0, 5), TopicPartition("opens-in", 1, 7)],
                                             meta.consumer_group_metadata(), 30)
        producer.abort_transaction(30)
        # The coordinator writes the marker after it answers: a commit before it would lie
        # between the aborted records and their marker (a limit, docs/gold.md).
        _wait_until_stable(cluster)
        plain.commit(offsets=[TopicPartition("opens-in", 0, 1)], asynchronous=False)
    finally:
        plain.close()
        meta.close()
    _wait_until_stable(cluster)
    lake_dir = tmp_path / "lake"
    run = _ingest(lake_dir, cluster, "--no-end-offsets")
    assert run.returncode == 0, run.stderr

    committed = {r.offset for r in read_offsets_topic(cluster.bootstrap_servers, isolation="read_committed")
                 if r.partition == p}
    everything = {r.offset for r in read_offsets_topic(cluster.bootstrap_servers, isolation="read_uncommitted")
                  if r.partition == p}
    aborted = everything - committed
    assert sorted(aborted) == [0, 1] and min(committed) == 3  # the log opens with the aborted transaction
    rows, _ = _bronze(lake_dir)
    stored = {o: bool(a) for q, o, a in zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(),
                                             rows["aborted"].to_pylist()) if q == p}
    assert {o for o, a in stored.items() if a} == aborted
    assert {o for o, a in stored.items() if not a} == committed


@pytest.mark.broker
def test_a_run_ends_while_every_partition_keeps_receiving_commits(cluster, tmp_path):
    """Groups on every partition commit all the time (as on a busy cluster): a run must not
    wait for all 50 partitions to be at their end at the same instant, which may never
    happen (it did not within 40 s here before the fix, at 100 commits/s)."""
    from confluent_kafka import Consumer, TopicPartition

    from testbed.offsets_topic import read_offsets_topic

    cluster.ensure_topic("busy-in", 1)
    # One group per partition, each committing every 0.5 s (async, without joining: an
    # OffsetCommit of a group with no members, as a standalone consumer writes).
    errors: list = []

    def on_commit(err, _partitions) -> None:
        if err is not None:
            errors.append(err)

    clients = [Consumer(cluster.client_config(**{"group.id": _group_on_partition(cluster, "busy", want=p),
                                                 "enable.auto.commit": False, "on_commit": on_commit,
                                                 "logger": _quiet_logger()}))
               for p in range(PARTITIONS)]
    stop = threading.Event()
    written = [0]

    def commit_forever() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            for c in clients:
                c.commit(offsets=[TopicPartition("busy-in", 0, n)], asynchronous=True)
                c.poll(0)
            written[0] += len(clients)
            stop.wait(0.5)

    writer = threading.Thread(target=commit_forever, name="busy-committer", daemon=True)
    writer.start()
    lake_dir = tmp_path / "lake"
    try:
        time.sleep(3)
        begun = written[0]
        t = time.monotonic()
        run = _ingest(lake_dir, cluster, "--no-end-offsets", "--max-seconds", "40", timeout=120)
        took = time.monotonic() - t
        assert run.returncode == 0, run.stderr
        assert "caught up" in run.stdout, run.stdout[-300:]
        assert written[0] > begun  # the groups committed while it ran
        assert took < 30, took
    finally:
        stop.set()
        writer.join(30)
        for c in clients:
            c.close()
    assert not errors, errors[:3]
    ends = _wait_until_stable(cluster)
    final = _ingest(lake_dir, cluster, "--no-end-offsets")
    assert final.returncode == 0, final.stderr
    rows, got = _bronze(lake_dir)
    assert got == sorted((r.partition, r.offset, r.key, r.value) for r in read_offsets_topic(cluster.bootstrap_servers))
    positions = Lake(lake_dir).positions("offsets_records", "kafka:default")
    assert {int(k.rsplit(":", 1)[1]): v for k, v in positions.items()} == ends


@pytest.mark.broker
def test_run_samples_end_offsets_and_resumes(cluster, tmp_path):
    from testbed.scenario import CreateTopic, Join, Settle, Sleep, StartProducer, StopAll, StopProducer, run_scenario

    run_scenario(
        cluster,
        [CreateTopic("lagged", 3), StartProducer("lagged", 30.0), Join("m1", commit="auto"), Settle(), Sleep(3), StopProducer(), StopAll()],
        group_id="lag-group",
        workdir=tmp_path / "scenario",
    )
    lake_dir = tmp_path / "lake"
    first = _ingest(lake_dir, cluster, "--cluster", "test-1")
    assert first.returncode == 0, first.stderr
    assert "caught up" in first.stdout
    lake = Lake(lake_dir)
    ends = lake.read_arrow("partition_end_offsets", filter=ds.field("topic") == "lagged").to_pylist()
    assert sorted(r["partition"] for r in ends) == [0, 1, 2]
    assert all(r["cluster"] == "test-1" and r["end_offset"] > 0 for r in ends)
    n = lake.read_arrow("offsets_records").num_rows
    second = _ingest(lake_dir, cluster, "--cluster", "test-1")
    assert second.returncode == 0, second.stderr
    assert "0 read" in second.stdout  # resumed at the stored positions, nothing re-read
    assert lake.read_arrow("offsets_records").num_rows == n
    bounded = _ingest(tmp_path / "lake2", cluster, "--max-records", "5", "--no-end-offsets")
    assert bounded.returncode == 0, bounded.stderr
    # Five records read; the records of aborted transactions in the runs it skipped on the
    # way (other tests of this cluster write some) are read back and stored flagged, uncounted.
    flags = Lake(tmp_path / "lake2").read_arrow("offsets_records", columns=["aborted"])["aborted"].to_pylist()
    assert sum(1 for a in flags if not a) == 5
    assert "stopped at a bound" in bounded.stdout


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) if "=" in line else line.split(":", 1)
                for line in path.read_text().splitlines() if line.strip() and not line.startswith("#"))


@pytest.mark.broker
def test_the_cluster_says_who_it_is_so_live_and_offline_loads_of_it_share_one_name(cluster, tmp_path):
    """The brokers' cluster id and `__consumer_offsets` topic id, read live, are the ones
    their log dir's files state: a later `ingest kafka` or `ingest segments` of the same
    cluster without --cluster keeps the name, and another name is loaded but warned."""
    from testbed.scenario import CreateTopic, Join, Settle, Sleep, StartProducer, StopAll, StopProducer, run_scenario

    run_scenario(cluster, [CreateTopic("identified", 1), StartProducer("identified", 20.0), Join("m1", commit="auto"),
                           Settle(), Sleep(2), StopProducer(), StopAll()],
                 group_id="identity-group", workdir=tmp_path / "scenario")
    lake_dir = tmp_path / "lake"
    first = _ingest(lake_dir, cluster, "--cluster", "east", "--no-end-offsets")
    assert first.returncode == 0 and "warning" not in first.stderr, first.stderr
    data_dir = cluster.data_dirs[0]
    cluster_id = _properties(data_dir / "meta.properties")["cluster.id"].strip()
    topic_id = _properties(data_dir / "__consumer_offsets-0" / "partition.metadata")["topic_id"].strip()
    assert cluster_id == cluster.cluster_id
    assert f"cluster east (Kafka cluster id {cluster_id}, __consumer_offsets topic id {topic_id})" in first.stdout
    rows = Lake(lake_dir).read_arrow("cluster_identity").to_pylist()
    assert {(r["cluster"], r["kind"], r["value"]) for r in rows} == {
        ("east", "kafka_cluster_id", cluster_id), ("east", "offsets_topic_id", topic_id)}

    again = _ingest(lake_dir, cluster, "--no-end-offsets")  # no --cluster: the lake knows it
    assert again.returncode == 0 and "cluster east " in again.stdout and "warning" not in again.stderr, again
    assert set(Lake(lake_dir).positions("offsets_records", "kafka:east")) and \
        not Lake(lake_dir).positions("offsets_records", "kafka:default")

    # The broker's own files, offline, are the same cluster: the same name (the module's other
    # groups may have committed since: those rows are new, under the same name).
    files = subprocess.run([sys.executable, "-m", "rebalance_audit.cli", "ingest", "segments", "--lake", str(lake_dir),
                            str(data_dir)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert files.returncode == 0 and "cluster east " in files.stdout and "warning" not in files.stderr, files
    clusters = set(Lake(lake_dir).read_arrow("offsets_records", columns=["cluster"]).column("cluster").to_pylist())
    assert clusters == {"east"}

    other = _ingest(tmp_path / "lake", cluster, "--cluster", "west", "--no-end-offsets")
    assert other.returncode == 0, other.stderr
    assert "loaded before as cluster 'east'" in other.stderr and cluster_id in other.stderr, other.stderr


def test_unreachable_broker_errors_within_the_timeout(tmp_path):
    port = _free_port()
    secret = "Sup3r-Secret-Pw"
    cmd = CLI + ["--lake", str(tmp_path / "lake"), "--bootstrap-servers", f"127.0.0.1:{port}", "--timeout", "3",
                 "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=u",
                 "-X", f"sasl.password={secret}"]
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120)
    elapsed = time.monotonic() - start
    assert r.returncode == 1
    # One line, the command's own: librdkafka's retries go to the log, not the terminal.
    [line] = r.stderr.strip().splitlines()
    assert f"cannot reach Kafka at 127.0.0.1:{port} within 3s" in line
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
