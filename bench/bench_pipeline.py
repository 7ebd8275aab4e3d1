"""Benchmark: the whole pipeline on simulated clusters of three sizes.

For each size, the simulator (simulator) writes segments + server.log, then:

  decode_records_per_s   segment reader + codec over every record (iter_paths + decode_record)
  log_lines_per_s        pipelines.logs.parse_events over every server.log line
  pipeline_s             `rebalance-audit run --segments --logs` (ingest_segments, ingest_logs,
                         silver, gold, what-if, report: every asset and every quality check)
                         in a fresh lake, wall time; `checks` keeps the run's check summary
  peak_rss_mb            peak resident memory of that run's process tree (Python + Spark JVM),
                         sampled from /proc every 0.2 s
  incremental_s          a second `run` after adding 1 % more data (1 % more groups, ingested
                         as a second cluster of the lake), minus the fixed start-up: a `run`
                         with nothing new (process, imports, Dagster, Great Expectations; it
                         starts no JVM) and the increment run's own Spark JVM start (printed
                         by the run); `incremental_pct_of_full` relates it to pipeline_s
  whatif_assignments_per_s  replayed assignments (what-if episode rows other than `actual`) per
                         second of a full what-if rebuild of the lake, Spark included
                         (bench_whatif.lake_throughput, run last, in its own process)

With `--compare-with REV` every size is measured a second time, in the same invocation and on
the same simulated data, with the code of git revision REV (exported with `git archive` into
the work folder and run with this checkout's virtualenv): e.g. the delta-rs bridge (01aff37,
the last commit before delta-spark). Its figures go to `baselines[REV]` in the results file.

    .venv/bin/python bench/bench_pipeline.py --sizes small
    .venv/bin/python bench/bench_pipeline.py --sizes small,medium --keep /tmp/bench
    .venv/bin/python bench/bench_pipeline.py --sizes medium,large --compare-with 01aff37 --keep /tmp/bench
    .venv/bin/python bench/bench_pipeline.py --sizes large --keep /tmp/bench --reuse-data --full-only
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.codec import decode_record  # noqa: E402
from pipelines.logs import parse_events  # noqa: E402
from pipelines.segments import SegmentRecord, iter_paths  # noqa: E402
from simulator import SimConfig, simulate  # noqa: E402

# groups x partitions x (minutes*60/commit interval) ~ commits; churn sets generations.
SIZES = {
    "small": dict(groups=20, minutes=10, partitions_per_topic=8, churn_per_minute=0.6),
    "medium": dict(groups=200, minutes=60, partitions_per_topic=8, churn_per_minute=0.45),
    "large": dict(groups=2000, minutes=60, partitions_per_topic=8, churn_per_minute=0.45),
}
COMMON = dict(seed=42, kafka_version="3.9-new", kip848_fraction=0.1, transactional_fraction=0.05,
              offsets_partitions=50, commit_interval_ms=5000)


# kcmp(2) numbers (Linux): the syscall on x86-64 and arm64, and its "same address space" type.
_SYS_KCMP = {"x86_64": 312, "aarch64": 272}.get(platform.machine())
_KCMP_VM = 1


def _shares_memory(a: int, b: int) -> bool:
    """Whether processes `a` and `b` share one address space (kcmp KCMP_VM). A child between
    vfork and exec does: the JVM starts every helper (Hadoop's shell calls) with posix_spawn,
    and until the exec that child, named after the JVM thread that spawned it, shows the
    JVM's whole VmRSS. False when kcmp is not available."""
    if _SYS_KCMP is None:
        return False
    import ctypes

    return ctypes.CDLL(None, use_errno=True).syscall(_SYS_KCMP, a, b, _KCMP_VM, 0, 0) == 0


def proc_tree_rss(pid: int) -> dict[str, int]:
    """Resident bytes of `pid` and all its descendants (Linux /proc), per process name
    (`java`: the Spark JVM; `python`: the CLI and Dagster's processes). A child that still
    shares its parent's address space (spawned, not yet exec'd) holds no memory of its own
    and is not counted: sampled at such a moment, the JVM was counted twice."""
    by_name: dict[str, int] = {}
    todo: list[tuple[int, int | None]] = [(pid, None)]
    while todo:
        p, parent = todo.pop()
        try:
            if parent is None or not _shares_memory(p, parent):
                name = ""
                with open(f"/proc/{p}/status") as f:
                    for line in f:
                        if line.startswith("Name:"):
                            name = line.split()[1] if len(line.split()) > 1 else ""
                            name = "python" if name.startswith("python") else name
                        elif line.startswith("VmRSS:"):
                            by_name[name] = by_name.get(name, 0) + int(line.split()[1]) * 1024
                            break
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [(int(x), p) for x in f.read().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return by_name


def timed_run(cmd: list[str], outcome: dict | None = None, stderr_log: Path | None = None,
              env: dict | None = None) -> tuple[float, int]:
    """(wall seconds, peak tree RSS bytes) of a command; raises if it fails. Its whole stderr
    (Spark's and Dagster's logs) is kept in `stderr_log` when given, its stdout beside it.

    A `run` whose pipeline completed but whose blocking quality checks failed exits 1: that
    is a finding about the data, recorded in `outcome["checks"]`, not a failed benchmark."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            by_name = proc_tree_rss(proc.pid)
            if sum(by_name.values()) > peak[0]:
                peak[0] = sum(by_name.values())
                if outcome is not None:  # where the memory is at the peak
                    outcome["peak_rss_by_process_mb"] = {k: round(v / 2**20) for k, v in sorted(by_name.items())}
            done.wait(0.2)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    done.set()
    th.join()
    wall = time.perf_counter() - t0
    if stderr_log is not None:
        stderr_log.write_text(err)
        stderr_log.with_suffix(".stdout").write_text(out)  # the tables and the checks' summary
    summary = [line for line in out.splitlines() if "checks passed" in line]
    if outcome is not None and summary:
        outcome["checks"] = summary[-1].strip()
    if proc.returncode == 1 and summary and "blocking" in err:
        return wall, peak[0]
    if proc.returncode != 0:
        where = f" (whole stderr: {stderr_log})" if stderr_log else ""
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({proc.returncode}){where}: {err.strip()[-800:]}")
    return wall, peak[0]


def decode_rate(root: Path) -> tuple[int, float]:
    n = 0
    t0 = time.perf_counter()
    for item in iter_paths([root]):
        if isinstance(item, SegmentRecord) and not item.batch.control:
            decode_record(item.key, item.value, kafka_version="3.9")
            n += 1
    return n, n / (time.perf_counter() - t0)


def parse_rate(root: Path) -> tuple[int, float]:
    n = 0
    t0 = time.perf_counter()
    for _ in parse_events(sorted(str(p) for p in root.glob("broker-*/server.log"))):
        n += 1
    lines = sum(1 for p in root.glob("broker-*/server.log") for _ in open(p, "rb"))
    return lines, lines / (time.perf_counter() - t0)


class Code:
    """The code a pipeline run uses: this checkout, or an exported revision run with this
    checkout's virtualenv (its packages first on PYTHONPATH, ahead of the editable install)."""

    def __init__(self, root: Path = ROOT, label: str = "current"):
        self.root, self.label = root, label

    @classmethod
    def export(cls, rev: str, work: Path) -> "Code":
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], check=True,
                                capture_output=True, text=True).stdout.strip()
        root = work / f"code-{commit}"
        if not root.is_dir():
            root.mkdir(parents=True)
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True)
            subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
        code = cls(root, commit)
        found = code.imports_from()
        if found != root:
            raise RuntimeError(f"{rev}'s commands would import the pipeline from {found}, not {root}")
        return code

    def env(self) -> dict | None:
        if self.root == ROOT:
            return None
        # PYTHONSAFEPATH (python -P, inherited by every Python process the command starts,
        # Spark's workers too): without it `python -c` and `python -m` put the working folder
        # first on sys.path, ahead of PYTHONPATH, and a benchmark started from the checkout
        # ran the checkout's code as REV's (every `--compare-with` of a `run` before
        # 2026-12-07 measured this checkout twice).
        return {**os.environ, "PYTHONPATH": str(self.root), "PYTHONSAFEPATH": "1"}

    def python(self, *args: str) -> list[str]:
        return [str(ROOT / ".venv" / "bin" / "python"), *args]

    def cli(self, *args: str) -> list[str]:
        """`rebalance-audit ARGS` run by this code."""
        return self.python("-c", "import sys; from rebalance_audit.cli import script; sys.exit(script())", *args)

    def imports_from(self, cwd: Path = ROOT) -> Path:
        """Where a Python process that this code's command starts (as Spark starts its
        workers, `python -m`), from `cwd`, imports the pipeline from."""
        child = "import pipelines; print(pipelines.__file__)"
        parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}], check=True)"
        done = subprocess.run(self.python("-c", parent), cwd=cwd, env=self.env(), check=True,
                              capture_output=True, text=True)
        return Path(done.stdout.strip()).parent.parent


def run_cmd(lake: Path, *paths: Path, code: Code | None = None) -> list[str]:
    code = code or Code()
    cmd = code.cli("run", "--lake", str(lake), "--spark-master", "local[2]", "--timings")
    if paths:
        cmd += ["--segments", *map(str, paths), "--logs", *map(str, paths)]
    return cmd


SIMULATED = ("commits", "generations", "records", "log_lines", "simulate_s", "segment_mb")


# What a run after the full one measures (kept by --full-only).
AFTER_FULL = ("startup_s", "increment_jvm_start_s", "increment_run_s", "incremental_s", "whatif_assignments_per_s",
              "whatif_s", "whatif_assignments")


def bench_size(name: str, work: Path, skip_pipeline: bool, res: dict, save=lambda: None,
               reuse_data: bool = False, increment_only: bool = False, code: Code | None = None,
               full_only: bool = False) -> dict:
    code = code or Code()
    kept = dict(res) if full_only else {}
    params = {**COMMON, **SIZES[name]}
    data = work / name / "data"
    extra = work / name / "extra"
    # Each code's lakes apart; this checkout's keep the folder names of earlier versions.
    runs = work / name if code.root == ROOT else work / name / code.label
    runs.mkdir(parents=True, exist_ok=True)
    lake = runs / "lake"
    full_copy = runs / "lake-full"  # the lake right after the full run (--increment-only)
    simulated = {k: res[k] for k in SIMULATED if k in res}
    if increment_only:
        if not full_copy.is_dir() or res.get("pipeline_s") is None:
            raise SystemExit(f"--increment-only needs {full_copy} and the size's figures from an earlier run")
        for kept, live in ((full_copy, lake), (full_copy.with_name("report-full"), lake.with_name("report"))):
            shutil.rmtree(live, ignore_errors=True)
            if kept.is_dir():
                shutil.copytree(kept, live)
        return _increment(name, runs, params, lake, extra, res, save, code)
    reuse = reuse_data and data.is_dir() and len(simulated) == len(SIMULATED)
    for d in (extra, lake, full_copy) if reuse else (data, extra, lake, full_copy):
        shutil.rmtree(d, ignore_errors=True)
    res.clear()
    if reuse:
        # The same seed and sizes give the same data: keep the simulated set and its figures.
        res.update(simulated)
        print(f"[{name}] reusing {data}", file=sys.stderr)
    else:
        t0 = time.perf_counter()
        summary = simulate(SimConfig(out=str(data), **params))
        sim_s = time.perf_counter() - t0
        res.update({"commits": summary["records"]["commits"], "generations": summary["generations"],
                    "records": summary["records"]["records"], "log_lines": summary["records"]["lines"],
                    "simulate_s": round(sim_s, 1),
                    "segment_mb": round(sum(p.stat().st_size for p in data.rglob("*.log")) / 2**20, 1)})
    print(f"[{name}] simulated {res['commits']:,} commits, {res['generations']:,} generations in {res['simulate_s']}s",
          file=sys.stderr)
    if full_only:
        res.update({k: kept[k] for k in ("decode_records_per_s", "log_lines_per_s") if k in kept})
    elif code.root == ROOT:  # the codec and the log parser of this checkout; a baseline compares the lake
        n, rate = decode_rate(data)
        res["decode_records_per_s"] = round(rate)
        n, rate = parse_rate(data)
        res["log_lines_per_s"] = round(rate)
        print(f"[{name}] decode {res['decode_records_per_s']:,} rec/s, parse {res['log_lines_per_s']:,} lines/s",
              file=sys.stderr)
    res["whatif_assignments_per_s"] = kept.get("whatif_assignments_per_s")
    save()  # figures are kept as they come: a long run cut short still reports what it measured
    if skip_pipeline:
        res.update(pipeline_s=None, peak_rss_mb=None, incremental_s=None)
        return res
    wall, peak = timed_run(run_cmd(lake, data, code=code), res, runs / "run-full.stderr", code.env())
    res["pipeline_s"] = round(wall, 1)
    res["peak_rss_mb"] = round(peak / 2**20)
    print(f"[{name}] pipeline {wall:.1f}s, peak RSS {res['peak_rss_mb']} MB", file=sys.stderr)
    save()
    # Not timed: lets --increment-only measure the increment again (the report beside the
    # lake belongs to it: a report of another lake state would be rewritten by the no-op run).
    shutil.copytree(lake, full_copy)
    shutil.rmtree(full_copy.with_name("report-full"), ignore_errors=True)
    if lake.with_name("report").is_dir():
        shutil.copytree(lake.with_name("report"), full_copy.with_name("report-full"))
    if full_only:
        res.update({k: kept[k] for k in AFTER_FULL if k in kept})
        if res.get("incremental_s") is not None:
            res["incremental_pct_of_full"] = round(100 * res["incremental_s"] / res["pipeline_s"], 1)
        save()
        return res
    return _increment(name, runs, params, lake, extra, res, save, code)


def jvm_start_s(outcome: dict) -> float:
    """The Spark JVM start-up a run printed in its check summary (`timed_run`'s outcome):
    taken out of an increment's time, with the no-op run's start-up."""
    jvm = re.search(r"Spark start-up ([\d.]+) s", outcome.get("checks", ""))
    return float(jvm.group(1)) if jvm else 0.0


def _increment(name: str, runs: Path, params: dict, lake: Path, extra: Path, res: dict, save, code: Code) -> dict:
    # +1 %: 1 % more groups, simulated separately (other group ids) and ingested as a second
    # cluster of the same lake, since their __consumer_offsets offsets restart at 0.
    extra_params = {**params, "groups": max(1, params["groups"] // 100), "seed": params["seed"] + 1,
                    "group_prefix": "extra-group"}
    if not extra.is_dir():
        simulate(SimConfig(out=str(extra), **extra_params))
    # Nothing new: the fixed start-up of a run (process, imports, Dagster, GE; no JVM, since
    # a run with nothing new starts none).
    fixed, _ = timed_run(run_cmd(lake, code=code), None, runs / "run-fixed.stderr", code.env())
    seen: dict = {}
    inc, _ = timed_run(run_cmd(lake, extra, code=code) + ["--cluster", "bench-extra"], seen,
                       runs / "run-increment.stderr", code.env())
    jvm_s = jvm_start_s(seen)
    res["startup_s"] = round(fixed, 1)
    res["increment_jvm_start_s"] = round(jvm_s, 1)
    res["increment_run_s"] = round(inc, 1)
    res["incremental_s"] = round(max(0.0, inc - fixed - jvm_s), 1)
    if res.get("pipeline_s"):
        res["incremental_pct_of_full"] = round(100 * res["incremental_s"] / res["pipeline_s"], 1)
    print(f"[{name}] incremental {res['incremental_s']}s (run {inc:.1f}s - no-op run {fixed:.1f}s - JVM start "
          f"{jvm_s:.1f}s; {res.get('incremental_pct_of_full')} % of the full run)", file=sys.stderr)
    save()
    res.update(whatif_throughput(lake, code))
    print(f"[{name}] what-if {res['whatif_assignments_per_s']} assignments/s", file=sys.stderr)
    return res


def whatif_throughput(lake: Path, code: Code) -> dict:
    """A full what-if rebuild of the lake, timed in a process of its own (one SparkContext each)."""
    out = subprocess.run(code.python(str(code.root / "bench" / "bench_whatif.py"), "--groups", "1",
                                     "--generations", "1", "--lake", str(lake)),
                         capture_output=True, text=True, env=code.env())
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 and not (lines and lines[-1].startswith("{")):
        # Show why: a bare CalledProcessError would hide the child's stderr.
        raise RuntimeError(f"bench_whatif.py exited {out.returncode}:\n{out.stderr[-4000:]}")
    if out.returncode != 0:
        # Seen once in a while: the process aborts in interpreter teardown ("terminate called
        # without an active exception", a native thread pool) after printing its figures.
        print(f"bench_whatif.py exited {out.returncode} after printing its figures (kept)", file=sys.stderr)
    figures = json.loads(lines[-1])
    return {"whatif_assignments_per_s": figures["whatif_assignments_per_s"], "whatif_s": figures["whatif_s"],
            "whatif_assignments": figures["whatif_assignments"]}


def machine() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()}
    try:
        with open("/proc/meminfo") as f:
            info["mem_gb"] = round(int(f.readline().split()[1]) / 2**20, 1)
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="small,medium", help="comma list of small, medium, large")
    ap.add_argument("--keep", metavar="DIR", help="work folder to keep (default: a temp folder, removed)")
    ap.add_argument("--no-pipeline", action="store_true", help="only simulate, decode and parse")
    ap.add_argument("--reuse-data", action="store_true",
                    help="with --keep: reuse a size's simulated data (and its figures in --results) if present")
    ap.add_argument("--increment-only", action="store_true",
                    help="with --keep: measure only the no-op and +1 %% runs again, from the lake kept after "
                         "the last full run (lake-full)")
    ap.add_argument("--full-only", action="store_true",
                    help="with --keep --reuse-data: measure only the full run again (the size's increment and "
                         "what-if figures are kept, their share of the full run recomputed)")
    ap.add_argument("--compare-with", metavar="REV",
                    help="measure each size again with the code of git revision REV (same data, same run)")
    ap.add_argument("--results", default=str(ROOT / "bench" / "results.json"))
    args = ap.parse_args(argv)
    if args.full_only and (not (args.keep and args.reuse_data) or args.compare_with):
        ap.error("--full-only needs --keep and --reuse-data, and measures this checkout only")
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    for s in sizes:
        if s not in SIZES:
            ap.error(f"unknown size {s!r}; known: {', '.join(SIZES)}")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ra-bench-"))
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    results = {"sizes": {}, "machine": machine(), "commit": head.stdout.strip() or None, "baselines": {}}
    path = Path(args.results)
    if path.exists():
        try:
            earlier = json.loads(path.read_text())
            results["sizes"].update(earlier.get("sizes", {}))
            results["baselines"].update(earlier.get("baselines", {}))
            # Other benchmarks' entries (bench_busy's `busy`, bench_dagster's `dagster`) stay,
            # after this one's (the file's order, so that a re-run's diff is its figures).
            results = {**results, **{k: v for k, v in earlier.items() if k not in results}}
        except ValueError:
            pass
    save = lambda: path.write_text(json.dumps(results, indent=1) + "\n")  # noqa: E731
    try:
        baseline = Code.export(args.compare_with, work) if args.compare_with else None
        for s in sizes:
            keep = args.reuse_data or args.increment_only
            results["sizes"][s] = results["sizes"].get(s, {}) if keep else {}
            bench_size(s, work, args.no_pipeline, results["sizes"][s], save, reuse_data=args.reuse_data,
                       increment_only=args.increment_only, full_only=args.full_only)
            save()
            if baseline and not args.no_pipeline:
                entry = results["baselines"].setdefault(baseline.label, {"sizes": {}})
                res = entry["sizes"].setdefault(s, {})
                if not args.increment_only:  # the same simulated data as the run just measured
                    res.clear()
                    res.update({k: results["sizes"][s][k] for k in SIMULATED})
                bench_size(s, work, False, res, save, reuse_data=True, increment_only=args.increment_only,
                           code=baseline)
                save()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    cols = ["commits", "generations", "decode_records_per_s", "log_lines_per_s", "pipeline_s", "peak_rss_mb",
            "incremental_s", "whatif_assignments_per_s"]
    print(f"{'size':<16}" + "".join(f"{c:>26}" for c in cols))
    rows = [(s, r) for s, r in results["sizes"].items()]
    rows += [(f"{s} @{label}", r) for label, b in results["baselines"].items() for s, r in b["sizes"].items()]
    for s, r in rows:
        print(f"{s:<16}" + "".join(f"{('-' if r.get(c) is None else format(r[c], ',')):>26}" for c in cols))
    print(f"results: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
