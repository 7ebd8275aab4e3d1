"""Kafka Connect distributed workers on a testbed cluster: a group that is not a consumer group.

Connect workers coordinate through the same group coordinator as consumers, so their group
is in ``__consumer_offsets`` too, with protocol type ``connect`` and Connect's own protocols
(``sessioned``, ``compatible``, ``default``) and assignments (connectors and tasks, not
partitions). The workers run ``org.apache.kafka.connect.cli.ConnectDistributed`` from the
testbed's JARs, each with a REST listener on loopback, and are stopped by PID.

    with ConnectWorkers(cluster, workdir, group_id="connect-cluster", workers=2):
        ...   # both workers joined the group (their REST endpoints answer)
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from .broker import BrokerError, KafkaCluster, _free_ports
from .kafka_home import java_command

# Worker log lines go to a file per worker; only warnings, as Kafka's tools log.
_WORKER_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:connect.log.file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
"""


class ConnectWorkers:
    def __init__(self, cluster: KafkaCluster, workdir: str | os.PathLike, group_id: str = "connect-cluster",
                 workers: int = 2, heap_mb: int = 256, start_timeout: float = 90.0):
        self.cluster = cluster
        self.workdir = Path(workdir)
        self.group_id = group_id
        self.count = workers
        self.heap_mb = heap_mb
        self.start_timeout = start_timeout
        self.ports: list[int] = []
        self._procs: list[subprocess.Popen] = []

    def __enter__(self) -> "ConnectWorkers":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _properties(self, port: int) -> str:
        rf = min(3, len(self.cluster.brokers))
        topics = {"config": f"{self.group_id}-configs", "offset": f"{self.group_id}-offsets",
                  "status": f"{self.group_id}-status"}
        lines = [
            f"bootstrap.servers={self.cluster.bootstrap_servers}",
            f"group.id={self.group_id}",
            "key.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            f"listeners=http://127.0.0.1:{port}",
            "offset.flush.interval.ms=10000",
            *(f"{kind}.storage.topic={name}" for kind, name in topics.items()),
            *(f"{kind}.storage.replication.factor={rf}" for kind in topics),
            "offset.storage.partitions=1",
            "status.storage.partitions=1",
        ]
        return "\n".join(lines) + "\n"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log4j2 = self.workdir / "log4j2.properties"
        log4j2.write_text(_WORKER_LOG4J2)
        self.ports = _free_ports(self.count)
        try:
            for i, port in enumerate(self.ports):
                props = self.workdir / f"worker-{i}.properties"
                props.write_text(self._properties(port))
                log = self.workdir / f"worker-{i}.log"
                argv = java_command("org.apache.kafka.connect.cli.ConnectDistributed", props, heap_mb=self.heap_mb,
                                    log4j2=log4j2, jvm_options=[f"-Dconnect.log.file={log}"])
                with open(self.workdir / f"worker-{i}.out", "wb") as out:
                    self._procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                                        start_new_session=True))
            for i, port in enumerate(self.ports):
                self._wait_rest(i, port)
        except BaseException:
            self.stop()
            raise

    def _wait_rest(self, i: int, port: int) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._procs[i].poll() is not None:
                raise BrokerError(f"Connect worker {i} exited with code {self._procs[i].returncode}; "
                                  f"see {self.workdir / f'worker-{i}.log'}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/connectors", timeout=2) as r:
                    if r.status == 200:  # answers once the worker has joined its group
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise BrokerError(f"Connect worker {i} did not answer on port {port} within {self.start_timeout:.0f} s")

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a clean leave of the group), SIGKILL after ``timeout``."""
        for p in self._procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in self._procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs = []
