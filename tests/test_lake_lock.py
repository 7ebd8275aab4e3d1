"""One writer per lake: the writer lock, and several real commands started at once on one lake."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from pipelines.lake import Lake
from pipelines.lake.lock import LakeLockTimeout
from tests.cli import CLI, REPO
from tests.conftest import RECORDINGS

SCENARIO = RECORDINGS / "poll_timeout"

HOLDER = """
import sys, time
from pipelines.lake import Lake
with Lake(sys.argv[1]).writer_lock():
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(root: Path, seconds: float) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), str(seconds)], cwd=REPO,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_second_writer_waits_for_the_first_and_names_it(tmp_path):
    holder = _holder(tmp_path, 2.0)
    said: list[str] = []
    t = time.monotonic()
    with Lake(tmp_path).writer_lock(say=said.append):
        waited = time.monotonic() - t
    holder.wait(timeout=30)
    assert waited >= 1.0, waited
    assert len(said) == 1 and f"pid {holder.pid} " in said[0], said


def test_a_writer_that_waits_too_long_fails_clearly(tmp_path):
    holder = _holder(tmp_path, 30.0)
    try:
        with pytest.raises(LakeLockTimeout, match=rf"being written by pid {holder.pid} .*gave up after 1 s"):
            with Lake(tmp_path).writer_lock(timeout=1.0, say=lambda _: None):
                pass
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_writer_leaves_the_lake_unlocked(tmp_path):
    holder = _holder(tmp_path, 60.0)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with Lake(tmp_path).writer_lock(timeout=5.0):
        pass


def test_the_lock_is_reentrant_within_a_process(tmp_path):
    lake = Lake(tmp_path)
    with lake.writer_lock(timeout=1.0):
        with lake.writer_lock(timeout=1.0):
            pass
        # Still held by this process after the inner block: another process cannot take it.
        probe = subprocess.run([sys.executable, "-c", "import sys; from pipelines.lake import Lake\n"
                                "with Lake(sys.argv[1]).writer_lock(timeout=0.5, say=lambda _: None): pass",
                                str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert probe.returncode != 0 and "LakeLockTimeout" in probe.stderr
    with lake.writer_lock(timeout=1.0):
        pass


@pytest.mark.spark
@pytest.mark.skipif(not SCENARIO.is_dir(), reason="recordings not found")
def test_two_runs_and_two_ingestions_at_once_write_every_row_once(tmp_path):
    """What a sensor's run, a scheduled run and two hand-started ingestions do when they
    overlap on one lake: each waits for the one writing, every command succeeds, every
    table opens, and every key is stored once."""
    lake_dir = tmp_path / "lake"
    segments, log = SCENARIO / "offsets_segments", SCENARIO / "server.log"
    common = ["--lake", str(lake_dir), "--cluster", "c"]
    # The runs skip the quality checks (what they find on this recording is test_assets_run_cli's).
    commands = [
        ["run", *common, "--segments", str(segments), "--logs", str(log), "--skip-checks"],
        ["ingest", "segments", *common, str(segments)],
        ["ingest", "logs", *common, str(log)],
        ["run", *common, "--segments", str(segments), "--logs", str(log), "--skip-checks"],
    ]
    procs = [subprocess.Popen([*CLI, *c], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in commands]
    outcomes = [p.communicate(timeout=1500) for p in procs]
    for p, (out, err), c in zip(procs, outcomes, commands):
        assert p.returncode == 0, (c, err[-3000:])
    # They did overlap: at least one waited for another.
    assert any("waiting for the lake: it is being written by pid" in err for _, err in outcomes)

    lake = Lake(lake_dir)
    for name in lake.tables():
        lake.read_arrow(name)  # every table opens
    keys = {"offsets_records": ["cluster", "partition", "offset"],
            "coordinator_log_lines": ["cluster", "broker", "line_key"]}
    for name, key in keys.items():
        rows = lake.read_arrow(name, columns=key).to_pylist()
        twice = [k for k, n in Counter(tuple(r[c] for c in key) for r in rows).items() if n > 1]
        assert rows and not twice, (name, twice[:5])
    # Every key is there too: the same as one ingestion alone into a lake of its own.
    alone = tmp_path / "alone"
    done = subprocess.run([*CLI, "ingest", "segments", "--lake", str(alone), "--cluster", "c", str(segments)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    key = keys["offsets_records"]
    assert sorted(map(str, lake.read_arrow("offsets_records", columns=key).to_pylist())) == \
        sorted(map(str, Lake(alone).read_arrow("offsets_records", columns=key).to_pylist()))


@pytest.mark.spark
@pytest.mark.skipif(not SCENARIO.is_dir(), reason="recordings not found")
def test_two_dagster_runs_in_two_processes_take_turns(tmp_path):
    """What the Dagster daemon does when a scheduled run and a sensor's run overlap: each
    run executes in a process of its own, and the lake resource holds the writer lock for
    the run. Two such processes started at once on one lake: the later one waits, naming
    the other, both succeed, and every bronze and silver key is stored once."""
    lake_dir = tmp_path / "lake"
    env = {**os.environ, "REBALANCE_AUDIT_LAKE": str(lake_dir), "REBALANCE_AUDIT_CLUSTER": "c",
           "REBALANCE_AUDIT_SEGMENTS": str(SCENARIO / "offsets_segments"),
           "REBALANCE_AUDIT_LOGS": str(SCENARIO / "server.log"),
           "DAGSTER_HOME": str(tmp_path / "dagster-home")}
    # The instance exists before its runs, as the daemon's does (two processes creating its
    # storage at once would race on the schema, which is Dagster's to set up, not theirs).
    (tmp_path / "dagster-home").mkdir()
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster-home")
    subprocess.run([sys.executable, "-m", "dagster", "instance", "migrate"], cwd=REPO, env=env, check=True,
                   capture_output=True, timeout=300)
    from assets.bronze import bronze_ingest
    from assets.silver import events_silver, offsets_silver

    # Bronze and silver (each step whole: they are not subsettable), with their checks.
    selection = ",".join(k.to_user_string() for a in (bronze_ingest, offsets_silver, events_silver) for k in a.keys)
    command = [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "assets.definitions",
               "--select", selection]
    procs = [subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outcomes = [p.communicate(timeout=1200) for p in procs]
    for p, (_, err) in zip(procs, outcomes):
        assert p.returncode == 0, err[-3000:]
    waited = [i for i, (out, err) in enumerate(outcomes) if "waiting for the lake: it is being written by pid" in out + err]
    assert len(waited) == 1, [err[-2000:] for _, err in outcomes]
    other = procs[1 - waited[0]].pid
    assert f"being written by pid {other} " in "".join(outcomes[waited[0]])

    lake = Lake(lake_dir)
    keys = {"offsets_records": ["cluster", "partition", "offset"],
            "coordinator_log_lines": ["cluster", "broker", "line_key"],
            # A silver row per record: its bronze key.
            "offset_commits": ["cluster", "coordinator_partition", "log_offset"],
            "group_generations": ["cluster", "coordinator_partition", "log_offset"]}
    for name, key in keys.items():
        rows = lake.read_arrow(name, columns=key).to_pylist()
        twice = [k for k, n in Counter(tuple(r[c] for c in key) for r in rows).items() if n > 1]
        assert rows and not twice, (name, twice[:5])
