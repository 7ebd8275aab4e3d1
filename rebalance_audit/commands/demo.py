"""`rebalance-audit demo`: the whole job, end to end, on a real local Kafka.

1. start a Kafka 0.9.0.1 broker with ZooKeeper on loopback (pipelines.testbed),
2. run a short scripted consumer group against it: members join, one leaves cleanly, one
   is killed, the survivor drains the topic (real librdkafka consumers, one process each),
3. materialize every asset: live `__consumer_offsets` ingestion with the broker's
   librdkafka settings, the broker's server.log, then everything downstream, and run
   every table's data-quality check (a failed blocking check exits 1),
4. stop the broker (or keep it, with --keep-broker, until Ctrl-C), and print where the
   tables are and a first query to try.

Each demo run stores its rows under its own cluster name (demo-<UTC time>): a new broker
restarts `__consumer_offsets` at offset 0, and bronze rows are keyed by (cluster,
partition, offset), so reusing a name would make the new records look already loaded.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import sys
import time

from rebalance_audit.cli import add_common_options

GROUP_ID = "orders-processor"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="run the whole job on a local Kafka 0.9 broker and print where the results are",
        description=(
            "Start a local Kafka 0.9.0.1 broker, run a scripted consumer group on it (join, leave, "
            "crash), ingest what the broker wrote (live __consumer_offsets and server.log), "
            "materialize every table, stop the broker and print where the tables are."
        ),
    )
    add_common_options(p)
    p.add_argument("--keep-broker", action="store_true",
                   help="leave the broker running after the run (until Ctrl-C) to query it yourself")
    p.add_argument("--workdir", metavar="DIR",
                   help="broker data, logs and scenario ground truth here (default: a temporary folder, removed)")
    p.set_defaults(func=run)


def _say(text: str) -> None:
    print(f"[demo] {text}", file=sys.stderr, flush=True)


def _local_offset() -> str:
    """The machine's UTC offset as +HH:MM: the broker's log4j writes local time."""
    off = dt.datetime.now().astimezone().utcoffset() or dt.timedelta(0)
    minutes = int(off.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def run(args: argparse.Namespace) -> int:
    from assets.inprocess import blocked_message, check_summary, materialize_all
    from assets.resources import KafkaResource, LakeResource, SourcesResource, SparkResource
    from pipelines.testbed import KafkaBroker, TestbedUnavailable
    from pipelines.testbed.scenario import default_scenario, run_scenario

    started = time.monotonic()
    cluster = "demo-" + dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    try:
        broker = KafkaBroker(args.workdir, install=True, keep_workdir=bool(args.workdir or args.keep_broker))
    except TestbedUnavailable as exc:
        raise RuntimeError(f"cannot start the local Kafka broker: {exc}") from None
    _say(f"starting Kafka 0.9.0.1 + ZooKeeper (workdir {broker.workdir})")
    try:
        broker.start()
        _say(f"broker up at {broker.bootstrap_servers} in {broker.startup_seconds:.1f}s; "
             f"running the consumer scenario (group {GROUP_ID}, ~40s)")
        scenario = run_scenario(broker, default_scenario(), group_id=GROUP_ID)
        _say(f"scenario done: {len(scenario.members)} members; ingesting and materializing every table")
        client = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in broker.client_config().items()}
        bootstrap = client.pop("bootstrap.servers")
        resources = {
            "lake": LakeResource(root=args.lake),
            "spark": SparkResource(master=args.spark_master),
            "sources": SourcesResource(cluster=cluster, log_paths=[str(broker.log_dir)], log_tz=_local_offset()),
            "kafka": KafkaResource(bootstrap_servers=bootstrap, properties=client),
        }
        outcomes = materialize_all(resources, log_level="DEBUG" if args.debug else "CRITICAL")
        if args.keep_broker:
            _say(f"broker left running at {broker.bootstrap_servers} (librdkafka: "
                 f"api.version.request=false broker.version.fallback=0.9.0.1); Ctrl-C stops it")
    except BaseException:
        broker.stop()
        raise
    try:
        _print_result(args, cluster, outcomes, time.monotonic() - started)
        print("\n".join(check_summary(outcomes)))
        blocked = blocked_message(outcomes)
        if blocked:
            print(f"rebalance-audit demo: error: {blocked}", file=sys.stderr)
        if args.keep_broker:
            try:
                while broker.running:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
    finally:
        broker.stop()
    return 1 if blocked else 0


def _print_result(args, cluster: str, outcomes, seconds: float) -> None:
    lake = args.lake if "://" in args.lake else os.path.abspath(args.lake)
    print(f"lake: {lake}")
    print(f"cluster: {cluster}  (group {GROUP_ID})")
    width = max(len(o.asset) for o in outcomes)
    for o in outcomes:
        rows = "-" if o.rows_total is None else f"{o.rows_total:,}"
        print(f"  {o.asset.ljust(width)}  {rows:>9} rows  {o.uri or ''}")
    query = f"SELECT group_id, count(*) FROM group_generations WHERE cluster = '{cluster}' GROUP BY 1"
    print("first query to try:")
    # Cluster names are letters, digits, '.', '_' and '-' only: safe inside double quotes.
    print(f'  rebalance-audit sql "{query}" --lake {shlex.quote(lake)}')
    print(f"demo finished in {seconds:.0f}s", file=sys.stderr)
