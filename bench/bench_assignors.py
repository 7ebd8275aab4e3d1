"""Assignment time per assignor and size class, next to Kafka 3.9's Java timings in the vectors.

For every generation of ../shared/assignor-vectors (or $REBALANCE_AUDIT_SHARED), times our
`assign_problem` (problem parsing excluded, like the Java `assign()` bracket) and prints median / p90 /
max per assignor and size class next to the Java `best` = min(timing.assign_ns, timing.reps_ns) over
the same generations. Also checks that each result equals Kafka's partition sets and counts mismatches.

    .venv/bin/python bench/bench_assignors.py [--sizes small,medium,large] [--assignors ...] [--budget 120]

`--budget` caps the seconds spent per assignor and size class (the large sticky general-builder
sequences take seconds per call even in Java); the table says how many generations were timed.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.assignors import AssignorError, Problem, assign_problem  # noqa: E402

SHARED = Path(os.environ.get("REBALANCE_AUDIT_SHARED", Path(__file__).resolve().parents[2] / "shared"))
KAFKA = ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform", "server-range")


def fmt(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} µs"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="small,medium,large")
    ap.add_argument("--assignors", default=",".join(KAFKA))
    ap.add_argument("--budget", type=float, default=120.0, help="seconds per assignor and size class")
    args = ap.parse_args()
    sizes = args.sizes.split(",")
    rows = []
    for name in args.assignors.split(","):
        per_size: dict[str, dict] = {s: {"ours": [], "java": [], "mismatch": 0, "errors": 0, "spent": 0.0,
                                         "skipped": 0} for s in sizes}
        with gzip.open(SHARED / "assignor-vectors" / f"{name}.jsonl.gz", "rt") as f:
            for line in f:
                seq = json.loads(line)
                acc = per_size.get(seq["size_class"])
                if acc is None:
                    continue
                for g in seq["generations"]:
                    if acc["spent"] > args.budget:
                        acc["skipped"] += 1
                        continue
                    problem = Problem.from_dict(g)
                    t0 = time.perf_counter_ns()
                    try:
                        got = assign_problem(name, problem)
                        err = None
                    except AssignorError as exc:
                        got, err = None, exc
                    dt = time.perf_counter_ns() - t0
                    acc["spent"] += dt / 1e9
                    acc["ours"].append(dt)
                    timing = g.get("timing") or {}
                    java = [x for x in [timing.get("assign_ns"), *(timing.get("reps_ns") or [])] if x]
                    if java:
                        acc["java"].append(min(java))
                    if err is not None:
                        acc["errors"] += 1
                        acc["mismatch"] += not g.get("assign_error")
                        continue
                    exp = {m: {(t, p) for t, ps in r for p in ps} for m, r in (g.get("assignment") or {}).items()}
                    mine = {m: set(v) for m, v in got.items()}
                    if g.get("assign_error") or any(exp.get(m, set()) != mine.get(m, set()) for m in set(exp) | set(mine)):
                        acc["mismatch"] += 1
        for s in sizes:
            a = per_size[s]
            if not a["ours"]:
                continue
            rows.append((name, s, len(a["ours"]), a["skipped"], a["mismatch"],
                         fmt(statistics.median(a["ours"])), fmt(pct(a["ours"], 0.9)), fmt(max(a["ours"])),
                         fmt(statistics.median(a["java"])) if a["java"] else "-",
                         fmt(pct(a["java"], 0.9)) if a["java"] else "-",
                         fmt(max(a["java"])) if a["java"] else "-"))
        print(f"... {name} done", file=sys.stderr, flush=True)
    head = ("assignor", "size", "gens", "skipped", "mismatch", "ours med", "ours p90", "ours max",
            "java best med", "java best p90", "java best max")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
