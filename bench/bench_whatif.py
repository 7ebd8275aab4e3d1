"""What-if replay throughput: assignor calls (replayed rounds) per second over a synthetic history.

Builds GROUPS groups × GENERATIONS generations of random membership churn (members join and
leave, some static, heterogeneous subscriptions over three topics), then replays every group
under every assignor, first in one Python process (the per-executor cost), then, with --spark,
through the Spark job (`applyInArrow` over groups) on local[N]; with --lake, a full rebuild of a
real lake's what-if tables (`lake_throughput`, also what bench_pipeline can call).

    .venv/bin/python bench/bench_whatif.py [--groups 200] [--generations 50] [--spark] [--lake DIR]
"""
from __future__ import annotations

import argparse
import json
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


def raw_rows(rows: list[dict]) -> list[dict]:
    """The same history as the Spark job's tagged input rows (`spark_job.RAW_SCHEMA`): one
    generation record, its member rows, its episode duration and one partition's commits
    (5 s apart, 250 records: the 5000 ms / 50 records/s the history rows carry)."""
    out, seen = [], set()
    for r in rows:
        key = (r["group_id"], r["generation"])
        base = {"cluster": r["cluster"], "group_id": r["group_id"]}
        if key not in seen:
            seen.add(key)
            out.append({**base, "_src": "gg", "inc": 0, "gen": r["generation"], "cp": 0, "off": r["position"],
                        "ts_us": r["ts_ms"] * 1000, "protocol": r["protocol"]})
            out.append({**base, "_src": "ep", "inc": 0, "gen": r["generation"], "dur": r["duration_ms"]})
        out.append({**base, "_src": "ma", "cp": 0, "off": r["position"], "member_id": r["member_id"],
                    "instance_id": r["instance_id"], "topics": r["topics"]})
    for g in sorted({r["group_id"] for r in rows}):
        out.append({"cluster": "bench", "group_id": g, "_src": "cs", "topic": TOPICS[0][0], "partition": 0, "n": 2,
                    "ts_us": 0, "ts2_us": 5_000_000, "o0": 0, "o1": 250})
    return out


def lake_throughput(lake_root: str, assignors: list[str] | None = None, spark_master: str | None = None) -> dict:
    """The what-if step on a real lake (silver built): a full rebuild of its what-if tables,
    timed. `whatif_assignments_per_s` = replayed rounds under other assignors (episode rows
    other than `actual`) per second of the whole step (Spark included)."""
    from pipelines.lake import Lake
    from pipelines.spark import get_spark
    from pipelines.whatif.incremental import update

    lake = Lake(lake_root, spark=get_spark(spark_master))
    t = time.perf_counter()
    run = update(lake, list(assignors or DEFAULT_ASSIGNORS), full=True)
    dt = time.perf_counter() - t
    names = lake.read_arrow("whatif_episodes", columns=["assignor"]).column("assignor").to_pylist()
    replayed = sum(1 for a in names if a != "actual")
    return {"whatif_s": round(dt, 2), "whatif_rows": run.rows_written, "whatif_assignments": replayed,
            "whatif_assignments_per_s": round(replayed / dt) if dt > 0 else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--generations", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--spark", action="store_true", help="also time the Spark job (applyInArrow) on local[2]")
    ap.add_argument("--lake", help="also time a full what-if rebuild of this lake (its what-if tables are rewritten)")
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
        from pyspark.sql.pandas.types import from_arrow_schema

        from pipelines.spark import get_spark
        from pipelines.whatif.spark_job import OUT_SCHEMA, RAW_SCHEMA, _replay_fn

        spark = get_spark("local[2]")
        raw = [r for g in range(args.groups) for r in raw_rows(history_rows(g, args.generations, args.seed))]
        df = spark.createDataFrame(pa.Table.from_pylist(raw, schema=RAW_SCHEMA).to_pandas(),
                                   from_arrow_schema(RAW_SCHEMA)).repartition(4).cache()
        df.count()
        counts = {"bench": {t: (n, None) for t, n in TOPICS}}
        t = time.perf_counter()
        out = df.groupBy("cluster", "group_id").applyInArrow(
            _replay_fn(list(DEFAULT_ASSIGNORS), counts, has_events=False, has_current=False),
            from_arrow_schema(OUT_SCHEMA))
        n = out.where("_table = 'e' and assignor != 'actual'").count()
        dt = time.perf_counter() - t
        print(f"Spark applyInArrow on local[2]: {n} assignments in {dt:.2f} s = {n / dt:.0f} assignments/s")
    if args.lake:
        print(json.dumps(lake_throughput(args.lake)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
