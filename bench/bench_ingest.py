"""Benchmark: offline ingestion of segment files into bronze (`rebalance-audit ingest segments`).

The `bronze_ingest` step of a run: every record of the segment files read and inserted
into `offsets_records` (delta-rs, no JVM). Each measurement is the command in a process of
its own, into a fresh lake, with its peak memory (the process tree's RSS):

    .venv/bin/python bench/bench_ingest.py --keep /tmp/ra-bench --compare-with REV

The input is the simulated data of a bench_pipeline.py size (`--size`, default large, kept
under `--keep` as bench_pipeline.py keeps it: `bench_pipeline.py --sizes large --keep DIR`
makes it), or any segment folder (`--data`). With `--compare-with REV` the code of git
revision REV runs first, then this checkout's, one after the other, and the figures print
side by side. `--jobs` runs this checkout's command once per value given (`--jobs 1,2`).
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import Code, timed_run  # noqa: E402

READ = re.compile(r"segments: (\d+) read")


def ingest_cmd(code: Code, lake: Path, data: Path, jobs: int | None) -> list[str]:
    return code.cli("ingest", "segments", "--lake", str(lake), str(data), *(["--jobs", str(jobs)] if jobs else []))


def measure(code: Code, data: Path, work: Path, jobs: int | None) -> dict:
    lake = work / "lake"
    shutil.rmtree(lake, ignore_errors=True)
    log = work / "ingest.stderr"
    wall, peak = timed_run(ingest_cmd(code, lake, data, jobs), stderr_log=log, env=code.env())
    found = READ.search(log.with_suffix(".stdout").read_text())
    records = int(found.group(1)) if found else 0
    shutil.rmtree(lake, ignore_errors=True)
    return {"code": code.label, "jobs": jobs or "default", "records": records, "s": round(wall, 1),
            "records_per_s": round(records / wall), "peak_rss_mb": round(peak / 2**20)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="bench_pipeline.py's --keep folder (the size's simulated data)")
    ap.add_argument("--size", default="large", help="the size whose data to read (default large)")
    ap.add_argument("--data", type=Path, help="a segment folder to read instead")
    ap.add_argument("--compare-with", metavar="REV", help="measure git revision REV's code first")
    ap.add_argument("--jobs", default="", help="comma-separated --jobs values for this checkout (default: its default)")
    args = ap.parse_args()
    data = args.data or (args.keep / args.size / "data" if args.keep else None)
    if data is None or not data.is_dir():
        ap.error(f"no segment data at {data}: give --data, or --keep with bench_pipeline.py's data")
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        work = Path(tmp)
        rows = []
        if args.compare_with:
            rows.append(measure(Code.export(args.compare_with, work), data, work, None))
        for jobs in [int(j) for j in args.jobs.split(",") if j] or [None]:
            rows.append(measure(Code(), data, work, jobs))
            print(rows[-1], file=sys.stderr)
    print(f"\n{data}")
    print(f"{'code':>10} {'jobs':>8} {'records':>12} {'s':>8} {'records/s':>11} {'peak RSS, MB':>13}")
    for r in rows:
        print(f"{r['code']:>10} {r['jobs']!s:>8} {r['records']:>12,} {r['s']:>8} {r['records_per_s']:>11,} "
              f"{r['peak_rss_mb']:>13,}")


if __name__ == "__main__":
    main()
