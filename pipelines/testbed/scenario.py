"""Scripted consumer-group scenarios against a live broker, with ground truth.

A scenario is a list of steps run in order by ``run_scenario``: create a topic, start
or stop a producer writing steady traffic, members joining (each a real librdkafka
consumer in its own OS process, see ``member.py``), leaving cleanly (close() →
LeaveGroup), crashing (SIGKILL: the coordinator only notices at session timeout),
waiting for the group to settle, for the members to drain the topic, or plain sleeps.

Ground truth lands in ``workdir``: ``<member>.jsonl`` per member (what it was
assigned, processed and committed; see ``member.py``), ``driver.jsonl`` (every step
with its wall-clock time, kills, producer totals), ``<member>.stderr`` (librdkafka's
own log lines). ``default_scenario()`` is the short one the demo runs.
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
from typing import Any, Iterable, Mapping, Union

from .broker import CLIENT_PROPERTIES, BrokerError, KafkaBroker, librdkafka_log

_REPO_ROOT = Path(__file__).resolve().parents[2]

# Member defaults for a 0.9 broker: librdkafka's 45 s session timeout is above 0.9's
# group.max.session.timeout.ms (30 s) and would be refused; 6 s is 0.9's minimum and
# keeps crash detection short. A 1 s heartbeat makes members notice rebalances fast.
MEMBER_DEFAULTS: dict[str, object] = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
    "auto.commit.interval.ms": 1000,
}


# ----- steps --------------------------------------------------------------------------
@dataclass(frozen=True)
class CreateTopic:
    topic: str
    partitions: int


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

    ``commit``: ``auto`` (librdkafka auto-commit) or ``manual`` (synchronous commits
    every ``commit_interval_s``, on revocation, and before close).
    """
    name: str
    commit: str = "auto"
    topics: tuple[str, ...] = ()
    commit_interval_s: float = 1.0
    commit_on_revoke: bool = True
    processing_delay_ms: float = 0.0
    client_id: str | None = None   # default: the name; a restarted process keeps its client id
    properties: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Leave:
    """Close member ``name`` cleanly (final commit if manual, LeaveGroup) and wait for it."""
    name: str
    timeout: float = 30.0


@dataclass(frozen=True)
class Crash:
    """SIGKILL member ``name``: no LeaveGroup, no final commit."""
    name: str


@dataclass(frozen=True)
class RestartBroker:
    """Stop the broker cleanly and start it again on the same data and ports: members
    reconnect and the coordinator reloads the group from ``__consumer_offsets``."""


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


Step = Union[CreateTopic, StartProducer, StopProducer, Join, Leave, Crash, RestartBroker, Sleep, Settle, Drain,
             StopAll]


def default_scenario(topic: str = "orders", partitions: int = 6, rate_per_s: float = 40.0) -> list[Step]:
    """≈30-40 s: two members join, a third joins, one leaves cleanly, one is
    SIGKILLed, the survivor drains the topic and stops. Mixed commit modes."""
    return [
        CreateTopic(topic, partitions),
        StartProducer(topic, rate_per_s),
        Join("c1", commit="auto"),
        Join("c2", commit="manual"),
        Settle(),
        Sleep(3),
        Join("c3", commit="auto"),
        Settle(),
        Sleep(3),
        Leave("c1"),
        Settle(),
        Sleep(3),
        Crash("c2"),
        Settle(),
        Sleep(2),
        StopProducer(),
        Drain(),
        StopAll(),
    ]


def flapping_scenario(topic: str = "orders", partitions: int = 6, rate_per_s: float = 40.0,
                      flaps: int = 5) -> list[Step]:
    """≈40-50 s, a rebalance storm: two steady members, and one process restarted
    ``flaps`` times (same client id ``flappy``, a new member id each time), each start
    and each clean stop forcing a group-wide eager rebalance."""
    steps: list[Step] = [
        CreateTopic(topic, partitions),
        StartProducer(topic, rate_per_s),
        Join("c1", commit="auto"),
        Join("c2", commit="manual"),
        Settle(),
    ]
    for i in range(1, flaps + 1):
        steps += [Join(f"flappy-{i}", commit="auto", client_id="flappy"), Settle(), Sleep(1),
                  Leave(f"flappy-{i}"), Settle(), Sleep(1)]
    steps += [StopProducer(), Drain(), StopAll()]
    return steps


def restart_scenario(topic: str = "orders", partitions: int = 6, rate_per_s: float = 40.0) -> list[Step]:
    """≈30 s: two members consume while the broker is restarted under them; the
    coordinator reloads the group and the members rejoin."""
    return [
        CreateTopic(topic, partitions),
        StartProducer(topic, rate_per_s),
        Join("c1", commit="auto"),
        Join("c2", commit="manual"),
        Settle(),
        Sleep(3),
        RestartBroker(),
        Sleep(3),
        Settle(),
        Sleep(2),
        StopProducer(),
        Drain(),
        StopAll(),
    ]


SCENARIOS = {"default": default_scenario, "flapping": flapping_scenario, "restart": restart_scenario}


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


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
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
        self._producer = Producer({**client_props, "linger.ms": 5, "acks": "all", "logger": librdkafka_log})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="testbed-producer", daemon=True)
        self._thread.start()

    def _on_delivery(self, err, msg) -> None:
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
        remaining = self._producer.flush(30)
        if remaining:
            self.errors.append(f"{remaining} messages still undelivered after 30 s")


class ScenarioRunner:
    """Runs steps against ``broker``; use ``run_scenario`` for a whole script."""

    def __init__(self, broker: KafkaBroker, group_id: str, workdir: str | Path,
                 member_properties: Mapping[str, object] | None = None):
        self.broker = broker
        self.group_id = group_id
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.member_properties = {**MEMBER_DEFAULTS, **dict(member_properties or {})}
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
        self.broker.ensure_topic(step.topic, step.partitions)
        self.topic, self.partitions = step.topic, step.partitions

    def _StartProducer(self, step: StartProducer) -> None:
        if self._producer is not None:
            raise BrokerError("a producer is already running")
        md_partitions = self._topic_partitions(step.topic)
        self._producer = _Producer(self.broker.client_config(), step.topic, md_partitions, step.rate_per_s)

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
            "truth_path": str(truth),
            "client_properties": {**self.broker.client_config(), **self.member_properties, **step.properties},
        }
        if step.commit not in ("auto", "manual"):
            raise ValueError(f"Join.commit must be 'auto' or 'manual', not {step.commit!r}")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO_ROOT), env.get("PYTHONPATH")]))
        with open(self.workdir / f"{step.name}.stderr", "ab") as err:
            proc = subprocess.Popen([sys.executable, "-m", "pipelines.testbed.member", json.dumps(cfg)],
                                    stdin=subprocess.PIPE, stdout=err, stderr=subprocess.STDOUT, env=env,
                                    cwd=self.workdir)
        self._procs[step.name] = proc
        self.members[step.name] = MemberRun(step.name, proc.pid, truth, joined_at_ms=_now_ms())
        self.log("joined", member=step.name, pid=proc.pid, commit=step.commit)

    def _Leave(self, step: Leave) -> None:
        proc = self._require_live(step.name)
        try:
            proc.stdin.write(b"close\n")
            proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            code = proc.wait(step.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise BrokerError(f"member {step.name} did not close within {step.timeout:.0f} s; killed it")
        run = self.members[step.name]
        run.fate, run.ended_at_ms = "left", _now_ms()
        self.log("left", member=step.name, pid=proc.pid, exit_code=code)
        if code != 0:
            raise BrokerError(f"member {step.name} exited with code {code}; see {step.name}.stderr")

    def _Crash(self, step: Crash) -> None:
        proc = self._require_live(step.name)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        run = self.members[step.name]
        run.fate, run.ended_at_ms = "crashed", _now_ms()
        self.log("killed", member=step.name, pid=proc.pid, signal="SIGKILL")

    def _RestartBroker(self, step: RestartBroker) -> None:
        old = self.broker.bootstrap_servers
        self.broker.restart()
        if self.broker.bootstrap_servers != old:
            raise BrokerError(f"the broker came back on {self.broker.bootstrap_servers}, not {old}: "
                              "running members cannot follow")
        self.log("broker_restarted", bootstrap_servers=old)

    def _Sleep(self, step: Sleep) -> None:
        time.sleep(step.seconds)

    def _Settle(self, step: Settle) -> None:
        if self.topic is None or self.partitions is None:
            raise BrokerError("Settle needs a CreateTopic step before it")
        deadline = time.monotonic() + step.timeout
        while True:
            self._check_members()
            owners = self._current_owners()
            if owners is not None:
                owned = sorted(p for parts in owners.values() for p in parts)
                if owned == list(range(self.partitions)):
                    self.log("settled", assignment={n: sorted(ps) for n, ps in owners.items()})
                    return
            if time.monotonic() > deadline:
                raise BrokerError(f"group {self.group_id} did not settle within {step.timeout:.0f} s "
                                  f"(current: {owners})")
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

    def _current_owners(self) -> dict[str, list[int]] | None:
        """Each live member's partitions of the topic, or None while any live member has
        not been assigned since it joined or has a revocation pending."""
        owners: dict[str, list[int]] = {}
        for name in self.live():
            last = None
            for e in self.members[name].events():
                if e["event"] in ("assign", "revoke", "lost"):
                    last = e
            if last is None or last["event"] != "assign":
                return None
            owners[name] = [p for t, p in last["partitions"] if t == self.topic]
        return owners

    def _topic_partitions(self, topic: str) -> int:
        from confluent_kafka import Producer

        client = Producer(self.broker.client_config(logger=librdkafka_log))
        try:
            md = client.list_topics(timeout=10)
        finally:
            client.flush(0)
        if topic not in md.topics:
            raise BrokerError(f"topic {topic} does not exist (add a CreateTopic step)")
        return len(md.topics[topic].partitions)

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
                proc.stdin.write(b"close\n")
                proc.stdin.close()
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


def run_scenario(broker: KafkaBroker, steps: Iterable[Step], *, group_id: str = "orders-processor",
                 workdir: str | Path | None = None,
                 member_properties: Mapping[str, object] | None = None) -> ScenarioResult:
    """Run ``steps`` against ``broker``; members and producer are always stopped at the
    end, even when a step fails. Ground truth goes to ``workdir`` (default:
    ``<broker workdir>/scenario-<group_id>``)."""
    wd = Path(workdir) if workdir else broker.workdir / f"scenario-{group_id}"
    runner = ScenarioRunner(broker, group_id, wd, member_properties)
    try:
        for step in steps:
            runner.run(step)
    finally:
        runner.close()
    return runner.result()


def _step_args(step: Step) -> dict[str, Any]:
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in step.__dict__.items()}


def _now_ms() -> int:
    return int(time.time() * 1000)


__all__ = [
    "CLIENT_PROPERTIES", "MEMBER_DEFAULTS", "CreateTopic", "StartProducer", "StopProducer", "Join", "Leave",
    "Crash", "RestartBroker", "Sleep", "Settle", "Drain", "StopAll", "Step", "MemberRun", "ScenarioResult", "ScenarioRunner",
    "default_scenario", "flapping_scenario", "restart_scenario", "SCENARIOS", "run_scenario",
]
