"""`rebalance-audit simulate --out DIR`: what a Kafka cluster's group coordinators would write
for N simulated consumer groups (segment files, server.log, ground truth). See docs/simulator.md."""
from __future__ import annotations

import argparse
import json
import os
import sys

from rebalance_audit.cli import UsageError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="write realistic __consumer_offsets segments, server.log and ground truth for simulated groups",
        description=(
            "Simulate consumer groups on a Kafka cluster and write what the brokers would: "
            "DIR/broker-<id>/__consumer_offsets-N/*.log, DIR/broker-<id>/server.log, and the ground "
            "truth the simulator knows in DIR/truth/*.jsonl (groups, generations, episodes, "
            "re-consumed offset ranges, KIP-848 epochs) plus truth/summary.json. Same --seed, same bytes."
        ),
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (must be empty or absent)")
    p.add_argument("--groups", type=int, default=10, help="number of consumer groups (default 10)")
    p.add_argument("--minutes", type=float, default=10.0, help="simulated time span (default 10)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--kafka-version", default="3.9",
                   help="release to imitate: 0.9, 0.10, 2.1-2.8, 3.0-3.9 (Scala coordinator), "
                        "3.9-new (3.9 with the Java coordinator), 4.0 (default 3.9)")
    p.add_argument("--brokers", type=int, default=1, help="brokers; partition N is led by broker N%%B+1")
    p.add_argument("--replication-factor", type=int, default=1, help="copies of each partition (default 1)")
    p.add_argument("--offsets-partitions", type=int, default=50, help="offsets.topic.num.partitions (50)")
    p.add_argument("--segment-bytes", type=int, default=104857600, help="roll segments at this size")
    p.add_argument("--compression", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                   help="offsets.topic.compression.codec")
    p.add_argument("--partitions", type=int, default=8, dest="partitions_per_topic",
                   help="partitions per topic (default 8)")
    p.add_argument("--topics", type=int, default=1, dest="topics_per_group", help="topics per group (default 1)")
    p.add_argument("--rate", type=float, default=20.0, dest="messages_per_s",
                   help="messages per second per partition (default 20)")
    p.add_argument("--commit-interval-ms", type=int, default=5000, help="auto.commit.interval.ms (5000)")
    p.add_argument("--min-members", type=int, default=2)
    p.add_argument("--max-members", type=int, default=6)
    p.add_argument("--session-timeout-ms", type=int, default=10000)
    p.add_argument("--max-poll-interval-ms", type=int, default=30000)
    p.add_argument("--churn", type=float, default=0.5, dest="churn_per_minute",
                   help="membership events per group per minute (default 0.5)")
    p.add_argument("--assignors", default="range,roundrobin,cooperative-sticky",
                   help="classic assignors, given to groups in turn")
    p.add_argument("--static-fraction", type=float, default=0.2)
    p.add_argument("--kip848-fraction", type=float, default=0.0,
                   help="share of groups on group.protocol=consumer (3.9-new / 4.0 only)")
    p.add_argument("--transactional-fraction", type=float, default=0.0,
                   help="share of groups committing offsets in transactions")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from simulator import ConfigError, SimConfig, simulate

    if os.path.isdir(args.out) and os.listdir(args.out):
        raise UsageError(f"--out {args.out} is not empty (the simulator never overwrites)")
    for name in ("static_fraction", "kip848_fraction", "transactional_fraction"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            raise UsageError(f"--{name.replace('_', '-')} must be between 0 and 1")
    cfg = SimConfig(
        out=args.out, groups=args.groups, minutes=args.minutes, seed=args.seed, kafka_version=args.kafka_version,
        brokers=args.brokers, replication_factor=args.replication_factor, offsets_partitions=args.offsets_partitions,
        segment_bytes=args.segment_bytes, compression=args.compression,
        topics_per_group=args.topics_per_group, partitions_per_topic=args.partitions_per_topic,
        messages_per_s=args.messages_per_s, commit_interval_ms=args.commit_interval_ms,
        min_members=args.min_members, max_members=args.max_members, session_timeout_ms=args.session_timeout_ms,
        max_poll_interval_ms=args.max_poll_interval_ms, churn_per_minute=args.churn_per_minute,
        assignors=tuple(a.strip() for a in args.assignors.split(",") if a.strip()),
        static_fraction=args.static_fraction, kip848_fraction=args.kip848_fraction,
        transactional_fraction=args.transactional_fraction)
    try:
        cfg.validate()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    summary = simulate(cfg)
    rec = summary["records"]
    print(json.dumps({"out": args.out, "groups": summary["groups"], "records": rec["records"],
                      "commits": rec["commits"], "generations": summary["generations"],
                      "episodes": summary["episodes"], "log_lines": rec["lines"],
                      "reconsumed_records": summary["reconsumed_records"]}), file=sys.stdout)
    return 0
