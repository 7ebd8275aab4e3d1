"""Bad invocations: one clear line on stderr, exit 1, nothing half-written.

Each command runs as a user runs it (its own process), on real small lakes: a bronze-only lake
made by `ingest logs` from a recording's server.log (delta-rs, no Spark). The read-only and
full file systems are real mounts (a read-only bind mount, a 1 MB tmpfs); where this process
may not mount (not root, no CAP_SYS_ADMIN) those tests are skipped and say so.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.conftest import RECORDINGS
from tests.cli import CLI

REPO = Path(__file__).resolve().parents[1]
LOG = RECORDINGS / "poll_timeout" / "server.log"
MORE = RECORDINGS / "storm_flapping" / "server.log"

pytestmark = pytest.mark.skipif(not LOG.is_file(), reason="shared recordings not found")


def cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def one_error_line(done: subprocess.CompletedProcess, command: str) -> str:
    """The run failed with exit 1 and exactly one line on stderr, from the command."""
    lines = done.stderr.splitlines()
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"rebalance-audit {command}: error: "), lines[0]
    assert lines[0].removeprefix(f"rebalance-audit {command}: error: ").strip(), "an empty message"
    return lines[0]


def snapshot(lake: Path) -> dict:
    """Every table's version and rows: what must not change when a command fails."""
    out = {}
    for child in sorted(lake.iterdir()):
        if (child / "_delta_log").is_dir():
            t = DeltaTable(str(child))
            out[child.name] = (t.version(), t.to_pyarrow_table().num_rows)
    return out


@pytest.fixture(scope="module")
def bronze_lake(tmp_path_factory) -> Path:
    """A lake with bronze tables only (no Spark ran, so no silver or gold)."""
    lake = tmp_path_factory.mktemp("bronze") / "lake"
    done = cli("ingest", "logs", str(LOG), "--lake", str(lake), "--cluster", "c1")
    assert done.returncode == 0, done.stderr
    return lake


def test_report_on_a_lake_without_gold_says_so_and_writes_nothing(bronze_lake, tmp_path):
    out = tmp_path / "report"
    line = one_error_line(cli("report", "--lake", str(bronze_lake), "--out", str(out)), "report")
    assert "no gold tables" in line and "rebalance-audit run" in line
    assert not out.exists()


def test_report_and_sql_on_a_folder_that_is_not_a_lake(tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "cat.jpg").write_bytes(b"\xff\xd8\xff")
    out = tmp_path / "report"
    line = one_error_line(cli("report", "--lake", str(folder), "--out", str(out)), "report")
    assert "is not a lake" in line
    assert not out.exists() and sorted(p.name for p in folder.iterdir()) == ["cat.jpg"]
    assert "is not a lake" in one_error_line(cli("sql", "SELECT 1", "--lake", str(folder)), "sql")


@pytest.mark.parametrize("command", [["ingest", "logs", str(LOG)], ["report"], ["sql", "SELECT 1"]],
                         ids=["ingest", "report", "sql"])
def test_a_lake_path_that_is_a_file(tmp_path, command):
    path = tmp_path / "lake"
    path.write_text("not a lake\n")
    line = one_error_line(cli(*command, "--lake", str(path)), command[0])
    assert f"--lake {path} is a file" in line
    assert path.read_text() == "not a lake\n"


def test_debug_after_the_command_gives_the_traceback_as_before_it(tmp_path):
    path = tmp_path / "lake"
    path.write_text("not a lake\n")
    for argv in (["--debug", "sql", "SELECT 1", "--lake", str(path)], ["sql", "--debug", "SELECT 1", "--lake", str(path)]):
        done = cli(*argv)
        assert done.returncode == 1 and "Traceback (most recent call last)" in done.stderr, (argv, done.stderr)
    assert path.read_text() == "not a lake\n"


def test_version_names_the_engines_that_decide_the_results():
    from importlib import metadata

    done = cli("--version")
    assert done.returncode == 0 and done.stderr == "" and len(done.stdout.splitlines()) == 1, done
    for dist in ("rebalance-audit", "pyspark", "delta-spark", "deltalake", "confluent-kafka", "dagster"):
        assert f"{dist} {metadata.version(dist)}" in done.stdout


def test_an_unreachable_spark_master_is_named_in_one_line_without_java(bronze_lake):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master = f"spark://127.0.0.1:{port}"
    started = time.monotonic()
    done = cli("sql", "SELECT count(*) FROM coordinator_log_lines", "--lake", str(bronze_lake),
               "--spark-master", master)
    line = one_error_line(done, "sql")
    assert f"Spark master {master} is not reachable" in line and "refused" in line
    assert "java" not in done.stderr.lower()
    assert time.monotonic() - started < 60   # Spark itself retried for a minute first


# --- real read-only and full file systems ------------------------------------------------------

def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip() or done.returncode}): needs root or CAP_SYS_ADMIN")


def _umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], capture_output=True)


@pytest.fixture
def read_only_lake(bronze_lake, tmp_path):
    lake = tmp_path / "lake"
    shutil.copytree(bronze_lake, lake)
    _mount("--bind", str(lake), str(lake))
    try:
        _mount("-o", "remount,bind,ro", str(lake))
        yield lake
    finally:
        _umount(lake)


def test_a_read_only_lake_is_refused_before_any_write(read_only_lake):
    before = snapshot(read_only_lake)
    line = one_error_line(cli("ingest", "logs", str(MORE), "--lake", str(read_only_lake), "--cluster", "c1"), "ingest")
    assert "read-only file system" in line and str(read_only_lake) in line
    assert snapshot(read_only_lake) == before


@pytest.fixture
def tiny_disk(bronze_lake, tmp_path):
    """A 1 MB tmpfs holding a copy of the lake and a file that fills all but a few KB."""
    disk = tmp_path / f"disk-{uuid.uuid4().hex[:8]}"
    disk.mkdir()
    _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk))
    try:
        shutil.copytree(bronze_lake, disk / "lake")
        st = os.statvfs(disk)
        (disk / "filler").write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - 8192))
        yield disk
    finally:
        _umount(disk)


def test_a_full_disk_is_refused_before_any_write(tiny_disk):
    lake = tiny_disk / "lake"
    before = snapshot(lake)
    line = one_error_line(cli("ingest", "logs", str(MORE), "--lake", str(lake), "--cluster", "c1"), "ingest")
    assert "free on its file system" in line and "REBALANCE_AUDIT_MIN_FREE_MB" in line
    assert snapshot(lake) == before


def test_a_disk_that_fills_during_the_write_keeps_every_table_as_it_was(tiny_disk):
    """Past the free-space check (set to 0 here), the write itself runs out of space: exit 1,
    one line naming the cause, and no table moves (Delta commits are atomic). delta-rs's
    worker thread panics on its way out; that goes with the error, shown by --debug, not
    ahead of the line."""
    lake = tiny_disk / "lake"
    before = snapshot(lake)
    args = ("ingest", "logs", str(MORE), "--lake", str(lake), "--cluster", "c1")
    done = cli(*args, env={"REBALANCE_AUDIT_MIN_FREE_MB": "0"})
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("rebalance-audit ingest: error: no space left on the device") and str(lake) in line
    assert snapshot(lake) == before
    debug = cli("--debug", *args, env={"REBALANCE_AUDIT_MIN_FREE_MB": "0"})
    assert debug.returncode == 1 and "Traceback" in debug.stderr
    assert "No space left on device" in debug.stderr
    assert "delta-rs printed while this write failed" in debug.stderr and "panicked" in debug.stderr
    assert snapshot(lake) == before
