"""SIGKILL `rebalance-audit run` at random moments, many times: every recovery equals an
uninterrupted run, row for row (issue 20's long run; the suite's `tests/test_run_killed.py`
kills at two chosen moments).

One uninterrupted run of the command a user types (`run --segments ... --logs ...`, checks
and report included) over a recording is the reference; it also gives the command's length
and when each step started. Then, per trial, the same command on a fresh lake is SIGKILLed
(with its Spark JVM: the whole process group) after a delay drawn uniformly over that
length, so kills fall in every step (bronze from files, silver, gold, what-if, the quality
checks, the report) in proportion to its time; the same command is then run again to its
end, and every table must equal the reference's (`pipelines.lake.compare`, arrival stamps
aside). `quality_results` is a log of every check made, the killed run's included, so it is
compared by each check's latest verdict. The report must be there.

    .venv/bin/python bench/kill_trials.py [--trials 50] [--recording crash_autocommit] [--seed 1]
        [--steps offsets_silver,sre_report]

`--ingest-segments PATH` kills `rebalance-audit ingest segments PATH` instead (bronze from
files; a recording's takes under a second inside `run`, a simulated medium cluster's about half
a minute) and compares every bronze table.

`--steps` aims the kills at chosen steps, each in turn: the kill comes after the step starts in
the killed run, at a moment drawn uniformly over the step's length in the reference run; the
step it really fell in is the one printed, as a run's steps vary in length.

Prints one line per trial (the step it killed, whether the recovery matched) and a count per
step; exits 1 when any recovery differs. About 3 minutes per trial on 2 cores.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.lake import Lake  # noqa: E402
from pipelines.lake.compare import differing_tables  # noqa: E402

SHARED = Path(os.environ.get("REBALANCE_AUDIT_SHARED", REPO.parent / "shared"))
STEP = re.compile(r"^rebalance-audit run: (\w+): started")
LOG = "quality_results"
Command = Callable[[Path], list[str]]  # the command for a lake


def run_command(recording: Path) -> Command:
    """`run` over a recording, checks and report included."""
    return lambda lake: [sys.executable, "-m", "rebalance_audit.cli", "run", "--lake", str(lake), "--cluster", "kill",
                         "--segments", str(recording / "offsets_segments"), "--logs", str(recording / "server.log")]


def ingest_command(segments: Path) -> Command:
    """`ingest segments` alone (bronze from files: delta-rs, no JVM), over any segment folder."""
    return lambda lake: [sys.executable, "-m", "rebalance_audit.cli", "ingest", "segments", "--lake", str(lake),
                         "--cluster", "kill", str(segments)]


def last_step(stderr: Path) -> str:
    steps = [m.group(1) for line in stderr.read_text(errors="replace").splitlines() if (m := STEP.match(line))]
    return steps[-1] if steps else "(before the first step)"


def verdicts(lake: Lake) -> dict[tuple, tuple]:
    """Each check's latest verdict: (cluster, table, expectation) → (success, violations)."""
    latest: dict[tuple, dict] = {}
    for r in lake.read_arrow(LOG).to_pylist():
        key = (r["cluster"], r["table_name"], r["expectation"])
        if key not in latest or r["run_ts"] >= latest[key]["run_ts"]:
            latest[key] = r
    return {k: (r["success"], r["violations"]) for k, r in latest.items()}


def run_to_end(lake: Path, command: Command, stderr: Path) -> tuple[float, dict[str, tuple[float, float]]]:
    """Run the command to its end; its length and each step's window (start, end) in seconds from
    its start, read from its `<step>: started` lines as they come."""
    lake.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    starts: list[tuple[str, float]] = []
    with open(stderr, "w") as err:
        proc = subprocess.Popen(command(lake), cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, errors="replace")
        assert proc.stderr is not None
        for line in proc.stderr:
            err.write(line)
            if m := STEP.match(line):
                starts.append((m.group(1), time.monotonic() - started))
        returncode = proc.wait(timeout=3600)
    if returncode != 0:
        raise SystemExit(f"run over {lake} failed ({returncode}): see {stderr}")
    length = time.monotonic() - started
    ends = [t for _, t in starts[1:]] + [length]
    return length, {step: (begin, end) for (step, begin), end in zip(starts, ends)}


def kill_after(lake: Path, command: Command, delay: float, stderr: Path, step: str | None = None) -> str:
    """Start the run, SIGKILL its process group `delay` s after it started, or with `step`
    `delay` s after that step started in this run (a loaded machine shifts every step, so a
    moment of the reference run's clock would miss a short step); the step it was in
    ("ended" when the run finished first)."""
    lake.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    deadline = None if step else started + delay
    with open(stderr, "w") as err:
        proc = subprocess.Popen(command(lake), cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
        assert proc.stderr is not None
        # The run's lines are read by a thread, so the kill is timed by this one, not by when
        # the next line comes.
        step_started = threading.Event()

        def copy() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                err.write(line)
                if (m := STEP.match(line)) and m.group(1) == step:
                    step_started.set()

        reader = threading.Thread(target=copy, daemon=True)
        reader.start()
        while deadline is None:
            if step_started.wait(0.05):
                deadline = time.monotonic() + delay
            elif proc.poll() is not None:
                break
        try:
            proc.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
            ended = True
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            ended = False
        reader.join()
    return "ended" if ended else last_step(stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--recording", default="crash_autocommit", help="a folder of ../shared/recordings")
    ap.add_argument("--ingest-segments", metavar="PATH",
                    help="kill `ingest segments` of PATH (a segment folder, e.g. a benchmark's simulated brokers) "
                         "instead of `run`: bronze from files, long enough to be killed mid-way")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", help="where the lakes go (default: a temporary folder, removed)")
    ap.add_argument("--steps", help="kill only inside these steps (comma-separated, as the run names them), taken "
                                    "in turn, after the step starts, by a delay drawn uniformly over the step's "
                                    "length in the reference run (default: anywhere in the run)")
    args = ap.parse_args()
    recording = SHARED / "recordings" / args.recording
    if args.ingest_segments:
        command = ingest_command(Path(args.ingest_segments))
    elif (recording / "offsets_segments").is_dir():
        command = run_command(recording)
    else:
        raise SystemExit(f"no recording at {recording}")
    whole_run = not args.ingest_segments  # checks and a report to compare too
    work = Path(args.workdir or tempfile.mkdtemp(prefix="kill-trials-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    keep = bool(args.workdir)  # a temporary folder goes, unless it holds what explains a failure
    try:
        # Each lake in a folder of its own: the report is written beside it (`report/`).
        reference = work / "reference" / "lake"
        length, windows = run_to_end(reference, command, work / "reference.stderr")
        ref = Lake(reference)
        want = verdicts(ref) if whole_run else {}
        targets = args.steps.split(",") if args.steps else []
        if unknown := [s for s in targets if s not in windows]:
            raise SystemExit(f"no step {unknown} in the reference run; its steps: {', '.join(windows)}")
        print(f"reference: {length:.0f} s, {len(ref.tables())} tables; {args.trials} trials, kills uniform over "
              + ("; ".join(f"{s} ({windows[s][0]:.0f}-{windows[s][1]:.0f} s)" for s in targets) if targets
                 else f"0-{length:.0f} s"), flush=True)
        by_step: Counter = Counter()
        failed = []
        for i in range(1, args.trials + 1):
            lake = work / f"trial-{i}" / "lake"
            target = targets[(i - 1) % len(targets)] if targets else None
            begin, end = windows[target] if target else (0.5, length)
            delay = rng.uniform(0.0, end - begin) if target else rng.uniform(begin, end)
            step = kill_after(lake, command, delay, work / f"trial-{i}.killed.stderr", target)
            if not whole_run and step != "ended":
                step = "ingest segments"
            run_to_end(lake, command, work / f"trial-{i}.stderr")
            got = Lake(lake)
            differs = [t for t in differing_tables(ref, got) if t != LOG]
            if whole_run and verdicts(got) != want:
                differs.append(f"{LOG} (each check's latest verdict)")
            if whole_run and not (lake.parent / "report" / "index.html").exists():
                differs.append("the report (no index.html)")
            by_step[step] += 1
            moment = f"{delay:.1f} s after {target} started" if target else f"at {delay:.1f} s"
            what = f"not killed (ended before {moment})" if step == "ended" else f"killed {moment}, in {step}"
            print(f"trial {i}: {what}: "
                  + ("recovered, every table equal" if not differs else f"DIFFERS: {', '.join(differs)}"), flush=True)
            if differs:
                failed.append(i)
                keep = True
            else:
                shutil.rmtree(lake.parent, ignore_errors=True)
        print("kills per step: " + ", ".join(f"{s} {n}" for s, n in by_step.most_common()))
        print(f"{args.trials - len(failed)} of {args.trials} recoveries equal the uninterrupted run"
              + (f"; differing: trials {failed} (lakes kept in {work})" if failed else ""))
        return 1 if failed else 0
    except BaseException:
        keep = True  # a run that failed names its stderr file in there
        raise
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
