"""Benchmark: one step of the pipeline alone on a kept lake: a full gold rebuild
(`update_gold(full=True)`, every table; the default), or silver's offset tables from the
whole of bronze (`--step offsets-silver`: `update_offsets_silver` on the lake's bronze
tables alone).

Gold is the pipeline's longest step at every size, offsets silver the next. This runs one
alone, on a fresh copy of a lake that a `run` built (a lake `bench_pipeline.py --keep DIR`
left, or any other; gold needs silver, offsets silver only bronze), in a fresh process per
trial, and prints the seconds, the Spark jobs and stages it took. With `--compare-with REV`
each trial also runs the code of git revision REV (exported as bench_pipeline.py does),
alternating, so that a machine's drift falls on both.

    .venv/bin/python bench/bench_gold.py --lake /tmp/ra-bench/large/lake-full
    .venv/bin/python bench/bench_gold.py --lake /tmp/ra-bench/large/lake-full --compare-with 736caa8
    .venv/bin/python bench/bench_gold.py --step offsets-silver --lake /tmp/ra-bench/large/lake-full
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
spark = get_spark("local[2]", app_name="bench-" + sys.argv[2])
from pipelines.lake import Lake
lake = Lake(sys.argv[1], spark=spark)
t0 = time.time()
if sys.argv[2] == "gold":
    from pipelines.gold import runner
    run = runner.update_gold(lake, full=True)
else:
    from pipelines.silver import runner
    run = runner.update_offsets_silver(lake)
seconds = time.time() - t0
tracker = spark.sparkContext.statusTracker()
jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(None)]
print(json.dumps({"seconds": seconds, "jobs": len(jobs), "stages": sum(len(j.stageIds) for j in jobs if j),
                  "rows": run.rows_written}))
"""


STEPS = ("gold", "offsets-silver")


def _copy(lake: Path, copy: Path, step: str) -> None:
    """The lake as the step finds it in a run: whole for gold, its bronze tables alone for
    offsets silver (which then decodes and writes everything)."""
    shutil.rmtree(copy, ignore_errors=True)
    if step == "gold":
        shutil.copytree(lake, copy, ignore=shutil.ignore_patterns("_writer.lock"))
        return
    from pipelines.ingest.schemas import BRONZE_TABLES

    copy.mkdir(parents=True)
    for table in BRONZE_TABLES:
        if (lake / table.name).is_dir():
            shutil.copytree(lake / table.name, copy / table.name)


def trial(code: Code, lake: Path, work: Path, step: str = "gold") -> dict:
    copy = work / "lake"
    _copy(lake, copy, step)
    try:
        done = subprocess.run(code.python("-c", TRIAL, str(copy), step), cwd=code.root, env=code.env(),
                              capture_output=True, text=True, check=True)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lake", required=True, type=Path, help="a lake a run built (it is copied, never written)")
    p.add_argument("--step", choices=STEPS, default="gold")
    p.add_argument("--trials", type=int, default=1)
    p.add_argument("--compare-with", metavar="REV", help="also run git revision REV's code, alternating")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gold-") as tmp:
        work = Path(tmp)
        codes = [Code()] + ([Code.export(args.compare_with, work)] if args.compare_with else [])
        runs: dict[str, list[dict]] = {c.label: [] for c in codes}
        for _ in range(args.trials):
            for code in codes:
                r = trial(code, args.lake, work, args.step)
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
