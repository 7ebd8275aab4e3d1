"""What-if replay throughput: assignor calls (replayed rounds) per second over a synthetic history.

Builds GROUPS groups × GENERATIONS generations of random membership churn (members join and
leave, some static, heterogeneous subscriptions over three topics), then replays every group
under every assignor, first in one Python process (the per-executor cost), then, with --spark,
through the Spark job (`applyInArrow` over groups) on local[N].

    .venv/bin/python bench/bench_whatif.py [--groups 200] [--generations 50] [--spark]
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.whatif.history import build_history  # noqa: E402
from pipelines.whatif.protocols import DEFAULT_ASSIGNORS  # noqa: E402
from pipelines.whatif.replay import replay  # noqa: E402

TOPICS = (("orders", 12), ("payments", 6), ("audit", 24))


def history_rows(group: int, generations: int, seed: int) -> list[dict]:
    rng = random.Random(seed * 1_000_003 + group)
    members: dict[str, dict] = {}
    rows, n = [], 0
    for gen in range(1, generations + 1):
        for _ in range(rng.randint(1, 2)):
            if len(members) > 1 and rng.random() < 0.45:
                members.pop(rng.choice(sorted(members)))
            elif len(members) < 12:
                n += 1
                members[f"consumer-{n}-{rng.getrandbits(64):016x}"] = {
                    "instance_id": f"host-{n}" if rng.random() < 0.2 else None,
                    "topics": sorted(rng.sample([t for t, _ in TOPICS], rng.randint(1, len(TOPICS)))),
                }
        for mid, m in sorted(members.items()):
            rows.append({
                "cluster": "bench", "group_id": f"g{group}", "incarnation": 0, "kind": "classic", "generation": gen,
                "position": gen, "ts_ms": gen * 60_000, "protocol": None, "member_id": mid,
                "instance_id": m["instance_id"], "client_id": None, "topics": m["topics"], "topic": None,
                "partition": None, "duration_ms": 800.0, "duration_source": "bench", "commit_interval_ms": 5000.0,
                "records_per_partition_s": 50.0, "topic_counts": None,
            })
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--generations", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--spark", action="store_true", help="also time the Spark job (applyInArrow) on local[2]")
    args = ap.parse_args()
    counts = dict(TOPICS)
    histories = [build_history(history_rows(g, args.generations, args.seed), counts) for g in range(args.groups)]
    print(f"history: {args.groups} groups x {args.generations} generations, "
          f"{sum(len(s.members) for h in histories for s in h.steps)} member-generations")
    total_rounds, total_s = 0, 0.0
    for name in DEFAULT_ASSIGNORS:
        t = time.perf_counter()
        rounds = sum(len(replay(h, name).rounds) for h in histories)
        dt = time.perf_counter() - t
        total_rounds += rounds
        total_s += dt
        print(f"  {name:>20}: {rounds:7d} assignments in {dt:7.2f} s = {rounds / dt:9.0f} assignments/s")
    print(f"all assignors, one Python process: {total_rounds / total_s:.0f} assignments/s")
    if args.spark:
        import pyarrow as pa

        from pipelines.spark import get_spark
        from pipelines.whatif.spark_job import EPISODES_WITH_EXTRAS, GROUP_KEYS, HISTORY_SCHEMA, _replay_fn
        from pyspark.sql.pandas.types import from_arrow_schema

        spark = get_spark("local[2]")
        rows = [r for g in range(args.groups) for r in history_rows(g, args.generations, args.seed)]
        schema = pa.schema(list(HISTORY_SCHEMA) + [pa.field("commit_interval_ms", pa.float64()),
                                                   pa.field("records_per_partition_s", pa.float64()),
                                                   pa.field("_cluster_counts", pa.string())])
        import json

        for r in rows:
            r["_cluster_counts"] = json.dumps(counts)
        df = spark.createDataFrame(pa.Table.from_pylist(rows, schema=schema).to_pandas()).repartition(4).cache()
        df.count()
        t = time.perf_counter()
        out = df.groupBy(*GROUP_KEYS).applyInArrow(_replay_fn(list(DEFAULT_ASSIGNORS)),
                                                   from_arrow_schema(EPISODES_WITH_EXTRAS))
        n = out.where("assignor != 'actual'").count()
        dt = time.perf_counter() - t
        print(f"Spark applyInArrow on local[2]: {n} assignments in {dt:.2f} s = {n / dt:.0f} assignments/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
