"""`rebalance-audit whatif`: replay one group (or all) under other assignors and print the comparison.

Reads the silver tables of the lake (and gold `rebalance_episodes` for durations when it is
there), replays with Spark on the executors, and prints one line per (group, assignor) next to
what actually happened. `--write` also stores `whatif_episodes` / `whatif_summary` in the lake.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from rebalance_audit.cli import UsageError, add_common_options

COLUMNS = [
    ("assignor", "assignor"), ("protocol", "protocol"), ("rounds", "rounds"), ("moved", "moved"),
    ("revoked", "revoked"), ("stw_partition_seconds", "stw p·s"), ("max_balance", "max bal"),
    ("idle_member_rounds", "idle"), ("dup_exposure_records", "dup exp"), ("errors", "errors"),
    ("divergences", "diverg"),
]


def register(subparsers) -> None:
    from pipelines.whatif.protocols import DEFAULT_ASSIGNORS

    p = subparsers.add_parser(
        "whatif",
        help="replay a group's real history under other assignors",
        description="Replay each group's real memberships under other assignors, generation by generation, "
                    "and compare moves, revocations, stop-the-world time, balance and duplicate exposure "
                    "with what actually happened.",
    )
    add_common_options(p)
    p.add_argument("--group", metavar="G", help="only this group id (default: every group)")
    p.add_argument("--cluster", metavar="C", help="only this cluster (default: every cluster)")
    p.add_argument("--assignors", metavar="A,B,...", default=",".join(DEFAULT_ASSIGNORS),
                   help=f"assignors to replay (default {','.join(DEFAULT_ASSIGNORS)}); the group's own is always added")
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")
    p.add_argument("--episodes", action="store_true", help="also print every replayed generation")
    p.add_argument("--write", action="store_true", help="also write whatif_episodes / whatif_summary to the lake")
    p.set_defaults(func=run)


def _assignors(text: str) -> list[str]:
    from pipelines.whatif.protocols import PROTOCOL_OF

    names = [a.strip() for a in text.split(",") if a.strip()]
    if not names:
        raise UsageError("--assignors is empty")
    unknown = [a for a in names if a not in PROTOCOL_OF]
    if unknown:
        raise UsageError(f"unknown assignor(s) {', '.join(unknown)}; known: {', '.join(PROTOCOL_OF)}")
    return names


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def run(args: argparse.Namespace) -> int:
    assignors = _assignors(args.assignors)
    if "://" not in args.lake and not os.path.isdir(args.lake):
        raise UsageError(f"no lake at {args.lake} (run `rebalance-audit ingest ...` first, or pass --lake)")
    from pyspark.sql import functions as F

    from pipelines.lake import Lake
    from pipelines.spark import get_spark
    from pipelines.whatif.spark_job import WhatifInputs, update_whatif, whatif_tables

    spark = get_spark(args.spark_master)
    lake = Lake(args.lake, spark=spark)
    if args.write:
        with lake.writer_lock(say=lambda text: print(f"rebalance-audit whatif: {text}", file=sys.stderr, flush=True)):
            update_whatif(lake, assignors)
    inp = WhatifInputs.from_lake(lake)
    for name in ("group_generations", "member_assignments", "target_assignments", "consumer_group_members"):
        df = getattr(inp, name)
        if df is None:
            continue
        if args.group:
            df = df.where(F.col("group_id") == args.group)
        if args.cluster:
            df = df.where(F.col("cluster") == args.cluster)
        setattr(inp, name, df)
    episodes, summary = whatif_tables(inp, assignors)
    rows = sorted((r.asDict() for r in summary.collect()),
                  key=lambda r: (r["cluster"], r["group_id"], r["incarnation"], r["segment"], r["assignor"] != "actual",
                                 r["assignor"]))
    if not rows:
        where = f"group {args.group!r}" if args.group else "any group"
        raise RuntimeError(f"no membership history for {where} in the lake at {args.lake}")
    eps = []
    if args.episodes:
        eps = sorted((r.asDict() for r in episodes.collect()),
                     key=lambda r: (r["cluster"], r["group_id"], r["incarnation"], r["segment"], r["assignor"], r["round"]))
    if args.format == "json":
        for r in rows:
            print(json.dumps({"record": "summary", **r}, default=str))
        for e in eps:
            print(json.dumps({"record": "episode", **e}, default=str))
        return 0
    _print_table(rows, eps)
    return 0


def _print_table(rows: list[dict], eps: list[dict]) -> None:
    out = sys.stdout
    current = None
    for r in rows:
        key = (r["cluster"], r["group_id"], r["incarnation"], r["segment"])
        if key != current:
            current = key
            # A group converted between protocols has a history per protocol segment.
            segment = f", protocol segment {r['segment']}" if r["segment"] else ""
            out.write(f"\n{r['cluster']} / {r['group_id']} (incarnation {r['incarnation']}{segment}, {r['group_kind']}, "
                      f"really {r['real_assignor'] or 'unknown'}, {r['steps']} generations)\n")
            if r.get("notes"):
                out.write(f"  notes: {r['notes']}\n")
            out.write("  " + "  ".join(f"{h:>{_w(k)}}" for k, h in COLUMNS) + "\n")
        out.write("  " + "  ".join(f"{_fmt(r.get(k)):>{_w(k)}}" for k, _ in COLUMNS) + "\n")
        if r.get("divergences"):
            for d in json.loads(r["divergence_list"])[:5]:
                out.write(f"      diverges at generation {d['generation']} ({d['phase']}): {d['detail'][:160]}\n")
    for e in eps:
        out.write(f"{e['group_id']} {e['assignor']:>18} gen {e['generation']:>4} {e['phase']:>9} members {e['members']} "
                  f"moved {e['moved']} revoked {e['revoked']} paused {e['paused']} dur {_fmt(e['duration_ms'])}ms "
                  f"balance {e['balance']} idle {e['idle_members']}\n")


def _w(key: str) -> int:
    return 18 if key == "assignor" else 11
