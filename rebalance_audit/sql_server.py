"""A warm Spark for `rebalance-audit sql`: a Spark Connect server started on demand, reused.

Starting Spark (a JVM, delta-spark, the first plan of each table) is most of a `sql` call's
20-40 s. The first call starts a Spark Connect server in the background, in a process of
its own (this module run as `python -m rebalance_audit.sql_server`, with the same
SparkSession settings as every other command: `pipelines.spark.get_spark`), and every later
call sends its query to it: a second or two. The server stops by itself after
`$REBALANCE_AUDIT_SQL_IDLE_S` seconds (default 1800) without a query, or with
`rebalance-audit sql --stop-server`.

One server per user and Spark master, described by a state file in the set-up cache
(`sql-server/<master hash>.json`: pid, port, token), readable by its owner only. The server
listens on 127.0.0.1 only and takes a random token on every request (Spark Connect's
`spark.connect.authenticate.token`), so another user of the machine cannot query the lakes
through it. The token goes to the server through its environment, never its command line
(which `ps` shows to everyone), and is never logged.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.spark import cache_dir, spark_log_file

SERVER_ENV = "REBALANCE_AUDIT_SQL_SERVER"  # "off": `sql` runs its queries in-process
IDLE_ENV = "REBALANCE_AUDIT_SQL_IDLE_S"
DEFAULT_IDLE_S = 1800
TOKEN_ENV = "REBALANCE_AUDIT_SQL_TOKEN"
# How long a first call waits for the server to come up (a JVM and delta-spark start).
START_TIMEOUT_S = 180.0


class SqlServerError(RuntimeError):
    """The server could not be started or reached; the message is one line."""


@dataclass(frozen=True)
class Server:
    pid: int
    port: int
    token: str
    master: str

    def url(self) -> str:
        # "localhost": PySpark then sends the token over a local channel, not TLS.
        return f"sc://localhost:{self.port}"


def _state_dir() -> Path:
    d = cache_dir() / "sql-server"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d


def _state_file(master: str) -> Path:
    return _state_dir() / (hashlib.sha256(master.encode("utf-8")).hexdigest()[:16] + ".json")


def _used_file(state: Path) -> Path:
    """Touched by every query: the server's idle clock."""
    return state.with_suffix(".used")


def _read(state: Path) -> Server | None:
    try:
        d = json.loads(state.read_text())
        return Server(int(d["pid"]), int(d["port"]), str(d["token"]), str(d["master"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _alive(s: Server) -> bool:
    try:
        os.kill(s.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process under a reused pid
        return False
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", s.port), timeout=2):
        return True
    return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def connect(master: str):
    """A Spark Connect session on this user's server for `master`, started if none runs."""
    from pyspark.sql import SparkSession

    from pyspark.sql.connect.client.retries import DefaultPolicy

    s = ensure(master)
    touch(master)
    os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = s.token  # read by the client, not printed
    session: Any = SparkSession  # pyspark types `builder` as a classproperty mypy cannot call
    spark = session.builder.remote(s.url()).getOrCreate()
    # A server on this machine answers at once or is gone: a few quick retries, not the
    # default's ten minutes of backoff (which a client would also sit through at exit).
    spark.client.set_retry_policies([DefaultPolicy(max_retries=4, max_backoff=2000)])
    return spark


def touch(master: str) -> None:
    """A query ran: the server's idle clock starts again."""
    with contextlib.suppress(OSError):
        _used_file(_state_file(master)).touch()


def ensure(master: str) -> Server:
    """The running server for `master`, or a new one (one start at a time: a lock file)."""
    state = _state_file(master)
    s = _read(state)
    if s is not None and _alive(s):
        return s
    with open(state.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another call may be starting it right now
        s = _read(state)
        if s is not None and _alive(s):
            return s
        state.unlink(missing_ok=True)
        return _start(master, state)


def _start(master: str, state: Path) -> Server:
    port, token = _free_port(), secrets.token_hex(24)
    env = dict(os.environ, **{TOKEN_ENV: token})
    log = spark_log_file()
    # The server's own output (the JVM's start-up lines) goes where Spark's log goes.
    with open(log if log is not None else os.devnull, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rebalance_audit.sql_server", "--master", master, "--port", str(port),
             "--state", str(state)],
            env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        s = _read(state)
        if s is not None and s.pid == proc.pid and _alive(s):
            return s
        if proc.poll() is not None:
            where = f" (its log: {log})" if log is not None else ""
            raise SqlServerError(f"the sql server exited with status {proc.returncode} while starting{where}")
        time.sleep(0.2)
    proc.kill()
    raise SqlServerError(f"the sql server did not start within {START_TIMEOUT_S:.0f} s")


def stop(master: str) -> bool:
    """Stop this user's server for `master`; False when none was running."""
    state = _state_file(master)
    s = _read(state)
    state.unlink(missing_ok=True)
    if s is None or not _alive(s):
        return False
    os.kill(s.pid, signal.SIGTERM)
    for _ in range(100):
        try:
            os.kill(s.pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    os.kill(s.pid, signal.SIGKILL)
    return True


def _busy(spark) -> Callable[[], bool]:
    """Whether a client's request is in the server now: a Spark job running, or an
    operation Spark Connect holds (a query being analyzed or planned, or its results being
    streamed back, which run no job)."""
    tracker = spark.sparkContext.statusTracker()
    service = getattr(spark.sparkContext._jvm.org.apache.spark.sql.connect.service, "SparkConnectService$")
    executions = getattr(service, "MODULE$").executionManager()

    def busy() -> bool:
        if tracker.getActiveJobsIds():
            return True
        # An operation stays held after its client is gone (until released or abandoned);
        # it is in progress only while a client's RPC is attached to it (no detach time).
        held = executions.listExecuteHolders().iterator()
        while held.hasNext():
            if held.next().lastAttachedRpcTimeNs().isEmpty():
                return True
        return False
    return busy


def serve(master: str, port: int, state: Path) -> None:
    """Run the server until it has been idle for the idle time, or is told to stop."""
    from pipelines.spark import get_spark

    token = os.environ.pop(TOKEN_ENV)
    # Spark Connect takes its token from this variable when its config is unset, as
    # PySpark's own local server does: a config would be on the JVM's command line.
    os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    spark = get_spark(master, app_name="rebalance-audit sql server", conf={
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
    })
    jvm = spark.sparkContext._jvm
    jvm.org.apache.spark.sql.connect.service.SparkConnectService.start(spark.sparkContext._jsc.sc())
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    used = _used_file(state)
    used.touch()
    tmp = state.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"pid": os.getpid(), "port": port, "token": token, "master": master}, f)
    os.replace(tmp, state)
    idle = float(os.environ.get(IDLE_ENV) or DEFAULT_IDLE_S)
    busy = _busy(spark)
    try:
        while not stopping:
            if busy():
                used.touch()  # a query is running: not idle, however long it takes
            with contextlib.suppress(OSError):
                if time.time() - used.stat().st_mtime > idle:
                    break
            time.sleep(1.0)
    finally:
        s = _read(state)
        if s is not None and s.pid == os.getpid():
            state.unlink(missing_ok=True)
        none = jvm.scala.Option.apply(None)
        jvm.org.apache.spark.sql.connect.service.SparkConnectService.stop(none, none)
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m rebalance_audit.sql_server")
    p.add_argument("--master", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--state", type=Path, required=True)
    a = p.parse_args(argv)
    serve(a.master, a.port, a.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
