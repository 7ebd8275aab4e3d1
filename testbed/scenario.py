"""Scripted consumer-group scenarios against a live broker, with ground truth.

A scenario is a list of steps run in order by ``run_scenario``: create a topic, start
or stop a producer writing steady traffic, members joining (each a real librdkafka
consumer in its own OS process, see ``member.py``), leaving cleanly (close() →
LeaveGroup), crashing (SIGKILL: the coordinator only notices at session timeout),
stalling (a member stops polling past ``max.poll.interval.ms``), brokers stopped and
started, waiting for the group to settle, for the members to drain the topic, or plain
sleeps. Members speak the classic protocol with a client-side assignor, or KIP-848's
consumer protocol (``group.protocol=consumer``) with a server-side one.

Ground truth lands in ``workdir``: ``<member>.jsonl`` per member (what it was
assigned, processed and committed; see ``member.py``), ``driver.jsonl`` (every step
with its wall-clock time, kills, producer totals), ``<member>.stderr`` (librdkafka's
own log lines). ``SCENARIOS`` are the named ones the tests and the demo run.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Union

from .broker import BrokerError, KafkaCluster, librdkafka_log

_REPO_ROOT = Path(__file__).resolve().parents[1]

# Member defaults, for test speed: a crashed classic member is noticed after 6 s instead of
# librdkafka's 45 s, and a 1 s heartbeat makes members notice rebalances fast. KIP-848
# members get both from the broker (broker.TEST_GROUP_PROPERTIES): librdkafka refuses them
# with group.protocol=consumer, so only the protocol-neutral default applies there.
MEMBER_DEFAULTS: dict[str, object] = {"auto.commit.interval.ms": 1000}
CLASSIC_MEMBER_DEFAULTS: dict[str, int] = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}


# ----- steps --------------------------------------------------------------------------
@dataclass(frozen=True)
class CreateTopic:
    """A scenario's data topic, at ``replication_factor`` (``None``: the cluster's default).

    One replica by default: the data topics' replication is not what a scenario exercises
    (``__consumer_offsets`` keeps the cluster's factor), and on a loaded machine the
    followers' fetches move the high watermark in bursts of seconds, so what a member
    processed in its last seconds before a crash, the truth the findings are judged by,
    swung by a third from run to run."""
    topic: str
    partitions: int
    replication_factor: int | None = 1


@dataclass(frozen=True)
class StartProducer:
    topic: str
    rate_per_s: float = 40.0


@dataclass(frozen=True)
class StopProducer:
    pass


@dataclass(frozen=True)
class Join:
    """Start member ``name`` subscribed to ``topics`` (default: the scenario's topic).

    ``commit``: ``auto`` (librdkafka auto-commit), ``manual`` (synchronous commits every
    ``commit_interval_s``, on revocation, and before close) or ``transactional``
    (consume-transform-produce into ``output_topic``, every ``abort_every``-th transaction
    aborted). ``protocol``: ``classic`` (``assignor`` is librdkafka's
    ``partition.assignment.strategy``) or ``consumer`` (KIP-848; ``assignor`` is the
    broker's ``group.remote.assignor``). ``instance_id`` makes a static member.
    """
    name: str
    commit: str = "auto"
    topics: tuple[str, ...] = ()
    commit_interval_s: float = 1.0
    commit_on_revoke: bool = True
    processing_delay_ms: float = 0.0
    client_id: str | None = None   # default: the name; a restarted process keeps its client id
    protocol: str = "classic"
    assignor: str | None = None
    instance_id: str | None = None
    output_topic: str | None = None
    abort_every: int = 0
    properties: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Leave:
    """Close member ``name`` cleanly (final commit if manual, LeaveGroup) and wait for it."""
    name: str
    timeout: float = 30.0


@dataclass(frozen=True)
class Crash:
    """SIGKILL member ``name``: no LeaveGroup, no final commit. With ``after_commit_s`` the
    kill comes that long after the member's next commit, so that it dies with work done
    since (what the next owner consumes again), neither right after nor right before one."""
    name: str
    after_commit_s: float | None = None
    timeout: float = 30.0


@dataclass(frozen=True)
class Stall:
    """Member ``name`` stops calling poll() for ``seconds``: past ``max.poll.interval.ms``
    librdkafka leaves the group (a poll timeout), and rejoins when it polls again."""
    name: str
    seconds: float


@dataclass(frozen=True)
class RestartCluster:
    """Stop every node cleanly and start them again on the same data and ports: members
    reconnect and the coordinators reload their groups from ``__consumer_offsets``."""


@dataclass(frozen=True)
class StopBroker:
    """Stop one broker (SIGKILL with ``kill``): its partitions, coordinators included,
    move to the other brokers."""
    node_id: int
    kill: bool = False


@dataclass(frozen=True)
class StopCoordinator:
    """Stop the broker that coordinates the scenario's group (SIGKILL with ``kill``): the
    leader of its ``__consumer_offsets`` partition, asked of the cluster at that moment.
    The partition's leadership (and its leader epoch) moves to another replica, which
    loads the group from the log; members find the new coordinator."""
    kill: bool = False


@dataclass(frozen=True)
class StartBroker:
    """Start a stopped broker again on its data and ports."""
    node_id: int


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Settle:
    """Wait until the live members own every partition of the scenario's topic exactly
    once, each having been assigned since it joined (a crashed member's partitions
    only move once the coordinator expires its session)."""
    timeout: float = 60.0


@dataclass(frozen=True)
class Drain:
    """Wait until the members have processed everything the producer delivered
    (needs StopProducer first)."""
    timeout: float = 60.0


@dataclass(frozen=True)
class StopAll:
    """Close every live member cleanly."""
    timeout: float = 30.0


Step = Union[CreateTopic, StartProducer, StopProducer, Join, Leave, Crash, Stall, RestartCluster, StopBroker, StopCoordinator,
             StartBroker, Sleep, Settle, Drain, StopAll]


# The member that dies commits every CRASH_COMMIT_S and dies CRASH_AFTER_COMMIT_S after a
# commit. What the group then consumes twice is what it processed in those seconds; gold
# dates the death from the session expiry, uncertain by up to a heartbeat interval (1 s
# here). Dying 4 s after a commit keeps that uncertainty near a tenth of the truth, where a
# 2 s age made it a quarter.
CRASH_COMMIT_S = 6.0
CRASH_AFTER_COMMIT_S = 4.0


def classic_range_scenario(topic: str = "orders", partitions: int = 6, rate_per_s: float = 40.0) -> list[Step]:
    """≈40 s, classic eager ``range``: c1 (auto-commit) and c2 (manual commits every 6 s)
    join, c3 joins, c1 leaves cleanly, c2 is SIGKILLed 4 s after a commit (noticed at its
    6 s session timeout: what it processed after its last commit is consumed again), c3
    drains the topic and stops."""
    def member(name: str, commit: str, interval_s: float = 1.0) -> Join:
        return Join(name, commit=commit, assignor="range", commit_interval_s=interval_s)
    return [
        CreateTopic(topic, partitions),
        StartProducer(topic, rate_per_s),
        member("c1", "auto"),
        member("c2", "manual", interval_s=CRASH_COMMIT_S),
        Settle(),
        Sleep(3),
        member("c3", "auto"),
        Settle(),
        Sleep(3),
        Leave("c1"),
        Settle(),
        Sleep(2 * CRASH_COMMIT_S + 1),  # two of c2's commit intervals on its new partitions: a cadence to judge by
        Crash("c2", after_commit_s=CRASH_AFTER_COMMIT_S),
        Settle(),
        Sleep(2),
        StopProducer(),
        Drain(),
        StopAll(),
    ]


def cooperative_rolling_scenario(topic: str = "orders", partitions: int = 6, rate_per_s: float = 40.0,
                                 members: int = 3) -> list[Step]:
    """≈40 s, ``cooperative-sticky`` rolling restart: every member in turn leaves cleanly
    and a new process with the same client id joins; only moved partitions are revoked."""
    def member(name: str, client_id: str) -> Join:
        return Join(name, commit="manual", assignor="cooperative-sticky", client_id=client_id)
    steps: list[Step] = [CreateTopic(topic, partitions), StartProducer(topic, rate_per_s)]
    steps += [member(f"c{i}", f"c{i}") for i in range(1, members + 1)]
    steps += [Settle(), Sleep(2)]
    for i in range(1, members + 1):
        steps += [Leave(f"c{i}"), Settle(), member(f"c{i}-restarted", f"c{i}"), Settle(), Sleep(2)]
    steps += [StopProducer(), Drain(), StopAll()]
    return steps


# A stuck handler is noticed after max.poll.interval.ms; librdkafka requires it to be at
# least session.timeout.ms.
POLL_TIMEOUT_MS = 7000


def poll_timeout_scenario(topic: str = "orders", partitions: int = 6, rate_per_s: float = 40.0) -> list[Step]:
    """≈45 s, ``roundrobin`` with a poll timeout: c2 (manual commits every 6 s) stops
    polling for 10 s, half-way between two commits, past max.poll.interval.ms: librdkafka
    leaves the group for it, c1 takes its partitions from their last commit (consuming
    again what c2 did since), and c2 rejoins when it polls again."""
    props = {"max.poll.interval.ms": POLL_TIMEOUT_MS}
    return [
        CreateTopic(topic, partitions),
        StartProducer(topic, rate_per_s),
        Join("c1", commit="auto", assignor="roundrobin", properties=props),
        Join("c2", commit="manual", commit_interval_s=CRASH_COMMIT_S, assignor="roundrobin", properties=props),
        Settle(),
        Sleep(2 * CRASH_COMMIT_S + 1),  # two of c2's commit intervals: a cadence to judge by
        Stall("c2", POLL_TIMEOUT_MS / 1000 + 3),
        # Past the poll timeout c1 owns everything while c2, still stuck, believes it owns
        # its old partitions: Settle then waits for c2 to wake, lose them and rejoin.
        Sleep(POLL_TIMEOUT_MS / 1000 + 1),
        Settle(),
        Sleep(3),
        StopProducer(),
        Drain(),
        StopAll(),
    ]


def kip848_scenario(topic: str = "orders", partitions: int = 6, rate_per_s: float = 40.0,
                    assignor: str = "uniform") -> list[Step]:
    """≈40 s, KIP-848 (``group.protocol=consumer``, server-side ``assignor``): c1 and c2
    join, c3 joins, c2 (auto-commit every 6 s) is SIGKILLed 4 s after a commit (fenced at
    the broker's 6 s session timeout), c1 leaves cleanly, c3 drains the topic and stops."""
    def member(name: str, **props: object) -> Join:
        return Join(name, commit="auto", protocol="consumer", assignor=assignor, properties=props)
    return [
        CreateTopic(topic, partitions),
        StartProducer(topic, rate_per_s),
        member("c1"),
        member("c2", **{"auto.commit.interval.ms": int(CRASH_COMMIT_S * 1000)}),
        Settle(),
        Sleep(3),
        member("c3"),
        Settle(),
        Sleep(2 * CRASH_COMMIT_S + 1),  # two of c2's commit intervals on its new partitions: a cadence to judge by
        Crash("c2", after_commit_s=CRASH_AFTER_COMMIT_S),
        Settle(),
        Sleep(2),
        Leave("c1"),
        Settle(),
        Sleep(2),
        StopProducer(),
        Drain(),
        StopAll(),
    ]


# A restarted static member's stop is in no record (its session never expired): gold takes
# the middle of its commit interval, never past the replacement. The scenario's two static
# members die at phases either side of that middle: s1 a second after a regular commit and
# restarted within the grace a rebalance's final commit is allowed (heartbeat + 1 s: the
# replacement's timing must not make that regular commit a final one), s2 4 s after one.
STATIC_CRASH_PHASES_S = (1.0, 4.0)


def static_restart_scenario(topic: str = "orders", partitions: int = 6, rate_per_s: float = 40.0) -> list[Step]:
    """≈55 s, static membership (KIP-345) with classic ``range``: c1 (auto-commit), s1 and s2
    (``group.instance.id`` s1 and s2, manual commits every 6 s) consume; s1 is SIGKILLed 1 s
    after a commit and s2, later, 4 s after one, and each time a new process with the same
    instance id starts at once, inside the 10 s session timeout: the coordinator hands it the
    dead member's partitions under a new member id without a rebalance, and it resumes from
    the last commit (consuming again what the dead process processed since)."""
    def static(name: str, instance: str) -> Join:
        return Join(name, commit="manual", commit_interval_s=CRASH_COMMIT_S, assignor="range", instance_id=instance,
                    client_id=instance, properties={"session.timeout.ms": 10000})
    early, late = STATIC_CRASH_PHASES_S
    return [
        CreateTopic(topic, partitions),
        StartProducer(topic, rate_per_s),
        Join("c1", commit="auto", assignor="range"),
        static("s1", "s1"),
        static("s2", "s2"),
        Settle(),
        Sleep(2 * CRASH_COMMIT_S + 1),  # two of their commit intervals: a cadence to judge by
        Crash("s1", after_commit_s=early),
        static("s1-restarted", "s1"),
        Settle(),
        Sleep(3),
        Crash("s2", after_commit_s=late),
        static("s2-restarted", "s2"),
        Settle(),
        Sleep(3),
        StopProducer(),
        Drain(),
        StopAll(),
    ]


def idle_scenario(topic: str = "orders", partitions: int = 2, rate_per_s: float = 20.0) -> list[Step]:
    """≈20 s, more members than partitions: one of three ``range`` members owns nothing."""
    return [
        CreateTopic(topic, partitions),
        StartProducer(topic, rate_per_s),
        *(Join(f"c{i}", commit="auto", assignor="range") for i in (1, 2, 3)),
        Settle(),
        Sleep(6),
        StopProducer(),
        Drain(),
        StopAll(),
    ]


def flapping_scenario(topic: str = "orders", partitions: int = 6, rate_per_s: float = 40.0,
                      flaps: int = 5) -> list[Step]:
    """≈40 s, a rebalance storm: two steady members, and one process restarted ``flaps``
    times (same client id ``flappy``, a new member id each time), each start and each
    clean stop forcing a group-wide eager rebalance."""
    steps: list[Step] = [
        CreateTopic(topic, partitions),
        StartProducer(topic, rate_per_s),
        Join("c1", commit="auto", assignor="range"),
        Join("c2", commit="manual", assignor="range"),
        Settle(),
    ]
    for i in range(1, flaps + 1):
        steps += [Join(f"flappy-{i}", commit="auto", client_id="flappy", assignor="range"), Settle(), Sleep(1),
                  Leave(f"flappy-{i}"), Settle(), Sleep(1)]
    steps += [StopProducer(), Drain(), StopAll()]
    return steps


def transactional_scenario(topic: str = "orders", partitions: int = 6, rate_per_s: float = 40.0) -> list[Step]:
    """≈30 s, consume-transform-produce: two transactional members (every 3rd transaction
    aborted and re-processed), one SIGKILLed mid-stream; its open transaction is aborted by
    the next owner's fencing, so nothing it did after its last commit counts."""
    def member(name: str) -> Join:
        return Join(name, commit="transactional", assignor="range", output_topic=f"{topic}-out", abort_every=3)
    return [
        CreateTopic(topic, partitions),
        CreateTopic(f"{topic}-out", 1),
        StartProducer(topic, rate_per_s),
        member("c1"),
        member("c2"),
        Settle(),
        Sleep(4),
        Crash("c2"),
        Settle(),
        Sleep(2),
        StopProducer(),
        Drain(),
        StopAll(),
    ]


def restart_scenario(topic: str = "orders", partitions: int = 6, rate_per_s: float = 40.0) -> list[Step]:
    """≈30 s: two members consume while the cluster is restarted under them; the
    coordinator reloads the group and the members rejoin."""
    return [
        CreateTopic(topic, partitions),
        StartProducer(topic, rate_per_s),
        Join("c1", commit="auto", assignor="range"),
        Join("c2", commit="manual", assignor="range"),
        Settle(),
        Sleep(3),
        RestartCluster(),
        Sleep(3),
        Settle(),
        Sleep(2),
        StopProducer(),
        Drain(),
        StopAll(),
    ]


# Each a function of keyword arguments (topic=..., ...) giving the scenario's steps.
SCENARIOS: dict[str, Callable[..., list[Step]]] = {
    "classic-range": classic_range_scenario,
    "cooperative-rolling": cooperative_rolling_scenario,
    "poll-timeout": poll_timeout_scenario,
    "kip848-uniform": lambda **kw: kip848_scenario(assignor="uniform", **kw),
    "kip848-range": lambda **kw: kip848_scenario(assignor="range", **kw),
    "static-restart": static_restart_scenario,
    "idle": idle_scenario,
    "flapping": flapping_scenario,
    "transactional": transactional_scenario,
    "restart": restart_scenario,
}
default_scenario = classic_range_scenario


# ----- results ------------------------------------------------------------------------
@dataclass
class MemberRun:
    name: str
    pid: int
    truth_path: Path
    joined_at_ms: int
    fate: str = "running"      # running / left / crashed
    ended_at_ms: int | None = None

    def events(self) -> list[dict[str, Any]]:
        return _read_jsonl(self.truth_path)


@dataclass
class ScenarioResult:
    group_id: str
    topic: str | None
    partitions: int | None
    workdir: Path
    started_at_ms: int
    ended_at_ms: int
    members: dict[str, MemberRun]
    produced: dict[int, int]           # partition → end offset delivered (exclusive)
    driver_log: Path

    def events(self, member: str | None = None) -> list[dict[str, Any]]:
        """Ground-truth events of one member, or of all members sorted by time."""
        if member is not None:
            return self.members[member].events()
        merged = [e for m in self.members.values() for e in m.events()]
        return sorted(merged, key=lambda e: e["ts"])

    def driver_events(self) -> list[dict[str, Any]]:
        return _read_jsonl(self.driver_log)


def _tell(proc: subprocess.Popen, line: str, last: bool = False) -> None:
    """One command line to a member process (testbed.member reads its stdin); `last` closes it."""
    assert proc.stdin is not None  # members are started with stdin=PIPE
    proc.stdin.write(line.encode() + b"\n")
    if last:
        proc.stdin.close()
    else:
        proc.stdin.flush()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n"):  # a SIGKILL can leave a torn last line
                out.append(json.loads(line))
    return out


# ----- the driver ---------------------------------------------------------------------
class _Producer:
    """Steady traffic, round-robin over partitions, from a thread in the driver."""

    def __init__(self, client_props: Mapping[str, object], topic: str, partitions: int, rate: float):
        from confluent_kafka import Producer

        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.delivered: dict[int, int] = {}
        self.errors: list[str] = []
        self.sent = 0
        self.reported = 0   # delivery reports received, good or bad
        self._producer = Producer({**client_props, "linger.ms": 5, "acks": "all", "logger": librdkafka_log})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="testbed-producer", daemon=True)
        self._thread.start()

    def _on_delivery(self, err, msg) -> None:
        self.reported += 1
        if err is not None:
            self.errors.append(str(err))
        else:
            p = msg.partition()
            self.delivered[p] = max(self.delivered.get(p, 0), msg.offset() + 1)

    def _run(self) -> None:
        try:
            self._produce_steadily()
        except Exception as exc:  # surfaced by stop(), never lost with the thread
            self.errors.append(f"producer thread failed: {exc!r}")

    def _produce_steadily(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self.rate) + 1
            while self.sent < due:
                seq = self.sent
                value = json.dumps({"seq": seq, "ts": int(time.time() * 1000)}).encode()
                self._producer.produce(self.topic, value=value, key=f"k{seq}".encode(),
                                       partition=seq % self.partitions, on_delivery=self._on_delivery)
                self.sent += 1
            self._producer.poll(0)
            self._stop.wait(min(0.05, 1.0 / self.rate))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        # flush() counts protocol requests still queued too (a metadata refresh to a slow
        # broker): judge by the messages themselves, each of which gets one delivery report.
        self._producer.flush(30)
        missing = self.sent - self.reported
        if missing:
            self.errors.append(f"{missing} messages without a delivery report after 30 s")


class ScenarioRunner:
    """Runs steps against ``broker``; use ``run_scenario`` for a whole script."""

    def __init__(self, cluster: KafkaCluster, group_id: str, workdir: str | Path,
                 member_properties: Mapping[str, object] | None = None):
        self.cluster = cluster
        self.group_id = group_id
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.member_properties = dict(member_properties or {})
        self.topic: str | None = None
        self.partitions: int | None = None
        self.members: dict[str, MemberRun] = {}
        self._procs: dict[str, subprocess.Popen] = {}
        self._producer: _Producer | None = None
        self.produced: dict[int, int] = {}
        self._driver_log = open(self.workdir / "driver.jsonl", "a", encoding="utf-8")
        self.started_at_ms = _now_ms()

    # -- bookkeeping --
    def log(self, event: str, **fields: Any) -> None:
        self._driver_log.write(json.dumps({"ts": _now_ms(), "event": event, **fields}) + "\n")
        self._driver_log.flush()

    def live(self) -> list[str]:
        return [n for n, p in self._procs.items() if p.poll() is None]

    # -- steps --
    def run(self, step: Step) -> None:
        self.log("step", step=type(step).__name__, args=_step_args(step))
        handler = getattr(self, "_" + type(step).__name__)
        handler(step)

    def _CreateTopic(self, step: CreateTopic) -> None:
        self.cluster.ensure_topic(step.topic, step.partitions, replication_factor=step.replication_factor)
        if self.topic is None:  # the first topic is the one members consume by default
            self.topic, self.partitions = step.topic, step.partitions

    def _StartProducer(self, step: StartProducer) -> None:
        if self._producer is not None:
            raise BrokerError("a producer is already running")
        md_partitions = self._topic_partitions(step.topic)
        self._producer = _Producer(self.cluster.client_config(), step.topic, md_partitions, step.rate_per_s)

    def _StopProducer(self, step: StopProducer) -> None:
        if self._producer is None:
            return
        self._producer.stop()
        self.produced = dict(sorted(self._producer.delivered.items()))
        self.log("producer_stopped", sent=self._producer.sent, delivered=self.produced,
                 errors=self._producer.errors[:20])
        if self._producer.errors:
            raise BrokerError(f"producer errors: {self._producer.errors[:3]}")
        self._producer = None

    def _Join(self, step: Join) -> None:
        if step.name in self.live():
            raise BrokerError(f"member {step.name} is already running")
        topics = list(step.topics) or ([self.topic] if self.topic else [])
        if not topics:
            raise BrokerError(f"member {step.name}: no topic (no CreateTopic step before it)")
        if step.commit not in ("auto", "manual", "transactional"):
            raise ValueError(f"Join.commit must be auto, manual or transactional, not {step.commit!r}")
        if step.commit == "transactional" and not step.output_topic:
            raise ValueError(f"member {step.name}: a transactional member needs an output_topic")
        truth = self.workdir / f"{step.name}.jsonl"
        cfg = {
            "name": step.name,
            "client_id": step.client_id or step.name,
            "group_id": self.group_id,
            "topics": topics,
            "commit": step.commit,
            "commit_interval_s": step.commit_interval_s,
            "commit_on_revoke": step.commit_on_revoke,
            "processing_delay_ms": step.processing_delay_ms,
            "output_topic": step.output_topic,
            "abort_every": step.abort_every,
            "truth_path": str(truth),
            "client_properties": {**self.cluster.client_config(), **_protocol_properties(step),
                                  **self.member_properties, **step.properties},
        }
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO_ROOT), env.get("PYTHONPATH")]))
        with open(self.workdir / f"{step.name}.stderr", "ab") as err:
            proc = subprocess.Popen([sys.executable, "-m", "testbed.member", json.dumps(cfg)],
                                    stdin=subprocess.PIPE, stdout=err, stderr=subprocess.STDOUT, env=env,
                                    cwd=self.workdir)
        self._procs[step.name] = proc
        self.members[step.name] = MemberRun(step.name, proc.pid, truth, joined_at_ms=_now_ms())
        self.log("joined", member=step.name, pid=proc.pid, commit=step.commit)

    def _Leave(self, step: Leave) -> None:
        proc = self._require_live(step.name)
        try:
            _tell(proc, "close", last=True)
        except BrokenPipeError:
            pass
        try:
            code = proc.wait(step.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise BrokerError(f"member {step.name} did not close within {step.timeout:.0f} s; killed it") from None
        run = self.members[step.name]
        run.fate, run.ended_at_ms = "left", _now_ms()
        self.log("left", member=step.name, pid=proc.pid, exit_code=code)
        if code != 0:
            raise BrokerError(f"member {step.name} exited with code {code}; see {step.name}.stderr")

    def _Crash(self, step: Crash) -> None:
        proc = self._require_live(step.name)
        if step.after_commit_s is not None:
            self._wait_commit_age(step.name, step.after_commit_s, step.timeout)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        run = self.members[step.name]
        run.fate, run.ended_at_ms = "crashed", _now_ms()
        self.log("killed", member=step.name, pid=proc.pid, signal="SIGKILL")

    def _Stall(self, step: Stall) -> None:
        proc = self._require_live(step.name)
        _tell(proc, f"stall {step.seconds}")
        self.log("stall", member=step.name, seconds=step.seconds)

    def _RestartCluster(self, step: RestartCluster) -> None:
        old = self.cluster.bootstrap_servers
        self.cluster.restart()
        if self.cluster.bootstrap_servers != old:
            raise BrokerError(f"the cluster came back on {self.cluster.bootstrap_servers}, not {old}: "
                              "running members cannot follow")
        self.log("cluster_restarted", bootstrap_servers=old)

    def _StopBroker(self, step: StopBroker) -> None:
        self.cluster.stop_node(step.node_id, kill=step.kill)
        self.log("broker_stopped", node_id=step.node_id, kill=step.kill)

    def _StopCoordinator(self, step: StopCoordinator) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self.cluster.client_config(logger=librdkafka_log))
        [described] = admin.describe_consumer_groups([self.group_id], request_timeout=15).values()
        node_id = described.result().coordinator.id
        self.cluster.stop_node(node_id, kill=step.kill)
        self.log("broker_stopped", node_id=node_id, kill=step.kill, coordinator=True)

    def _StartBroker(self, step: StartBroker) -> None:
        self.cluster.start_node(step.node_id)
        self.log("broker_started", node_id=step.node_id)

    def _Sleep(self, step: Sleep) -> None:
        time.sleep(step.seconds)

    def _Settle(self, step: Settle) -> None:
        if self.topic is None or self.partitions is None:
            raise BrokerError("Settle needs a CreateTopic step before it")
        deadline = time.monotonic() + step.timeout
        stable_since, last = time.monotonic(), None
        while True:
            self._check_members()
            # One read of every member's file per look: judging ownership and assignments
            # from two reads could pair a member's old state with another's new one.
            events = {name: self.members[name].events() for name in self.live()}
            owners = self._current_owners(events)
            if owners != last:
                stable_since, last = time.monotonic(), owners
            owned = sorted(p for parts in owners.values() for p in parts)
            assigned = all(any(e["event"] == "assign" for e in events[n]) for n in owners)
            # Every partition owned exactly once, and either every live member has been
            # assigned since it joined, or nothing has moved for a while (KIP-848 and
            # cooperative members may never see an assignment when there is none for them).
            if owned == list(range(self.partitions)) and (assigned or time.monotonic() - stable_since > 3):
                self.log("settled", assignment={n: sorted(ps) for n, ps in owners.items()})
                return
            if time.monotonic() > deadline:
                raise BrokerError(f"group {self.group_id} did not settle within {step.timeout:.0f} s "
                                  f"(current: {owners}){self._membership_trail(events)}")
            time.sleep(0.2)

    def _Drain(self, step: Drain) -> None:
        if not self.produced:
            raise BrokerError("Drain needs a StopProducer step before it")
        deadline = time.monotonic() + step.timeout
        while True:
            self._check_members()
            done: dict[int, int] = {}
            for run in self.members.values():
                for e in run.events():
                    if e["event"] == "processed" and e["topic"] == self.topic:
                        done[e["partition"]] = max(done.get(e["partition"], 0), e["offset"] + 1)
            if all(done.get(p, 0) >= end for p, end in self.produced.items()):
                self.log("drained", processed_to=done)
                return
            if time.monotonic() > deadline:
                raise BrokerError(f"members did not drain {self.topic} within {step.timeout:.0f} s: "
                                  f"processed to {done}, produced {self.produced}")
            time.sleep(0.3)

    def _StopAll(self, step: StopAll) -> None:
        for name in self.live():
            self._Leave(Leave(name, step.timeout))

    # -- helpers --
    def _wait_commit_age(self, name: str, age_s: float, timeout: float) -> None:
        """Until ``age_s`` after member ``name``'s next commit: a commit already old may be
        about to be followed by another, a fresh one is a whole interval from the next."""
        def commits() -> int:
            return sum(e["event"] in ("commit", "commit_request", "txn_commit") for e in self.members[name].events())

        before, deadline = commits(), time.monotonic() + timeout
        while commits() == before:
            if time.monotonic() > deadline:
                raise BrokerError(f"member {name} committed nothing within {timeout:.0f} s")
            time.sleep(0.05)
        time.sleep(age_s)


    def _require_live(self, name: str) -> subprocess.Popen:
        if name not in self.live():
            raise BrokerError(f"member {name} is not running")
        return self._procs[name]

    def _check_members(self) -> None:
        for name, proc in self._procs.items():
            run = self.members[name]
            if run.fate == "running" and proc.poll() is not None:
                raise BrokerError(f"member {name} exited unexpectedly with code {proc.returncode}; "
                                  f"see {self.workdir / (name + '.stderr')}")

    def _current_owners(self, events: dict[str, list[dict[str, Any]]]) -> dict[str, list[int]]:
        """Each live member's partitions of the topic, from its ``events``. Assignments add
        and revocations remove: eager members revoke everything and get a whole new set,
        incremental ones (cooperative, KIP-848) get and give up only what moves."""
        owners: dict[str, list[int]] = {}
        for name, member_events in events.items():
            owned: set[int] = set()
            for e in member_events:
                parts = {p for t, p in e.get("partitions", ()) if t == self.topic}
                if e["event"] == "assign":
                    owned |= parts
                elif e["event"] in ("revoke", "lost"):
                    owned -= parts
            owners[name] = sorted(owned)
        return owners


    def _membership_trail(self, events: dict[str, list[dict[str, Any]]], last: int = 4) -> str:
        """Why a group did not settle, for the error: each live member's last membership
        events and the last lines librdkafka logged for it."""
        lines = []
        for name, member_events in events.items():
            trail = [f"{e['ts']} {e['event']} {[p for _, p in e.get('partitions', ())]}"
                     if "partitions" in e else f"{e['ts']} {e['event']} {e.get('error', '')}".rstrip()
                     for e in member_events if e["event"] in ("assign", "revoke", "lost", "error")][-last:]
            stderr = self.workdir / f"{name}.stderr"
            logged = stderr.read_text(errors="replace").splitlines()[-last:] if stderr.is_file() else []
            lines.append(f"\n  {name}: {'; '.join(trail) or 'no membership event'}")
            lines += [f"\n    | {line[:300]}" for line in logged]
        return "".join(lines)

    def _topic_partitions(self, topic: str, timeout: float = 15.0) -> int:
        from confluent_kafka import Producer

        # A client may ask a broker whose metadata cache has not caught up with a topic just
        # created: ask again for a while before calling it missing.
        client = Producer(self.cluster.client_config(logger=librdkafka_log))
        deadline = time.monotonic() + timeout
        try:
            while True:
                md = client.list_topics(topic, timeout=10)
                found = md.topics.get(topic)
                if found is not None and found.error is None and found.partitions:
                    return len(found.partitions)
                if time.monotonic() > deadline:
                    raise BrokerError(f"topic {topic} does not exist (add a CreateTopic step)")
                time.sleep(0.3)
        finally:
            client.flush(0)

    def close(self) -> None:
        """Stop the producer and every member still running (SIGKILL after 10 s)."""
        if self._producer is not None:
            try:
                self._StopProducer(StopProducer())
            except BrokerError:
                pass
        for name in self.live():
            proc = self._procs[name]
            try:
                _tell(proc, "close", last=True)
            except (BrokenPipeError, ValueError):
                pass
        for name, proc in self._procs.items():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            run = self.members[name]
            if run.fate == "running":
                run.fate, run.ended_at_ms = "left", _now_ms()
        if not self._driver_log.closed:
            self.log("closed")
            self._driver_log.close()

    def result(self) -> ScenarioResult:
        return ScenarioResult(
            group_id=self.group_id, topic=self.topic, partitions=self.partitions, workdir=self.workdir,
            started_at_ms=self.started_at_ms, ended_at_ms=_now_ms(), members=dict(self.members),
            produced=dict(self.produced), driver_log=self.workdir / "driver.jsonl")


def _protocol_properties(step: Join) -> dict[str, object]:
    """librdkafka properties of the member's group protocol and assignor."""
    props: dict[str, object] = dict(MEMBER_DEFAULTS)
    if step.protocol == "consumer":
        props["group.protocol"] = "consumer"
        if step.assignor:
            props["group.remote.assignor"] = step.assignor
    elif step.protocol == "classic":
        props.update(CLASSIC_MEMBER_DEFAULTS)
        if step.assignor:
            props["partition.assignment.strategy"] = step.assignor
    else:
        raise ValueError(f"Join.protocol must be classic or consumer, not {step.protocol!r}")
    if step.instance_id:
        props["group.instance.id"] = step.instance_id
    return props


def run_scenario(cluster: KafkaCluster, steps: Iterable[Step], *, group_id: str = "orders-processor",
                 workdir: str | Path | None = None,
                 member_properties: Mapping[str, object] | None = None) -> ScenarioResult:
    """Run ``steps`` against ``cluster``; members and producer are always stopped at the
    end, even when a step fails. Ground truth goes to ``workdir`` (default:
    ``<cluster workdir>/scenario-<group_id>``)."""
    wd = Path(workdir) if workdir else cluster.workdir / f"scenario-{group_id}"
    runner = ScenarioRunner(cluster, group_id, wd, member_properties)
    try:
        for step in steps:
            runner.run(step)
    finally:
        runner.close()
    return runner.result()


def run_together(cluster: KafkaCluster, scenarios: Mapping[str, Iterable[Step]],
                 workdirs: Mapping[str, Path] | None = None) -> dict[str, ScenarioResult]:
    """Several groups at once: ``scenarios`` maps a group id to its steps, each run on its own
    thread; the first failure is raised once all have ended. Daemon threads: on Ctrl-C the
    caller stops the cluster and exits; the members, whose stdin closes with this process,
    shut down by themselves."""
    results: dict[str, ScenarioResult] = {}
    errors: list[BaseException] = []

    def one(group_id: str, steps: Iterable[Step]) -> None:
        try:
            results[group_id] = run_scenario(cluster, steps, group_id=group_id,
                                             workdir=(workdirs or {}).get(group_id))
        except BaseException as exc:  # noqa: BLE001 - re-raised below, on the calling thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=item, name=f"scenario-{item[0]}", daemon=True)
               for item in scenarios.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _step_args(step: Step) -> dict[str, Any]:
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in step.__dict__.items()}


def _now_ms() -> int:
    return int(time.time() * 1000)


__all__ = [
    "MEMBER_DEFAULTS", "CLASSIC_MEMBER_DEFAULTS", "CreateTopic", "StartProducer", "StopProducer", "Join", "Leave",
    "Crash", "Stall", "RestartCluster", "StopBroker", "StopCoordinator", "StartBroker", "Sleep", "Settle", "Drain", "StopAll", "Step",
    "MemberRun", "ScenarioResult", "ScenarioRunner", "SCENARIOS", "default_scenario", "run_scenario", "run_together",
]
