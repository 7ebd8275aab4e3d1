"""Benchmark: a Dagster run of every asset against `rebalance-audit run`, on the same input,
the same machine, in one invocation.

  cli_s        `rebalance-audit run --segments D --logs D` into a fresh lake (wall time)
  dagster_s    `dagster job execute -m assets.definitions -j refresh_lake` into another fresh
               lake: the job the schedule and the sensor start, as the daemon launches a run
               (a process of its own, the definitions' executor), with the same sources
               given as `dagster dev` reads them (REBALANCE_AUDIT_LAKE, _SEGMENTS, _LOGS,
               _SPARK_MASTER)
  *_peak_mb    peak resident memory of the process tree (Python and Spark's JVM)
  jvms         how many java processes the run started (polled every 0.2 s): two per Spark start,
               `spark-class`'s launcher (it builds the command line) and the JVM

With `--compare-with REV` both are measured again with the code of REV, on the same data:
4e3f4af^ is the last revision whose Dagster runs started Spark in every step (one process
per step, the multiprocess executor). Figures go to `dagster` in bench/results.json.

    .venv/bin/python bench/bench_dagster.py --size small --compare-with 4e3f4af^
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_pipeline import COMMON, SIZES, Code, machine, run_cmd, timed_run  # noqa: E402
from simulator import SimConfig, simulate  # noqa: E402



class JavaCounter:
    """Counts the java processes started below this process while it is active (polled every
    0.2 s; a Spark JVM lives for seconds at least)."""

    def __init__(self):
        self.seen: set[int] = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._done.is_set():
            todo = [os.getpid()]
            while todo:
                p = todo.pop()
                try:
                    for t in os.listdir(f"/proc/{p}/task"):
                        with open(f"/proc/{p}/task/{t}/children") as f:
                            todo += [int(x) for x in f.read().split()]
                    with open(f"/proc/{p}/comm") as f:
                        if f.read().strip() == "java":
                            self.seen.add(p)
                except OSError:
                    continue
            self._done.wait(0.2)

    def __enter__(self) -> "JavaCounter":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def dagster_cmd(code: Code) -> list[str]:
    return [str(ROOT / ".venv" / "bin" / "dagster"), "job", "execute", "--working-directory", str(code.root),
            "-m", "assets.definitions", "-j", "refresh_lake"]


def dagster_env(code: Code, lake: Path, data: Path, home: Path) -> dict:
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    return {**(code.env() or os.environ), "DAGSTER_HOME": str(home), "REBALANCE_AUDIT_LAKE": str(lake),
            "REBALANCE_AUDIT_SEGMENTS": str(data), "REBALANCE_AUDIT_LOGS": str(data),
            "REBALANCE_AUDIT_SPARK_MASTER": "local[2]"}


def measure(code: Code, data: Path, work: Path) -> dict:
    out: dict = {}
    runs = work / code.label
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    for kind in ("cli", "dagster"):
        lake, log = runs / f"{kind}-lake", runs / f"{kind}.stderr"
        if kind == "cli":
            cmd, env = run_cmd(lake, data, code=code), code.env()
        else:
            cmd, env = dagster_cmd(code), dagster_env(code, lake, data, runs / "dagster-home")
        with JavaCounter() as jvms:
            wall, peak = timed_run(cmd, {}, log, env)
        out[f"{kind}_s"] = round(wall, 1)
        out[f"{kind}_peak_mb"] = round(peak / 2**20)
        out[f"{kind}_jvms"] = len(jvms.seen)
        print(f"[{code.label}] {kind}: {wall:.1f} s, peak {out[f'{kind}_peak_mb']} MB, "
              f"{out[f'{kind}_jvms']} java processes", file=sys.stderr, flush=True)
    out["dagster_over_cli"] = round(out["dagster_s"] / out["cli_s"], 2)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="small", choices=sorted(SIZES))
    ap.add_argument("--compare-with", metavar="REV", help="measure this revision's code too (e.g. 4e3f4af^)")
    ap.add_argument("--keep", metavar="DIR", help="work folder to keep (default: a temp folder, removed)")
    ap.add_argument("--results", default=str(ROOT / "bench" / "results.json"))
    a = ap.parse_args(argv)
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-dagster-"))
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    t0 = time.perf_counter()
    summary = simulate(SimConfig(out=str(data), **{**COMMON, **SIZES[a.size]}))
    print(f"simulated {summary['records']['commits']:,} commits in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    result = {"size": a.size, "commits": summary["records"]["commits"], "machine": machine(),
              "current": measure(Code(), data, work)}
    if a.compare_with:
        code = Code.export(a.compare_with, work)
        result["baseline"] = {"rev": a.compare_with, "commit": code.label, **measure(code, data, work)}
    path = Path(a.results)
    doc = json.loads(path.read_text()) if path.is_file() else {}
    doc["dagster"] = result
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
