"""Long fuzz run of the coordinator-log reader and parser on mutated real server.logs.

Each input is a slice of one recording's server.log with one to three seeded mutations
(tests/log_mutations.py: bit flips, binary junk, megabyte lines, crafted 40 k lines, latin-1,
UTF-16, other loggers' lines, truncated lines and files, huge numbers, hostile group ids,
gzip whole or cut), read as `parse-logs` and silver read it. Prints inputs tried, crashes,
hangs (an input over --hang-s CPU seconds), parsed rows and the quarantine rows (`error` and
`unrecognized` records) by reason. Exit 1 if anything crashed or hung.

    nice .venv/bin/python bench/fuzz_logs.py 100000 --jobs 2
    nice .venv/bin/python bench/fuzz_logs.py 2000 --seed 7      # the inputs of tests/test_logs_fuzz.py
"""
from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import log_mutations as lm  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", type=int, help="how many mutated inputs to try")
    parser.add_argument("--seed", type=int, default=1, help="run seed (input N of a seed is always the same bytes)")
    parser.add_argument("--start", type=int, default=0, help="first input number (to resume or split a run)")
    parser.add_argument("--hang-s", type=float, default=10.0, help="an input taking more CPU seconds than this is a hang (default 10)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes, each on its share of the inputs")
    parser.add_argument("--every", type=int, default=10_000, help="print progress every N inputs (per job)")
    args = parser.parse_args()
    if not lm.seeds():
        print(f"fuzz_logs: no server.log under {lm.RECORDINGS}", file=sys.stderr)
        return 1
    started = time.perf_counter()
    jobs = max(1, min(args.jobs, args.inputs))
    share = -(-args.inputs // jobs)
    ranges = [(args.start + i * share, min(share, args.inputs - i * share)) for i in range(jobs)]
    work = [(args.seed, first, count, args.hang_s, args.every) for first, count in ranges if count > 0]
    if len(work) == 1:
        tallies = [_run(*work[0])]
    else:
        with multiprocessing.get_context("fork").Pool(len(work)) as pool:
            tallies = pool.starmap(_run, work)
    report(_merge(tallies), args, time.perf_counter() - started)
    return 1 if any(t.crashes or t.hangs for t in tallies) else 0


def _run(seed: int, first: int, count: int, hang_s: float, every: int) -> lm.Tally:
    """Inputs first .. first+count-1 of run `seed`, in this process."""
    logs = lm.seeds()
    lines = lm.coordinator_lines(logs)
    tally = lm.Tally()
    started = time.perf_counter()
    # In memory where there is a /dev/shm: each input is written to a file, as the reader reads files.
    scratch = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="fuzz-logs-", dir=scratch) as folder:
        for number in range(first, first + count):
            lm.judge(lm.make_input(seed, number, logs, lines), Path(folder), tally, hang_s=hang_s)
            if every and tally.inputs % every == 0:
                print(f"... inputs {first}+{tally.inputs}: {len(tally.crashes)} crashes, {len(tally.hangs)} hangs, "
                      f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return tally


def _merge(tallies: list[lm.Tally]) -> lm.Tally:
    out = lm.Tally()
    for t in tallies:
        out.inputs += t.inputs
        out.crashes += t.crashes
        out.hangs += t.hangs
        out.parsed += t.parsed
        out.reasons.update(t.reasons)
        out.slowest = max(out.slowest, t.slowest)
    return out


def report(tally: lm.Tally, args, elapsed: float) -> None:
    print(f"seed {args.seed}, inputs {args.start}..{args.start + args.inputs - 1}")
    print(f"inputs tried: {tally.inputs}")
    print(f"crashes: {len(tally.crashes)}")
    print(f"hangs (over {args.hang_s} CPU s): {len(tally.hangs)}")
    print(f"slowest input: {tally.slowest:.2f} CPU s")
    print(f"parsed rows: {tally.parsed}")
    print(f"quarantine rows: {sum(tally.reasons.values())}")
    for reason, count in tally.reasons.most_common():
        print(f"  {count:>9}  {reason}")
    print(f"elapsed: {elapsed:.0f} s ({tally.inputs / max(elapsed, 1e-9):.0f} inputs/s)")
    for what in (tally.crashes + tally.hangs)[:5]:
        print(what, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
