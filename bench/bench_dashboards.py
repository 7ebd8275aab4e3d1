"""Benchmark: the SRE report of a 1 000-group lake, opened in headless Chromium.

The 1 000 groups are the recordings' real groups (each recording its own cluster, as in
tests/recordings_lake.py, with gold and what-if computed) repeated under new group ids
with `dashboards.replicate.copy_groups`. Figures printed:

  groups, episodes                 size of the lake the report reads
  report_s                         `write_report` wall time (Spark: 3 queries, every page written)
  spark_jobs                       Spark jobs `write_report` ran (each query's shuffle stages count)
  driver_rows                      rows the queries brought to the driver (stats, page detail, rates)
  overview_load_s (median of N)    Chromium: navigation until the load event fired and every
                                   plotly figure of index.html had drawn
  group_load_s (median of N)       the same for the page of the most rebalanced group
  overview_kb, group_kb, plotly_js_kb   page sizes (plotly.js is written once)

    .venv/bin/python bench/bench_dashboards.py                # builds into bench/out/dashboards
    .venv/bin/python bench/bench_dashboards.py --groups 1000 --loads 5 --keep-lake

The source lake (recordings + gold) is kept in bench/out/dashboards/recordings-lake and
reused by later runs; delete it to rebuild.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "bench" / "out" / "dashboards"


def build_source(path: Path, spark):
    from pipelines.ingest.logs import ingest_logs
    from pipelines.ingest.segments import ingest_segments
    from pipelines.lake import Lake
    from tests.conftest import RECORDINGS
    from tests.recordings_lake import SCENARIOS, build_silver
    from tests.test_dashboards_report import _build_gold

    lake = Lake(path, spark=spark)
    if lake.exists("rebalance_episodes"):
        return lake
    for s in SCENARIOS:
        ingest_segments(lake, [str(RECORDINGS / s / "offsets_segments")], cluster=s)
        ingest_logs(lake, [str(RECORDINGS / s / "server.log")], cluster=s)
    build_silver(lake)
    _build_gold(lake)
    try:
        from pipelines.whatif.spark_job import update_whatif
    except ImportError:
        update_whatif = None
    if update_whatif is not None:
        update_whatif(lake)
    return lake


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=1000, help="at least this many groups (default 1000)")
    ap.add_argument("--episodes", type=int, default=0,
                    help="also repeat each group's history in time until the lake holds at least this many "
                         "rebalance episodes (e.g. 100000); default: groups only")
    ap.add_argument("--loads", type=int, default=5, help="page loads per figure (median printed)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--source", type=Path, default=None,
                    help="an existing lake with silver and gold to repeat (default: build one from the recordings)")
    args = ap.parse_args()

    from pyspark.sql import functions as F

    from dashboards.browser import Browser
    from dashboards.replicate import copy_groups
    from dashboards.report import write_report
    from dashboards.safe import page_name
    from pipelines.lake import Lake
    from pipelines.spark import get_spark

    spark = get_spark()
    args.out.mkdir(parents=True, exist_ok=True)
    src = Lake(args.source, spark=spark) if args.source else build_source(args.out / "recordings-lake", spark)
    src_groups = src.read("group_generations").select("cluster", "group_id").unionByName(
        src.read("offset_commits").select("cluster", "group_id")).distinct().count()
    copies = math.ceil(args.groups / src_groups)
    src_episodes = src.read("rebalance_episodes").count()
    time_copies = max(1, math.ceil(args.episodes / (src_episodes * copies))) if args.episodes else 1
    tag = f"x{copies}" + (f"-t{time_copies}" if time_copies > 1 else "")
    big = Lake(args.out / f"lake-{tag}", spark=spark)
    if not big.exists("rebalance_episodes"):
        copy_groups(src, big, copies=copies, time_copies=time_copies)
    episodes = big.read("rebalance_episodes").count()

    sc = spark.sparkContext
    sc.setJobGroup("bench-dashboards-report", "write_report")
    t0 = time.monotonic()
    report = write_report(big, args.out / f"report-{tag}", force=True)
    report_s = time.monotonic() - t0
    spark_jobs = len(sc.statusTracker().getJobIdsForGroup("bench-dashboards-report"))
    sc.setJobGroup("bench-dashboards-other", "bench")

    top = big.read("rebalance_episodes").where(~F.col("empty_transition")).groupBy("cluster", "group_id") \
        .agg(F.countDistinct("incarnation", "logical_rebalance_id").alias("n")).orderBy(F.desc("n"), "cluster", "group_id").first()
    group_page = report.out_dir / "groups" / page_name(top.cluster, top.group_id)
    overview, group = [], []
    with Browser() as b:
        for _ in range(args.loads):
            load = b.open(report.index)
            if load.problems:
                print(f"overview problems: {load.problems}", file=sys.stderr)
                return 1
            overview.append(load.load_seconds)
            group.append(b.open(group_page).load_seconds)
        b.open(report.index)
        b.screenshot(args.out / f"overview-{tag}.png")
        b.open(group_page)
        b.screenshot(args.out / f"group-{tag}.png")
    figures = {
        "groups": report.groups,
        "episodes": episodes,
        "overview_pages": report.overview_pages,
        "report_s": round(report_s, 1),
        "spark_jobs": spark_jobs,
        "driver_rows": report.driver_rows,
        "overview_load_s": round(statistics.median(overview), 3),
        "overview_load_s_max": round(max(overview), 3),
        "group_load_s": round(statistics.median(group), 3),
        "overview_kb": round(report.index.stat().st_size / 1024, 1),
        "group_kb": round(group_page.stat().st_size / 1024, 1),
        "plotly_js_kb": round((report.out_dir / "plotly.min.js").stat().st_size / 1024, 1),
        "screenshots": [str(args.out / f"overview-{tag}.png"), str(args.out / f"group-{tag}.png")],
    }
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
