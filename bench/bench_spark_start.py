"""Benchmark: how long a Spark driver of rebalance-audit takes to start, with and without the
class-data-sharing archive the set-up makes (pipelines/spark_cds.py).

Each trial is a fresh Python process (as `run`, `sql` or a test worker is): `get_spark`, then
one small Delta write and read (the first Delta operation of a JVM loads Delta's classes).
Trials alternate between the two ways so that a machine's drift falls on both. Prints the
median seconds of each part and the ratio.

    .venv/bin/python bench/bench_spark_start.py              # 5 trials each, small-lake profile
    .venv/bin/python bench/bench_spark_start.py --trials 3 --profile default
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRIAL = """
import json, sys, tempfile, time
t0 = time.time()
from pipelines.spark import get_spark
spark = get_spark("local[2]", app_name="bench-spark-start")
t1 = time.time()
with tempfile.TemporaryDirectory() as d:
    spark.range(10).write.format("delta").save(d + "/t")
    spark.read.format("delta").load(d + "/t").count()
t2 = time.time()
spark.stop()
print(json.dumps({"session": t1 - t0, "first_delta": t2 - t1, "total": t2 - t0}))
"""


def trial(cds: bool, profile: str) -> dict[str, float]:
    env = {**os.environ, "REBALANCE_AUDIT_SPARK_PROFILE": profile}
    if not cds:
        env["REBALANCE_AUDIT_NO_CDS"] = "1"
    done = subprocess.run([sys.executable, "-c", TRIAL], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--profile", default="small-lake", help="REBALANCE_AUDIT_SPARK_PROFILE (small-lake or default)")
    args = p.parse_args()
    sys.path.insert(0, str(REPO))
    from pipelines import spark_cds

    archive = spark_cds.build()
    print(f"archive: {archive}")
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for _ in range(args.trials):
        for cds in (False, True):
            runs[cds].append(trial(cds, args.profile))
    print(f"{'':>18} {'session s':>10} {'first Delta s':>14} {'total s':>9}")
    med = {}
    for cds in (False, True):
        med[cds] = {k: statistics.median(r[k] for r in runs[cds]) for k in ("session", "first_delta", "total")}
        m = med[cds]
        print(f"{'with archive' if cds else 'without archive':>18} {m['session']:>10.2f} {m['first_delta']:>14.2f} "
              f"{m['total']:>9.2f}")
    print(f"total with / without: {med[True]['total'] / med[False]['total']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
