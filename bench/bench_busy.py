"""Benchmark: what a busy cluster costs (issue 18: measured, no target yet).

A lake that already holds about 50 M offset commits, then a 15-minute increment of about
1 M commits, on 2 cores, and where that increment's time goes (the run's `--timings`).

The lake is built by the pipeline itself, not copied: the large size's simulated cluster
(bench_pipeline.py, ~11.8 M commits) is run in, then run in again under other cluster
names (`busy-2`, `busy-3`, ...) until the lake holds `--target-commits`. Each of those runs
is timed too: how the cost of adding a large cluster grows with the lake.

The increment continues the first cluster (`default`) rather than starting a new one, as a
busy cluster's next 15 minutes would: its segments are simulated with offsets following the
log already in the lake (`SimConfig.start_offsets`) and a clock after it, so the run adds to
partitions and tables that already hold that cluster's commits. Its groups are new (`busy-group-*`):
the simulator cannot resume a group's generations, and groups restarting at generation 1
would read as recreated groups. The increment figure is measured as bench_pipeline.py's
+1 %: the run minus a run with nothing new (process, imports, Dagster, Great Expectations)
minus the run's own Spark start-up.

    REBALANCE_AUDIT_SPARK_DRIVER_MEMORY=4g .venv/bin/python bench/bench_busy.py --keep /tmp/ra-bench

`--keep` is the folder bench_pipeline.py keeps: its `large/data` and `large/lake-full` (the
lake right after the full run) are needed, and `bench_pipeline.py --sizes large --keep DIR`
makes them. The grown lake is kept as `busy/lake-grown`, so `--increment-only` measures the
increment again. `--size small` runs the same steps in minutes (to try the benchmark).
`--compare-with REV` measures the same increment on the same lake (restored before each
run) with the code of git revision REV first, then with this checkout's, steps side by side;
`--target-commits 1` measures on the large lake alone (no growth).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import COMMON, ROOT, SIZES, Code, jvm_start_s, run_cmd, timed_run  # noqa: E402
from simulator import SimConfig, simulate  # noqa: E402

FIRST_CLUSTER = "default"  # the cluster a `run` without --cluster writes


def _files(lake: Path) -> dict:
    """The `offset_commits` table's files: the Delta log's add actions with their statistics."""
    return pa.table(DeltaTable(str(lake / "offset_commits")).get_add_actions(flatten=True)).to_pydict()


def lake_commits(lake: Path) -> int:
    """Offset commits in the lake, from the files' statistics (no data read)."""
    return sum(_files(lake)["num_records"])


def clusters(lake: Path) -> list[str]:
    return sorted(set(_files(lake)["partition.cluster"]))


def next_offsets(lake: Path, cluster: str) -> dict[int, int]:
    """Per __consumer_offsets partition, the offset after the last batch the lake holds."""
    table = DeltaTable(str(lake / "offsets_records")).to_pyarrow_dataset().to_table(
        columns=["partition", "last_offset"], filter=pc.field("cluster") == cluster)
    last = table.group_by("partition").aggregate([("last_offset", "max")]).to_pydict()
    return {p: o + 1 for p, o in zip(last["partition"], last["last_offset_max"])}


def step_seconds(stderr: str) -> dict[str, float]:
    """The `--timings` table at the end of a run's stderr: step -> seconds."""
    steps: dict[str, float] = {}
    for line in stderr.split("step seconds:", 1)[-1].splitlines():
        m = re.match(r"\s+([\d.]+)\s+(asset|check|start)\s+(\S+)", line)
        if m:
            steps[f"{m.group(2)} {m.group(3)}"] = float(m.group(1))
    return steps


def grow(lake: Path, data: Path, work: Path, target: int, res: dict, save) -> None:
    """Run the large cluster in again under new names until the lake holds `target` commits."""
    res.setdefault("growth", [])
    while (held := lake_commits(lake)) < target:
        name = f"busy-{len(clusters(lake)) + 1}"
        print(f"[busy] lake holds {held:,} commits: adding {data} as cluster {name}", file=sys.stderr)
        seen: dict = {}
        wall, peak = timed_run(run_cmd(lake, data) + ["--cluster", name], seen, work / f"run-{name}.stderr")
        res["growth"].append({"cluster": name, "lake_commits_before": held, "run_s": round(wall, 1),
                              "peak_rss_mb": round(peak / 2**20), "checks": seen.get("checks")})
        print(f"[busy] {name}: {wall:.1f}s, peak RSS {peak / 2**20:,.0f} MB", file=sys.stderr)
        save()


def simulate_increment(lake: Path, work: Path, params: dict, commits: int, res: dict, save) -> Path:
    """The 15 minutes' segments, continuing the first cluster's log in `lake` (made once)."""
    folder = work / "increment"
    if not folder.is_dir():
        # Commits per group and minute at the size's settings: `commits` in 15 minutes.
        per_group_minute = res["cluster_commits"] / (params["groups"] * params["minutes"])
        groups = max(1, round(commits / (per_group_minute * 15)))
        t0 = time.perf_counter()
        summary = simulate(SimConfig(
            out=str(folder), **{**params, "groups": groups, "minutes": 15, "seed": params["seed"] + 2,
                                "group_prefix": "busy-group",
                                "start_ms": SimConfig.start_ms + int(params["minutes"] * 60_000) + 60_000,
                                "start_offsets": next_offsets(lake, FIRST_CLUSTER)}))
        res["increment_sim"] = {"groups": groups, "commits": summary["records"]["commits"],
                                "records": summary["records"]["records"],
                                "simulate_s": round(time.perf_counter() - t0, 1)}
        save()
    return folder


def measure_increment(lake: Path, folder: Path, work: Path, code: Code) -> dict:
    """The increment's run with `code`, net of a run with nothing new and of its JVM start."""
    env = code.env()
    fixed, _ = timed_run(run_cmd(lake, code=code), None, work / f"run-fixed-{code.label}.stderr", env=env)
    seen: dict = {}
    stderr_log = work / f"run-increment-{code.label}.stderr"
    inc, peak = timed_run(run_cmd(lake, folder, code=code) + ["--cluster", FIRST_CLUSTER], seen, stderr_log, env=env)
    jvm_s = jvm_start_s(seen)
    return {"startup_s": round(fixed, 1), "increment_jvm_start_s": round(jvm_s, 1),
            "increment_run_s": round(inc, 1), "increment_s": round(max(0.0, inc - fixed - jvm_s), 1),
            "increment_peak_rss_mb": round(peak / 2**20), "increment_checks": seen.get("checks"),
            "increment_steps": step_seconds(stderr_log.read_text())}


def restore(grown: Path, lake: Path, report_grown: Path, report: Path) -> None:
    """The lake and report as they were grown: every measured increment starts from them."""
    for kept, live in ((grown, lake), (report_grown, report)):
        shutil.rmtree(live, ignore_errors=True)
        shutil.copytree(kept, live)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", required=True, metavar="DIR", help="bench_pipeline.py's work folder (kept)")
    ap.add_argument("--size", default="large", choices=sorted(SIZES), help="the cluster run in (large)")
    ap.add_argument("--target-commits", type=int, default=50_000_000, help="commits the lake holds first")
    ap.add_argument("--increment-commits", type=int, default=1_000_000, help="commits in the 15 minutes")
    ap.add_argument("--increment-only", action="store_true",
                    help="measure the increment again from the grown lake kept by an earlier run")
    ap.add_argument("--compare-with", metavar="REV",
                    help="measure the increment with the code of git revision REV too (same lake, same data)")
    ap.add_argument("--results", default=str(ROOT / "bench" / "results.json"))
    args = ap.parse_args(argv)
    keep = Path(args.keep)
    data, full = keep / args.size / "data", keep / args.size / "lake-full"
    work = keep / "busy"
    lake, grown = work / "lake", work / "lake-grown"
    report, report_grown = work / "report", work / "report-grown"
    path = Path(args.results)
    results = json.loads(path.read_text()) if path.exists() else {}
    res = results.setdefault("busy", {})
    save = lambda: path.write_text(json.dumps(results, indent=1) + "\n")  # noqa: E731
    if args.increment_only:
        if not grown.is_dir():
            raise SystemExit(f"--increment-only needs {grown} from an earlier run")
    else:
        if not (data.is_dir() and full.is_dir()):
            raise SystemExit(f"needs {data} and {full}: run bench/bench_pipeline.py --sizes {args.size} "
                             f"--keep {keep} first")
        res.clear()
        res.update(size=args.size, cluster_commits=lake_commits(full))
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        shutil.copytree(full, lake)
        if full.with_name("report-full").is_dir():  # the report belongs to its lake's state
            shutil.copytree(full.with_name("report-full"), report)
        grow(lake, data, work, args.target_commits, res, save)
        # Not timed: lets --increment-only start again from here.
        shutil.copytree(lake, grown)
        shutil.copytree(report, report_grown)
    restore(grown, lake, report_grown, report)
    folder = simulate_increment(lake, work, {**COMMON, **SIZES[res["size"]]}, args.increment_commits, res, save)
    res.update(lake_commits=lake_commits(lake), lake_clusters=len(clusters(lake)))
    if args.compare_with:
        # The same increment on the same lake with the code of another revision, first.
        res["compare"] = {"rev": args.compare_with,
                          **measure_increment(lake, folder, work, Code.export(args.compare_with, work))}
        save()
        restore(grown, lake, report_grown, report)
    else:
        res.pop("compare", None)
    res.update(measure_increment(lake, folder, work, Code()))
    save()
    print(f"lake: {res['lake_commits']:,} commits in {res['lake_clusters']} clusters; increment of "
          f"{res['increment_sim']['commits']:,} commits ({res['increment_sim']['groups']} groups, 15 minutes)")
    for g in res.get("growth", []):
        print(f"  adding a large cluster to a lake of {g['lake_commits_before']:>12,} commits: {g['run_s']:>8.1f} s,"
              f" peak {g['peak_rss_mb']:,} MB")
    print(f"increment: {res['increment_s']} s (run {res['increment_run_s']} s - no-op run {res['startup_s']} s"
          f" - JVM start {res['increment_jvm_start_s']} s), peak {res['increment_peak_rss_mb']:,} MB")
    base = res.get("compare") if args.compare_with else None
    if base:
        print(f"  with {base['rev']}: {base['increment_s']} s (run {base['increment_run_s']} s), "
              f"peak {base['increment_peak_rss_mb']:,} MB")
    print(f"  {'seconds':>8}  {'with ' + base['rev'] if base else '':>12}  step")
    for step, s in sorted(res["increment_steps"].items(), key=lambda kv: -kv[1]):
        before = f"{base['increment_steps'].get(step, 0.0):>12.1f}" if base else " " * 12
        print(f"  {s:>8.1f}  {before}  {step}")
    print(f"results: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
