"""Benchmark: how long `rebalance-audit sql` takes to answer, as a user's shell runs it.

Each call is the command line in a fresh process (Python start, imports, the query, the
output), timed from outside, on one lake:

  local_s (median of N)   `sql --local`: a Spark started in the command's own process (how
                          every call ran before the warm server)
  first_s                 the first call with the server: it starts the Spark Connect server
  warm_s (10th call)      the tenth call on the running server; also min/median of calls 2-10

The query is the report's headline question (`SELECT * FROM group_summary ORDER BY
rebalances DESC`), so the figure is what an SRE waits for. The server runs on its own Spark
master key (`local[*]` with the given --master) and is stopped before and after.

    .venv/bin/python bench/bench_sql.py --lake demo/lake
    .venv/bin/python bench/bench_sql.py                 # builds a lake from one recording into bench/out/sql
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "sql"
RECORDING = ROOT.parent / "shared" / "recordings" / "crash_autocommit"
QUERY = "SELECT * FROM group_summary ORDER BY rebalances DESC"


def _cli(*args: str, env: dict | None = None) -> float:
    t = time.perf_counter()
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "rebalance-audit"), *args], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    took = time.perf_counter() - t
    if done.returncode != 0:
        sys.exit(f"bench_sql: {' '.join(args[:2])} failed: {done.stderr.strip()[-500:]}")
    return took


def _lake(given: str | None) -> str:
    if given:
        return given
    lake = OUT / "lake"
    if not (lake / "group_summary").is_dir():
        print(f"building {lake} from {RECORDING.name} (rebalance-audit run)", flush=True)
        _cli("run", "--lake", str(lake), "--segments", str(RECORDING / "offsets_segments"),
             "--logs", str(RECORDING / "server.log"))
    return str(lake)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lake", help="the lake to query (default: one recording's, built once)")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--local-runs", type=int, default=3, help="in-process calls to time (default 3)")
    a = p.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "REBALANCE_AUDIT_SQL_SERVER"}
    lake = _lake(a.lake)
    query = ["sql", "--lake", lake, "--spark-master", a.master, "--format", "csv", QUERY]
    _cli("sql", "--spark-master", a.master, "--stop-server", env=env)
    try:
        local = [_cli(*query, "--local", env=env) for _ in range(a.local_runs)]
        first = _cli(*query, env=env)
        warm = [_cli(*query, env=env) for _ in range(9)]
    finally:
        _cli("sql", "--spark-master", a.master, "--stop-server", env=env)
    print(f"lake {lake}, master {a.master}, cores {os.cpu_count()}")
    print(f"local_s      {statistics.median(local):7.2f}  (median of {len(local)}: {', '.join(f'{x:.2f}' for x in local)})")
    print(f"first_s      {first:7.2f}  (starts the server)")
    print(f"warm_s       {warm[-1]:7.2f}  (10th call; calls 2-10: min {min(warm):.2f}, median {statistics.median(warm):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
