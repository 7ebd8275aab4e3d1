"""`rebalance-audit sql`'s warm server, as a user's shell runs it: the first query starts a
Spark Connect server in the background, the next ones reuse it, strangers cannot use it,
and it goes away when told to or when idle.

Every command here runs as a subprocess with the user's defaults (the suite's
REBALANCE_AUDIT_SQL_SERVER=off removed). The server is keyed by Spark master: this module
uses `local[1]` so it never meets a server of the user's own (`local[*]`), and stops it.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.lake import Lake
from rebalance_audit import sql_server

REPO = Path(__file__).resolve().parents[1]
MASTER = "local[1]"
CLI = str(Path(sys.executable).parent / "rebalance-audit")  # the console script, as users run it
GROUPS = ["g-a", "g-b\u202e", "g-c"]


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != sql_server.SERVER_ENV}
    env.update(extra)
    return env


def _sql(lake: Path, query: str, *more: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, "sql", "--lake", str(lake),
                           "--spark-master", MASTER, "--format", "json", *more, query],
                          capture_output=True, text=True, env=env or _env(), timeout=600, cwd=REPO)


def _stop():
    subprocess.run([CLI, "sql", "--spark-master", MASTER, "--stop-server"],
                   capture_output=True, env=_env(), timeout=120, cwd=REPO)


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("sql-lake") / "lake"
    lk = Lake(root)
    data = pa.table({"cluster": ["c1"] * 3, "group_id": GROUPS, "rebalances": [3, 1, 0]})
    lk.create("group_summary", data.schema, partition_by=["cluster"])
    lk.append("group_summary", data)
    _stop()
    yield root
    _stop()


def _pids_of_servers() -> list[int]:
    out = subprocess.run(["pgrep", "-f", "rebalance_audit.sql_server --master local\\[1\\]"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def test_the_first_query_starts_a_server_the_next_ones_reuse(lake):
    query = "SELECT group_id, rebalances FROM group_summary ORDER BY group_id"
    first = _sql(lake, query)
    assert first.returncode == 0, first.stderr[-3000:]
    rows = [json.loads(line) for line in first.stdout.splitlines()]
    assert rows == [{"group_id": g, "rebalances": n} for g, n in zip(GROUPS, [3, 1, 0])]
    state = sql_server._state_file(MASTER)
    server = sql_server._read(state)
    assert server is not None and _pids_of_servers() == [server.pid]
    for _ in range(2):
        again = _sql(lake, query)
        assert again.returncode == 0 and again.stdout == first.stdout, again.stderr[-3000:]
    # The same server answered: no second one, and its state is unchanged.
    assert sql_server._read(state) == server and _pids_of_servers() == [server.pid]
    # The same answer as a Spark of the command's own process.
    local = _sql(lake, query, "--local")
    assert local.returncode == 0 and local.stdout == first.stdout, local.stderr[-3000:]
    # A mistyped column is one line, over the server too.
    bad = _sql(lake, "SELECT no_such_column FROM group_summary")
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) <= 2, bad.stderr[-3000:]
    assert "no_such_column" in bad.stderr


def test_only_its_owner_can_use_the_server(lake):
    assert _sql(lake, "SELECT 1 AS one").returncode == 0
    server = sql_server._read(sql_server._state_file(MASTER))
    assert server is not None
    # The token is in a file only its owner reads, never on a command line `ps` shows.
    assert stat.S_IMODE(sql_server._state_file(MASTER).stat().st_mode) == 0o600
    procs = [server.pid] + [int(p) for p in subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True,
                                                           text=True).stdout.split()]
    for pid in procs:
        assert server.token not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    # It listens on the loopback only, and a client without the token is refused.
    probe = ("import os, sys; from pyspark.sql import SparkSession; os.environ['SPARK_CONNECT_AUTHENTICATE_TOKEN'] = 'wrong';"
             f"s = SparkSession.builder.remote('sc://localhost:{server.port}').getOrCreate(); s.sql('SELECT 1').collect()")
    refused = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=_env())
    assert refused.returncode != 0 and "UNAUTHENTICATED" in refused.stderr.upper(), refused.stderr[-2000:]
    listening = Path("/proc/net/tcp").read_text() + Path("/proc/net/tcp6").read_text()
    port_hex = f":{server.port:04X} "
    local_addresses = [line.split()[1] for line in listening.splitlines()[1:] if port_hex in line.split()[1] + " "
                       and line.split()[3] == "0A"]  # LISTEN
    loopback = ("0100007F:", "00000000000000000000000001000000:", "0000000000000000FFFF00000100007F:")  # 127.0.0.1, ::1, ::ffff:127.0.0.1
    assert local_addresses and all(a.startswith(loopback) for a in local_addresses), local_addresses


def test_the_server_stops_when_told_and_when_idle(lake):
    assert _sql(lake, "SELECT 1 AS one").returncode == 0
    pid = sql_server._read(sql_server._state_file(MASTER)).pid
    stopped = subprocess.run([CLI, "sql", "--spark-master", MASTER, "--stop-server"],
                             capture_output=True, text=True, env=_env(), timeout=120, cwd=REPO)
    assert stopped.returncode == 0 and "stopped" in stopped.stderr
    assert not Path(f"/proc/{pid}").exists() and not sql_server._state_file(MASTER).exists()
    # Idle: a server started with a 20 s idle time is gone soon after its last query (20 s:
    # under a loaded CI machine a shorter one ran out between the server's start and the
    # first query's views, which are read on the client).
    assert _sql(lake, "SELECT 1 AS one", env=_env(**{sql_server.IDLE_ENV: "20"})).returncode == 0
    pid = sql_server._read(sql_server._state_file(MASTER)).pid
    deadline = time.monotonic() + 180
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(1)
    assert not Path(f"/proc/{pid}").exists() and not sql_server._state_file(MASTER).exists()
