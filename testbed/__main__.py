"""``python -m testbed``: start a real Kafka 4.x cluster, run scenarios, report.

    python -m testbed --workdir ./testbed-run                  # classic-range, then stop
    python -m testbed --workdir ./testbed-run --scenario kip848-uniform --scenario flapping
    python -m testbed --workdir ./testbed-run --brokers 3 --keep-running   # ^C stops it
    python -m testbed --workdir ./testbed-run --brokers 3 --clock-skew 1=15 --clock-skew 3=-15

Scenarios given together run at the same time, each with its own group and topic. Prints
one JSON object: the bootstrap servers, each broker's data dir (the
``__consumer_offsets-N`` folders) and log dir (``server.log`` and its hourly rotations:
give the folder to ``ingest logs``), the ground-truth folders, timings.
Exit codes: 0 ok, 1 failure (one-line error on stderr), 2 bad usage.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Callable, Iterable, cast

from .broker import BrokerError, KafkaCluster
from .kafka_home import TestbedUnavailable
from .scenario import SCENARIOS, Step, run_together


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed", description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", required=True, help="folder for the broker's data, logs and ground truth")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append",
                        help="scenario to run (repeat to run several at once; default classic-range)")
    parser.add_argument("--brokers", type=int, default=1, help="brokers in the cluster (default 1)")
    parser.add_argument("--offsets-partitions", type=int, default=50,
                        help="partitions of __consumer_offsets (default Kafka's 50)")
    parser.add_argument("--clock-skew", action="append", default=[], metavar="NODE=SECONDS", type=_skew,
                        help="run that node's wall clock SECONDS ahead (negative: behind), libfaketime in its "
                             "JVM alone (repeat per node)")
    parser.add_argument("--keep-running", action="store_true", help="keep the broker up until interrupted")
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args(argv)
    skews = dict(args.clock_skew)
    if any(not 1 <= node <= args.brokers for node in skews):
        parser.error(f"--clock-skew: nodes are 1..{args.brokers}")
    logging.basicConfig(level=logging.INFO if args.debug else logging.WARNING, stream=sys.stderr)
    names = args.scenario or ["classic-range"]
    # SCENARIOS mixes functions and lambdas, which mypy infers as plain `function`: every
    # entry takes keyword arguments and returns the scenario's steps.
    factories = cast(dict[str, Callable[..., Iterable[Step]]], SCENARIOS)
    try:
        cluster = KafkaCluster(args.workdir, brokers=args.brokers, offsets_partitions=args.offsets_partitions,
                               install=True, clock_skew_s=skews)
        with cluster:
            t0 = time.monotonic()
            results = run_together(cluster, {n: factories[n](topic=f"{n}-in") for n in names})
            summary = {
                "bootstrap_servers": cluster.bootstrap_servers,
                "kafka_version": cluster.kafka_version,
                "data_dirs": [str(d) for d in cluster.data_dirs],
                "log_dirs": [str(d) for d in cluster.log_dirs],
                "scenarios": {name: {"group_id": r.group_id, "topic": r.topic, "ground_truth": str(r.workdir),
                                     "members": {n: m.fate for n, m in r.members.items()}, "produced": r.produced}
                              for name, r in results.items()},
                "cluster_start_s": round(cluster.startup_seconds or 0, 1),
                "scenarios_s": round(time.monotonic() - t0, 1),
            }
            print(json.dumps(summary, indent=2), flush=True)
            if args.keep_running:
                print("cluster running; ^C stops it", file=sys.stderr, flush=True)
                try:
                    while cluster.running:
                        time.sleep(1)
                except KeyboardInterrupt:
                    pass
    except KeyboardInterrupt:
        print("testbed: interrupted; members and cluster stopped", file=sys.stderr)
        return 130
    except (BrokerError, TestbedUnavailable, OSError) as exc:
        if args.debug:
            raise
        print(f"testbed: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


def _skew(text: str) -> tuple[int, float]:
    node, sep, seconds = text.partition("=")
    try:
        if not sep:
            raise ValueError
        return int(node), float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not NODE=SECONDS: {text!r}") from None


if __name__ == "__main__":
    sys.exit(main())
