"""The Dagster instance `run` opens when DAGSTER_HOME is set: several processes starting at
once on a new home (two `rebalance-audit run`s, a run and `dagster dev`) all open it."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.cli import REPO

OPEN = """
import sys, time
from assets.inprocess import dagster_instance
start = float(sys.argv[1])
time.sleep(max(0.0, start - time.time()))  # every process opens the instance at once
print(dagster_instance().get_runs_count(), flush=True)
"""
ROUNDS, PROCESSES = 3, 3


def test_processes_opening_a_new_dagster_home_at_once_all_open_it(tmp_path):
    # Without the lock, 3 processes on a new home failed in 3 of 5 rounds (alembic: "Version
    # table 'alembic_version' has more than one head present", or a table made twice).
    for r in range(ROUNDS):
        home = tmp_path / f"home-{r}"
        home.mkdir()
        env = {**os.environ, "DAGSTER_HOME": str(home)}
        start = time.time() + 8  # after every process's imports
        procs = [subprocess.Popen([sys.executable, "-c", OPEN, str(start)], cwd=REPO, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(PROCESSES)]
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0 and out.strip() == "0", err[-2000:]
