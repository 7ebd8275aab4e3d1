"""`rebalance-audit run` SIGKILLed between two tables completes on the next run, with no row
lost or doubled.

The command is killed (with its Spark JVM: the whole process group) at two moments a real
crash can pick: in silver, the moment `member_assignments` has committed and before
`group_generations` has (positions of one table moved, of the other not); then, in a second
run, the moment gold's first table has committed and before what-if has started. A third run
goes to the end. Every table then holds what one uninterrupted run of the same command over
the same recording stores (the arrival stamps aside).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.lake import Lake
from pipelines.lake.compare import differing_tables, table_rows

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]


def _command(lake: Path, recording: Path) -> list[str]:
    return [sys.executable, "-m", "rebalance_audit.cli", "run", "--lake", str(lake), "--cluster", "crash",
            "--segments", str(recording / "offsets_segments"), "--logs", str(recording / "server.log"),
            "--skip-checks", "--spark-master", "local[2]"]


def _committed(lake: Path, table: str, version: int) -> bool:
    return (lake / table / "_delta_log" / f"{version:020d}.json").exists()


def _run_until(lake: Path, recording: Path, table: str, timeout: float = 1500) -> dict[str, int]:
    """Start the run; SIGKILL its process group the moment `table` has its first commit after
    its creation. Returns the versions of every table at that moment."""
    proc = subprocess.Popen(_command(lake, recording), cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while not _committed(lake, table, 1):
            assert proc.poll() is None, f"the run ended ({proc.returncode}) before {table} committed"
            assert time.monotonic() < deadline, f"{table} never committed"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    seen = Lake(lake)
    return {t: seen.version(t) for t in seen.tables()}


def test_a_run_killed_between_two_tables_completes_on_the_next(tmp_path, recordings_dir):
    recording = recordings_dir / "crash_autocommit"
    reference = tmp_path / "reference"
    done = subprocess.run(_command(reference, recording), cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]

    killed = tmp_path / "killed"
    at_first = _run_until(killed, recording, "member_assignments")
    # Between two silver tables: member_assignments has its rows, group_generations not yet
    # (silver writes it after), and nothing downstream exists.
    assert at_first["member_assignments"] == 1 and at_first.get("group_generations", 0) == 0, at_first
    assert "ownership_intervals" not in at_first or at_first["ownership_intervals"] == 0
    at_second = _run_until(killed, recording, "ownership_intervals")
    assert at_second.get("whatif_episodes", 0) == 0, at_second  # what-if comes after gold

    done = subprocess.run(_command(killed, recording), cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    want, got = Lake(reference), Lake(killed)
    assert not differing_tables(want, got)
    # not vacuous: the crash's window is there
    assert table_rows(want, "offset_commits") and table_rows(want, "duplicate_windows")
