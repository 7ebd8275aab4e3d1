"""A real Apache Kafka 4.x cluster in KRaft mode on loopback: one combined node, or several.

Used by the live tests and the demo: the brokers write genuine ``__consumer_offsets``
segments (record batch v2, control records, KIP-848 records) and genuine ``server.log``
files, which are exactly what the product reads on a user's cluster.

Why things are done the way they are:

* Every node is a combined broker+controller (``process.roles=broker,controller``) with a
  static voter set: one JVM per node is the lightest real quorum. Storage is formatted
  once with Kafka's own ``kafka.tools.StorageTool format``; a restart reuses it.
* The JVMs are started with ``java`` from the JARs Maven fetched (no tarball, no shell
  scripts), logging through a log4j2 properties file that routes lines as Kafka's own
  ``config/log4j2.yaml`` does: coordinator lines land in ``server.log``.
* Each JVM runs in its own process group, stopped by PID (SIGTERM, then SIGKILL after a
  timeout). A tiny shell watchdog per JVM kills it if the Python process that started it
  dies without stopping it, and an ``atexit`` hook stops every cluster still running.
* Ports are picked free at start; if another process grabs one before the JVM binds it,
  start is retried with new ports. A restart keeps its ports so clients reconnect.
* ``start()`` returns once every broker is registered and ``__consumer_offsets`` has a
  leader on every partition: the coordinator creates that topic itself on the first
  FindCoordinator (as on any real cluster); the testbed sends one and waits.
* Broker-side group limits are lowered for test speed (KIP-848 session and heartbeat, the
  classic minimum session timeout); everything else is Kafka's default unless a caller
  passes ``server_properties``.
* ``clock_skew_s`` offsets chosen nodes' wall clocks by whole or fractional seconds
  (libfaketime preloaded into that node's JVM only, its monotonic clock real: see
  ``testbed/faketime.py``); every start of the node, a restart included, keeps it.
"""
from __future__ import annotations

import atexit
import base64
import logging
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Mapping

from pipelines.assignors.javahash import coordinator_partition

from .faketime import find_libfaketime, skewed_environment
from .kafka_home import find_java, find_kafka_libs, java_command, kafka_version

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

# Group limits lowered for test speed. KIP-848 members cannot choose their session timeout
# or heartbeat interval: the broker sets them (45 s / 5 s by default), so the testbed
# lowers them here, and the minimums that bound them.
TEST_GROUP_PROPERTIES: dict[str, object] = {
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.classic.min.session.timeout.ms": 1000,
}

# log4j2 routing as Kafka's config/log4j2.yaml: the coordinator's INFO lines in server.log
# (hourly rotation to server.log.yyyy-MM-dd-HH), state changes, the controller and the log
# cleaner in their own files, the request logger quiet. Kafka's layout "[%d] %p %m (%c)%n".
_BROKER_LOG4J2 = """\
status = warn
property.logDir = ${sys:kafka.logs.dir}
property.layout = [%d] %p %m (%c)%n

appender.server.type = RollingFile
appender.server.name = ServerAppender
appender.server.fileName = ${logDir}/server.log
appender.server.filePattern = ${logDir}/server.log.%d{yyyy-MM-dd-HH}
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = ${layout}
appender.server.policy.type = TimeBasedTriggeringPolicy

appender.state.type = RollingFile
appender.state.name = StateChangeAppender
appender.state.fileName = ${logDir}/state-change.log
appender.state.filePattern = ${logDir}/state-change.log.%d{yyyy-MM-dd-HH}
appender.state.layout.type = PatternLayout
appender.state.layout.pattern = ${layout}
appender.state.policy.type = TimeBasedTriggeringPolicy

appender.controller.type = RollingFile
appender.controller.name = ControllerAppender
appender.controller.fileName = ${logDir}/controller.log
appender.controller.filePattern = ${logDir}/controller.log.%d{yyyy-MM-dd-HH}
appender.controller.layout.type = PatternLayout
appender.controller.layout.pattern = ${layout}
appender.controller.policy.type = TimeBasedTriggeringPolicy

appender.cleaner.type = RollingFile
appender.cleaner.name = CleanerAppender
appender.cleaner.fileName = ${logDir}/log-cleaner.log
appender.cleaner.filePattern = ${logDir}/log-cleaner.log.%d{yyyy-MM-dd-HH}
appender.cleaner.layout.type = PatternLayout
appender.cleaner.layout.pattern = ${layout}
appender.cleaner.policy.type = TimeBasedTriggeringPolicy

rootLogger.level = info
rootLogger.appenderRef.server.ref = ServerAppender

logger.request.name = kafka.request.logger
logger.request.level = warn
logger.network.name = kafka.network.RequestChannel$
logger.network.level = warn

logger.controller.name = org.apache.kafka.controller
logger.controller.level = info
logger.controller.additivity = false
logger.controller.appenderRef.controller.ref = ControllerAppender
logger.kcontroller.name = kafka.controller
logger.kcontroller.level = info
logger.kcontroller.additivity = false
logger.kcontroller.appenderRef.controller.ref = ControllerAppender

logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = info
logger.cleaner.additivity = false
logger.cleaner.appenderRef.cleaner.ref = CleanerAppender
logger.cleaner2.name = org.apache.kafka.storage.internals.log.LogCleaner
logger.cleaner2.level = info
logger.cleaner2.additivity = false
logger.cleaner2.appenderRef.cleaner.ref = CleanerAppender

logger.state.name = state.change.logger
logger.state.level = info
logger.state.additivity = false
logger.state.appenderRef.state.ref = StateChangeAppender
"""

# Runs beside each JVM in its own session: if the Python process that started the JVM
# dies without stopping it, SIGTERM the JVM's process group and SIGKILL it $3 s later.
# stop() kills the watchdog first, so it never fires then.
_WATCHDOG = r"""
parent=$1; group=$2; grace=$3
while kill -0 "$parent" 2>/dev/null; do sleep 1; done
kill -TERM -"$group" 2>/dev/null || exit 0
i=0
while [ "$i" -lt "$grace" ] && kill -0 -"$group" 2>/dev/null; do sleep 1; i=$((i+1)); done
kill -KILL -"$group" 2>/dev/null
exit 0
"""


class BrokerError(RuntimeError):
    """A broker failed to start, or a testbed operation failed."""


def _free_ports(count: int) -> list[int]:
    # Hold every socket until all are bound so the same port is not returned twice.
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _random_cluster_id() -> str:
    # Kafka's Uuid in URL-safe base64 without padding; Kafka refuses ids that start with
    # '-' (they read as command-line flags), as its own randomUuid() avoids.
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _write_properties(path: Path, props: Mapping[str, object]) -> None:
    def fmt(v: object) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)
    path.write_text("".join(f"{k}={fmt(v)}\n" for k, v in props.items()))


_live: "set[KafkaCluster]" = set()
_live_lock = threading.Lock()


@atexit.register
def _stop_all_at_exit() -> None:
    with _live_lock:
        clusters = list(_live)
    for cluster in clusters:
        try:
            cluster.stop()
        except Exception:  # exit must go on; the watchdogs still cover the JVMs
            log.exception("stopping the testbed cluster at exit failed")


class _Jvm:
    """One JVM in its own process group, with its watchdog."""

    def __init__(self, name: str, argv: list[str], out_file: Path, grace: int, env: dict[str, str] | None = None):
        self.name = name
        self.out_file = out_file
        with open(out_file, "ab") as out:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True)  # own session + process group, immune to ^C
        self.watchdog = subprocess.Popen(
            ["sh", "-c", _WATCHDOG, "rebalance-audit-watchdog", str(os.getpid()), str(self.proc.pid), str(grace)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float, sig: int = signal.SIGTERM) -> None:
        if self.watchdog.poll() is None:
            self.watchdog.kill()
            self.watchdog.wait()
        if self.proc.poll() is None:
            self._signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) ignored SIGTERM for %.0f s; killing it", self.name, self.proc.pid, timeout)
                self._signal(signal.SIGKILL)
                self.proc.wait()
        # The JVM leads its group; anything it left behind in the group goes too.
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


class KafkaNode:
    """One KRaft node of a ``KafkaCluster``: a combined broker+controller (one-node
    clusters), a broker, or the controller of a multi-broker cluster.

    Layout of its folder: ``data/`` (``log.dirs``: the ``__consumer_offsets-N`` segment
    folders and the metadata log), ``logs/`` (``server.log``, ``controller.log``,
    ``state-change.log``, ``log-cleaner.log``, the JVM's stdout in ``kafka.out``),
    ``config/`` (``server.properties``, ``log4j2.properties``).
    """

    def __init__(self, cluster: "KafkaCluster", node_id: int, roles: str):
        self.cluster = cluster
        self.node_id = node_id
        self.roles = roles
        self.workdir = cluster.workdir / f"node-{node_id}"
        self.port: int | None = None
        self.controller_port: int | None = None
        self._jvm: _Jvm | None = None
        for sub in ("data", "logs", "config"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def server_log(self) -> Path:
        return self.log_dir / "server.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._jvm.pid if self._jvm is not None and self._jvm.alive() else None

    @property
    def clock_skew_s(self) -> float:
        """How far this node's wall clock runs ahead of the machine's (negative: behind), in
        seconds, from its next start on (``KafkaCluster.clock_skew_s``)."""
        return float(self.cluster.clock_skew_s.get(self.node_id, 0.0))

    @property
    def running(self) -> bool:
        return self._jvm is not None and self._jvm.alive()

    def offsets_partition_dirs(self) -> list[Path]:
        """This node's ``__consumer_offsets-N`` folders (only the partitions it hosts)."""
        return sorted(self.data_dir.glob(f"{OFFSETS_TOPIC}-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))

    def write_config(self) -> Path:
        c = self.cluster
        listeners = []
        if self.is_broker:
            listeners.append(f"PLAINTEXT://127.0.0.1:{self.port}")
        if self.is_controller:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_port}")
        props: dict[str, object] = {
            "process.roles": self.roles,
            "node.id": self.node_id,
            "controller.quorum.voters": c.quorum_voters,
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.data_dir,
        }
        if self.is_broker:
            props.update({
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "inter.broker.listener.name": "PLAINTEXT",
                "offsets.topic.num.partitions": c.offsets_partitions,
                "offsets.topic.replication.factor": c.replication_factor,
                "transaction.state.log.replication.factor": c.replication_factor,
                "transaction.state.log.min.isr": min(2, c.replication_factor),
                "share.coordinator.state.topic.replication.factor": c.replication_factor,
                "share.coordinator.state.topic.min.isr": min(2, c.replication_factor),
                "default.replication.factor": c.replication_factor,
                "num.partitions": 1,
                "auto.create.topics.enable": False,
                # The cleaner's 128 MB dedupe buffer is allocated on the heap at start.
                "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
                **TEST_GROUP_PROPERTIES,
            })
        # Few threads: a test cluster shares a small box with Spark.
        props.update({"num.network.threads": 2, "num.io.threads": 2, "background.threads": 2,
                      "num.recovery.threads.per.data.dir": 1})
        props.update(c.extra_properties)
        config = self.workdir / "config"
        _write_properties(config / "server.properties", props)
        (config / "log4j2.properties").write_text(_BROKER_LOG4J2)
        return config / "server.properties"

    def format_storage(self) -> None:
        """Kafka's StorageTool, once: a restart keeps the formatted metadata log."""
        if (self.data_dir / "meta.properties").is_file():
            return
        argv = java_command("kafka.tools.StorageTool", "format", "--cluster-id", self.cluster.cluster_id,
                            "--config", self.workdir / "config" / "server.properties", "--ignore-formatted")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise BrokerError(f"node {self.node_id}: StorageTool format failed (exit {done.returncode}):\n"
                              + (done.stdout + done.stderr).strip()[-3000:])

    def launch(self) -> None:
        c = self.cluster
        argv = java_command(
            "kafka.Kafka", self.workdir / "config" / "server.properties",
            heap_mb=c.heap_mb if self.is_broker else 256,
            log4j2=self.workdir / "config" / "log4j2.properties",
            jvm_options=[f"-Dkafka.logs.dir={self.log_dir}", "-Djava.net.preferIPv4Stack=true",
                         # Log lines in UTC, as the recordings' brokers wrote them; the log
                         # parser is told the zone (--tz) either way.
                         "-Duser.timezone=UTC"])
        # A skewed clock: libfaketime in this JVM only (StorageTool, clients and the other
        # nodes keep the real one). Read at every launch, so a restart keeps the skew.
        skew = self.clock_skew_s
        env = skewed_environment(skew) if skew else None
        if skew:
            log.info("node %d starts with its wall clock %+.3f s off (libfaketime)", self.node_id, skew)
        self._jvm = _Jvm(f"kafka-{self.node_id}", argv, self.log_dir / "kafka.out", grace=int(c.stop_timeout),
                         env=env)

    def check_alive(self) -> None:
        if self._jvm is None or self._jvm.alive():
            return
        tail = _tail(self._jvm.out_file) + "\n" + _tail(self.server_log)
        if "BindException" in tail or "Address already in use" in tail:
            raise _PortTaken(f"node {self.node_id}: address already in use")
        raise BrokerError(f"Kafka node {self.node_id} exited with code {self._jvm.proc.returncode} during start; "
                          f"last lines of its logs ({self.log_dir}):\n{tail}")

    def stop(self, timeout: float, kill: bool = False) -> None:
        if self._jvm is not None:
            self._jvm.stop(timeout, signal.SIGKILL if kill else signal.SIGTERM)
        self._jvm = None


class KafkaCluster:
    """A KRaft cluster of the pinned Kafka 4.x release on 127.0.0.1: one combined
    broker+controller node (``brokers=1``), or ``brokers`` brokers with one controller.

    A multi-broker cluster gets a controller of its own because a combined node cannot shut
    down cleanly once the quorum is gone: the last combined nodes of a stopping cluster wait
    for a controller that no longer answers. With a separate controller every broker's
    controlled shutdown is acknowledged, and the controller stops last.

    Use as a context manager, or call ``start()`` / ``stop()``. A given ``workdir`` is kept
    (and reused by a later start: the brokers reload their groups from the segments); without
    one a temporary folder is made and removed at stop unless ``keep_workdir``.

    ``__consumer_offsets`` has ``offsets_partitions`` partitions (Kafka's default 50) at
    replication factor ``min(3, nodes)``. ``server_properties`` override any broker setting.

    ``clock_skew_s`` maps node ids to seconds by which that node's wall clock runs ahead
    (negative: behind) of the machine's: ``{1: 8, 3: -8}``. The records its coordinators
    and partition leaders write and its log lines carry that clock; timers do not change
    (see ``testbed/faketime.py``). Needs Debian's libfaketime (scripts/setup-faketime.sh).
    Kept across ``restart()`` and ``start_node()``; changing an entry of
    ``cluster.clock_skew_s`` takes effect at that node's next start.
    """

    def __init__(
        self,
        workdir: str | Path | None = None,
        *,
        brokers: int = 1,
        install: bool = False,
        offsets_partitions: int = 50,
        heap_mb: int = 512,
        server_properties: Mapping[str, object] | None = None,
        start_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        keep_workdir: bool = False,
        clock_skew_s: Mapping[int, float] | None = None,
    ):
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if offsets_partitions < 1:
            raise ValueError("offsets_partitions must be at least 1")
        # Node ids: 1 for the combined node; the controller 0 and brokers 1..n otherwise.
        node_ids = {1} if brokers == 1 else set(range(brokers + 1))
        self.clock_skew_s: dict[int, float] = {int(k): float(v) for k, v in (clock_skew_s or {}).items()}
        unknown = sorted(set(self.clock_skew_s) - node_ids)
        if unknown:
            raise ValueError(f"clock_skew_s names no node of this cluster: {unknown} (nodes {sorted(node_ids)})")
        if not all(math.isfinite(v) for v in self.clock_skew_s.values()):
            raise ValueError(f"clock_skew_s must be finite seconds: {self.clock_skew_s}")
        if any(self.clock_skew_s.values()):
            find_libfaketime()  # missing: TestbedUnavailable now, not at the first start
        find_java()
        self.kafka_libs = find_kafka_libs(install=install)
        self.kafka_version = kafka_version()
        self._temporary = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="rebalance-audit-kafka-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.keep_workdir = keep_workdir or not self._temporary
        self.offsets_partitions = offsets_partitions
        self.replication_factor = min(3, brokers)
        self.heap_mb = heap_mb
        self.extra_properties = dict(server_properties or {})
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        id_file = self.workdir / "cluster.id"
        if not id_file.is_file():
            id_file.write_text(_random_cluster_id())
        self.cluster_id = id_file.read_text().strip()
        if brokers == 1:
            self.brokers = [KafkaNode(self, 1, "broker,controller")]
            self.controllers = list(self.brokers)
        else:
            self.brokers = [KafkaNode(self, node_id, "broker") for node_id in range(1, brokers + 1)]
            self.controllers = [KafkaNode(self, 0, "controller")]
        self.nodes = self.controllers + [n for n in self.brokers if n not in self.controllers]
        self.started_at: float | None = None
        self.startup_seconds: float | None = None

    # ----- what users of the cluster need --------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        self._require_started()
        return ",".join(n.address for n in self.brokers)

    @property
    def quorum_voters(self) -> str:
        return ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.controllers)

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka properties for a client of this cluster, plus ``overrides`` (a
        ``logger`` object among them: librdkafka's properties are not only strings)."""
        return {"bootstrap.servers": self.bootstrap_servers, **overrides}

    @property
    def data_dirs(self) -> list[Path]:
        """Each node's ``log.dirs``: what ``rebalance-audit decode`` / ``ingest segments`` read."""
        return [n.data_dir for n in self.brokers]

    @property
    def log_dirs(self) -> list[Path]:
        """Each node's ``kafka.logs.dir``, holding its ``server.log``."""
        return [n.log_dir for n in self.brokers]

    @property
    def server_logs(self) -> list[Path]:
        return [n.server_log for n in self.brokers]

    def partition_for(self, group_id: str) -> int:
        return coordinator_partition(group_id, self.offsets_partitions)

    @property
    def pids(self) -> dict[str, int]:
        return {f"kafka-{n.node_id}": n.pid for n in self.nodes if n.pid is not None}

    @property
    def running(self) -> bool:
        return any(n.running for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no node {node_id} in this cluster")

    # ----- lifecycle -----------------------------------------------------------------
    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "KafkaCluster":
        if all(n.running for n in self.nodes):
            return self
        begin = time.monotonic()
        with _live_lock:
            _live.add(self)
        try:
            for attempt in range(3):
                try:
                    # A restart first tries the ports it had, then fresh ones.
                    self._start_once(begin + self.start_timeout, reuse_ports=attempt == 0)
                    break
                except _PortTaken as taken:
                    log.info("port conflict (%s); retrying with new ports", taken)
                    self._stop_nodes()
                    if attempt == 2:
                        raise BrokerError(f"could not bind free ports 3 times: {taken}") from None
            self._wait_offsets_topic(begin + self.start_timeout)
        except BaseException:
            self.stop()
            raise
        self.started_at = time.time()
        self.startup_seconds = time.monotonic() - begin
        log.info("Kafka %s cluster of %d broker(s) up at %s in %.1f s (workdir %s)", self.kafka_version,
                 len(self.brokers), self.bootstrap_servers, self.startup_seconds, self.workdir)
        return self

    def restart(self) -> "KafkaCluster":
        """Stop every node cleanly and start them again on the same data and, when still free,
        the same ports (so running clients reconnect). The coordinators reload every group
        from ``__consumer_offsets``."""
        self._stop_nodes()
        return self.start()

    def stop_node(self, node_id: int, kill: bool = False) -> None:
        """Stop one node (SIGTERM, or SIGKILL with ``kill``): its partitions fail over."""
        self.node(node_id).stop(self.stop_timeout, kill=kill)

    def start_node(self, node_id: int, timeout: float = 60.0) -> None:
        """Start a stopped node again on its old ports and data."""
        node = self.node(node_id)
        if node.running:
            return
        node.launch()
        self._wait_registered(time.monotonic() + timeout, [node])

    def stop(self) -> None:
        """Stop every node (SIGTERM, SIGKILL after ``stop_timeout``)."""
        try:
            self._stop_nodes()
        finally:
            with _live_lock:
                _live.discard(self)
            if not self.keep_workdir and self.workdir.exists():
                shutil.rmtree(self.workdir, ignore_errors=True)

    def _stop_nodes(self) -> None:
        # Brokers first, all at once (each one's controlled shutdown needs the controller),
        # then the controller.
        threads = [threading.Thread(target=n.stop, args=(self.stop_timeout,)) for n in self.brokers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for n in self.controllers:
            n.stop(self.stop_timeout)

    def _start_once(self, deadline: float, reuse_ports: bool) -> None:
        if not (reuse_ports and all(n.port for n in self.nodes)):
            ports = _free_ports(2 * len(self.nodes))
            for i, n in enumerate(self.nodes):
                n.port, n.controller_port = ports[2 * i], ports[2 * i + 1]
        for n in self.nodes:
            n.write_config()
        for n in self.nodes:
            n.format_storage()
        for n in self.nodes:
            n.launch()
        self._wait_registered(deadline, self.brokers)

    def _wait_registered(self, deadline: float, nodes: list[KafkaNode]) -> None:
        """Until every one of ``nodes`` is listed in the cluster's metadata (it is serving)."""
        want = {n.node_id for n in nodes}
        while True:
            for n in {*nodes, *self.controllers}:
                n.check_alive()
            md = self._metadata(timeout=2.0)
            if md is not None and want <= set(md.brokers):
                return
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- node {n.node_id}:\n{_tail(n.server_log)}" for n in nodes)
                raise BrokerError(f"Kafka node(s) {sorted(want)} not serving after {self.start_timeout:.0f} s:\n{tails}")
            time.sleep(0.3)

    def _wait_offsets_topic(self, deadline: float) -> None:
        """The coordinator creates ``__consumer_offsets`` on the first FindCoordinator:
        send one (describing a group that does not exist writes nothing) until the topic has
        a leader on every partition."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self.client_config(logger=librdkafka_log))
        while True:
            md = self._metadata(timeout=2.0)
            topic = md.topics.get(OFFSETS_TOPIC) if md is not None else None
            if (topic is not None and topic.error is None and len(topic.partitions) == self.offsets_partitions
                    and all(p.leader >= 0 and p.error is None for p in topic.partitions.values())):
                return
            try:
                for future in admin.describe_consumer_groups(["rebalance-audit-testbed-probe"],
                                                             request_timeout=2).values():
                    future.result()
            except Exception:  # noqa: BLE001 - COORDINATOR_NOT_AVAILABLE while the topic is made
                pass
            if time.monotonic() > deadline:
                raise BrokerError(f"{OFFSETS_TOPIC} has no leader on every partition after {self.start_timeout:.0f} s")
            time.sleep(0.3)

    def _metadata(self, timeout: float, nodes: list[KafkaNode] | None = None):
        """Cluster metadata (all topics) via librdkafka from one of ``nodes`` (default: any
        broker), or None if not available yet."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        addresses = [n.address for n in (nodes or self.brokers) if n.running and n.port]
        if not addresses:
            return None
        conf: dict[str, Any] = {"bootstrap.servers": ",".join(addresses), "logger": librdkafka_log,
                                "socket.timeout.ms": 3000}
        admin = AdminClient(conf)
        try:
            return admin.list_topics(timeout=timeout)
        except KafkaException:
            return None

    # ----- topics --------------------------------------------------------------------
    def ensure_topic(self, name: str, partitions: int, config: Mapping[str, object] | None = None,
                     replication_factor: int | None = None, timeout: float = 30.0) -> None:
        """Create ``name`` (unless it exists) and wait until every partition has a leader."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        if not _LEGAL_TOPIC.match(name):
            raise ValueError(f"illegal Kafka topic name: {name!r}")
        if partitions < 1:
            raise ValueError("partitions must be at least 1")
        deadline = time.monotonic() + timeout
        admin = AdminClient(self.client_config(logger=librdkafka_log))
        topic = NewTopic(name, num_partitions=partitions,
                         replication_factor=replication_factor or self.replication_factor,
                         config={k: str(v) for k, v in (config or {}).items()})
        try:
            admin.create_topics([topic], request_timeout=timeout)[name].result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise BrokerError(f"creating topic {name} failed: {exc.args[0]}") from None
        def ready(md) -> bool:
            t = md.topics.get(name) if md is not None else None
            return (t is not None and t.error is None and len(t.partitions) >= partitions
                    and all(p.leader >= 0 and p.error is None for p in t.partitions.values()))

        # Every broker's metadata cache, not just one's: a client may ask any of them next.
        while True:
            if all(ready(self._metadata(timeout=2.0, nodes=[n])) for n in self.brokers if n.running):
                return
            if time.monotonic() > deadline:
                raise BrokerError(f"topic {name} has no leader for every partition after {timeout:.0f} s")
            time.sleep(0.2)

    def _require_started(self) -> None:
        if any(n.port is None for n in self.nodes):
            raise BrokerError("the cluster has not been started")


class _PortTaken(Exception):
    pass


# librdkafka's own log lines of the testbed's clients go to Python logging here.
librdkafka_log = logging.getLogger("testbed.librdkafka")
