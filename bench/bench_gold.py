"""Benchmark: a full gold rebuild (`update_gold(full=True)`, every table) on a kept lake.

Gold is the pipeline's longest step at every size. This runs it alone, on a fresh copy of a
lake that already holds silver (a lake `bench_pipeline.py --keep DIR` left, or any lake a
`run` built), in a fresh process per trial, and prints the seconds, the Spark jobs and
stages it took. With `--compare-with REV` each trial also runs the code of git revision REV
(exported as bench_pipeline.py does), alternating, so that a machine's drift falls on both.

    .venv/bin/python bench/bench_gold.py --lake /tmp/ra-bench/large/lake-full
    .venv/bin/python bench/bench_gold.py --lake /tmp/ra-bench/large/lake-full --compare-with 736caa8
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_pipeline import Code

TRIAL = """
import json, sys, time
from pipelines.spark import get_spark
spark = get_spark("local[2]", app_name="bench-gold")
from pipelines.gold import runner
from pipelines.lake import Lake
lake = Lake(sys.argv[1], spark=spark)
t0 = time.time()
run = runner.update_gold(lake, full=True)
seconds = time.time() - t0
tracker = spark.sparkContext.statusTracker()
jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(None)]
print(json.dumps({"seconds": seconds, "jobs": len(jobs), "stages": sum(len(j.stageIds) for j in jobs if j),
                  "rows": run.rows_written}))
"""


def trial(code: Code, lake: Path, work: Path) -> dict:
    copy = work / "lake"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(lake, copy, ignore=shutil.ignore_patterns("_writer.lock"))
    try:
        done = subprocess.run(code.python("-c", TRIAL, str(copy)), cwd=code.root, env=code.env(),
                              capture_output=True, text=True, check=True)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lake", required=True, type=Path, help="a lake holding silver (it is copied, never written)")
    p.add_argument("--trials", type=int, default=1)
    p.add_argument("--compare-with", metavar="REV", help="also run git revision REV's gold, alternating")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gold-") as tmp:
        work = Path(tmp)
        codes = [Code()] + ([Code.export(args.compare_with, work)] if args.compare_with else [])
        runs: dict[str, list[dict]] = {c.label: [] for c in codes}
        for _ in range(args.trials):
            for code in codes:
                r = trial(code, args.lake, work)
                runs[code.label].append(r)
                print(f"{code.label}: {r['seconds']:.1f} s, {r['jobs']} jobs, {r['stages']} stages", flush=True)
    for label, rs in runs.items():
        print(f"{label}: median {statistics.median(r['seconds'] for r in rs):.1f} s over {len(rs)} trial(s); "
              f"rows {json.dumps(rs[-1]['rows'], sort_keys=True)}")
    if len(runs) == 2:
        (a, ra), (b, rb) = runs.items()
        ratio = statistics.median(r["seconds"] for r in rb) / statistics.median(r["seconds"] for r in ra)
        print(f"{b} / {a}: {ratio:.2f}x the time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
