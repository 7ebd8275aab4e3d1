"""``python -m pipelines.testbed``: start a real Kafka 0.9 broker, run a scenario, report.

    python -m pipelines.testbed --workdir ./testbed-run            # default scenario, then stop
    python -m pipelines.testbed --workdir ./testbed-run --keep-running   # leave the broker up (^C stops)
    python -m pipelines.testbed --scenario flapping

Prints one JSON object: the bootstrap servers, the broker's data dir (the
``__consumer_offsets-N`` folders) and server.log, the ground-truth folder, timings.
Exit codes: 0 ok, 1 failure (one-line error on stderr), 2 bad usage.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from .broker import BrokerError, KafkaBroker
from .kafka_home import TestbedUnavailable
from .scenario import SCENARIOS, run_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.testbed", description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", required=True, help="folder for the broker's data, logs and ground truth")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="default")
    parser.add_argument("--group", default="orders-processor", help="consumer group id")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--keep-running", action="store_true", help="keep the broker up until interrupted")
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.debug else logging.WARNING, stream=sys.stderr)
    try:
        broker = KafkaBroker(args.workdir, install=True)
        with broker:
            t0 = time.monotonic()
            result = run_scenario(broker, SCENARIOS[args.scenario](topic=args.topic), group_id=args.group)
            summary = {
                "bootstrap_servers": broker.bootstrap_servers,
                "client_properties": broker.client_config(),
                "data_dir": str(broker.data_dir),
                "server_log": str(broker.server_log),
                "ground_truth": str(result.workdir),
                "group_id": result.group_id,
                "topic": result.topic,
                "members": {n: m.fate for n, m in result.members.items()},
                "produced": result.produced,
                "broker_start_s": round(broker.startup_seconds or 0, 1),
                "scenario_s": round(time.monotonic() - t0, 1),
            }
            print(json.dumps(summary, indent=2), flush=True)
            if args.keep_running:
                print("broker running; ^C stops it", file=sys.stderr, flush=True)
                try:
                    while broker.running:
                        time.sleep(1)
                except KeyboardInterrupt:
                    pass
    except KeyboardInterrupt:
        print("testbed: interrupted; members and broker stopped", file=sys.stderr)
        return 130
    except (BrokerError, TestbedUnavailable, OSError) as exc:
        if args.debug:
            raise
        print(f"testbed: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
