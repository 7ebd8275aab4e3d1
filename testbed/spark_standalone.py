"""A real Spark standalone cluster (one master, one worker) on 127.0.0.1.

Started with pyspark's own launcher, `$SPARK_HOME/bin/spark-class`, the same classes a
production standalone cluster runs (`org.apache.spark.deploy.master.Master` and
`...worker.Worker`). It lets the test suite and the benchmarks run the unchanged pipeline
against `spark://127.0.0.1:<port>`: executors in their own JVM, Python workers forked by
that JVM, shuffles over the network.

    with StandaloneCluster() as cluster:
        subprocess.run(["rebalance-audit", "run", "--spark-master", cluster.master_url, ...])
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark package."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandaloneClusterError(RuntimeError):
    pass


class StandaloneCluster:
    """Master + one worker; stopped (process group SIGTERM, then SIGKILL) on exit."""

    def __init__(self, cores: int = 2, memory: str = "1g", workdir: str | os.PathLike | None = None,
                 start_timeout: float = 90.0):
        self.cores = cores
        self.memory = memory
        self.start_timeout = start_timeout
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir:
            self.workdir = Path(workdir)
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="spark-standalone-")
            self.workdir = Path(self._tmp.name)
        self.port = _free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self._procs: list[subprocess.Popen] = []

    # ------------------------------------------------------------------ lifecycle
    def _launch(self, name: str, args: list[str]) -> subprocess.Popen:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            # Executors fork Python workers with this interpreter: the pipeline's venv.
            PYSPARK_PYTHON=sys.executable,
            SPARK_WORKER_DIR=str(self.workdir / "work"),
            SPARK_LOG_DIR=str(self.workdir / "logs"),
        )
        log = open(self.workdir / f"{name}.log", "wb")
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        # Own process group: stopping it takes the JVM and anything it forked.
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def start(self) -> "StandaloneCluster":
        (self.workdir / "work").mkdir(parents=True, exist_ok=True)
        master_ui, worker_ui = _free_port(), _free_port()
        self._procs.append(
            self._launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                    "--port", str(self.port), "--webui-port", str(master_ui)])
        )
        self._wait_for("master.log", "I have been elected leader", "master")
        self._procs.append(
            self._launch("worker", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                    "--cores", str(self.cores), "--memory", self.memory,
                                    "--webui-port", str(worker_ui), self.master_url])
        )
        self._wait_for("worker.log", "Successfully registered with master", "worker")
        return self

    def _wait_for(self, log_name: str, needle: str, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        path = self.workdir / log_name
        while time.monotonic() < deadline:
            if path.exists() and needle in path.read_text(errors="replace"):
                return
            for p in self._procs:
                if p.poll() is not None:
                    self.stop()
                    raise StandaloneClusterError(f"Spark {what} exited with {p.returncode}; see {path}")
            time.sleep(0.3)
        self.stop()
        raise StandaloneClusterError(f"Spark {what} not ready within {self.start_timeout:.0f}s; see {path}")

    def stop(self) -> None:
        for p in reversed(self._procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for p in reversed(self._procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=5)
        self._procs.clear()

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
