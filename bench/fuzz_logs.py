"""Long fuzz run of the coordinator-log reader and parser on mutated real server.logs.

Each input is a slice of one recording's server.log with one to three seeded mutations
(tests/log_mutations.py: bit flips, binary junk, megabyte lines, crafted 40 k lines, latin-1,
UTF-16, other loggers' lines, truncated lines and files, huge numbers, hostile group ids,
gzip whole or cut), read as `parse-logs` and silver read it. Prints inputs tried, crashes,
hangs (an input over --hang-s seconds), parsed rows and the quarantine rows (`error` and
`unrecognized` records) by reason. Exit 1 if anything crashed or hung.

    nice .venv/bin/python bench/fuzz_logs.py 100000
    nice .venv/bin/python bench/fuzz_logs.py 2000 --seed 7      # the inputs of tests/test_logs_fuzz.py
"""
from __future__ import annotations

import argparse
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
    parser.add_argument("--hang-s", type=float, default=10.0, help="an input slower than this is a hang (default 10)")
    parser.add_argument("--every", type=int, default=10_000, help="print progress every N inputs")
    args = parser.parse_args()

    logs = lm.seeds()
    if not logs:
        print(f"fuzz_logs: no server.log under {lm.RECORDINGS}", file=sys.stderr)
        return 1
    lines = lm.coordinator_lines(logs)
    tally = lm.Tally()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fuzz-logs-") as folder:
        for number in range(args.start, args.start + args.inputs):
            lm.judge(lm.make_input(args.seed, number, logs, lines), Path(folder), tally, hang_s=args.hang_s)
            if args.every and tally.inputs % args.every == 0:
                print(f"... {tally.inputs} inputs, {len(tally.crashes)} crashes, {len(tally.hangs)} hangs, "
                      f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    report(tally, args, time.perf_counter() - started)
    return 1 if tally.crashes or tally.hangs else 0


def report(tally: lm.Tally, args, elapsed: float) -> None:
    print(f"seed {args.seed}, inputs {args.start}..{args.start + args.inputs - 1}")
    print(f"inputs tried: {tally.inputs}")
    print(f"crashes: {len(tally.crashes)}")
    print(f"hangs (over {args.hang_s} s): {len(tally.hangs)}")
    print(f"slowest input: {tally.slowest:.2f} s")
    print(f"parsed rows: {tally.parsed}")
    print(f"quarantine rows: {sum(tally.reasons.values())}")
    for reason, count in tally.reasons.most_common():
        print(f"  {count:>9}  {reason}")
    print(f"elapsed: {elapsed:.0f} s ({tally.inputs / max(elapsed, 1e-9):.0f} inputs/s)")
    for what in (tally.crashes + tally.hangs)[:5]:
        print(what, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
