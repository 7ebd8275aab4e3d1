"""`rebalance-audit run`: materialize every asset, in this process, for what is in the lake.

Optionally ingests segment files (--segments) and server.log files (--logs), or live Kafka
(--bootstrap-servers / -X / --properties), first. Prints one line per table: rows this run
added, rows in the table, Delta version; then every failed quality check (quality/, one
per table) and the total. Runs the Dagster assets and asset checks with
`dagster.materialize` (no Dagster instance, daemon or webserver needed).

Exit 1 when a blocking check failed (the data of a table is wrong; Dagster then does not
build what depends on it); warnings alone exit 0.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from rebalance_audit.cli import UsageError, add_common_options, positive_float, positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run",
        help="materialize every asset (ingest, decode, history, detections) for what is in the lake",
        description=(
            "Materialize every rebalance-audit asset in-process: optionally ingest the given "
            "segment/log paths (or live Kafka) into bronze, then update every table downstream."
        ),
    )
    add_common_options(p)
    p.add_argument("--cluster", default="default", help="cluster name stored with ingested rows (default: default)")
    p.add_argument("--segments", nargs="+", default=[], metavar="PATH",
                   help="__consumer_offsets segment files or folders to ingest first")
    p.add_argument("--logs", nargs="+", default=[], metavar="PATH", help="server.log files or folders to ingest first")
    p.add_argument("--tz", default="UTC", help="time zone the logs were written in (default UTC)")
    p.add_argument("--bootstrap-servers", metavar="HOST:PORT,...", help="also ingest live __consumer_offsets from here")
    p.add_argument("-X", dest="props", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka property for live ingestion (repeatable)")
    p.add_argument("--properties", metavar="FILE", help="librdkafka properties file for live ingestion")
    p.add_argument("--timeout", type=positive_float, default=30.0, metavar="S",
                   help="live ingestion: give up when the cluster cannot be reached, or sends nothing, for S seconds "
                        "(default 30)")
    p.add_argument("--kafka-version", metavar="X.Y", help="Kafka version deciding ambiguous record layouts")
    p.add_argument("--broker-properties", metavar="FILE",
                   help="a broker's server.properties: the cluster's KIP-848 session timeout and heartbeat "
                        "interval (group.consumer.*), which bound duplicate windows; kept in the lake's "
                        "cluster_settings (Kafka's defaults, 45 s and 5 s, until given)")
    p.add_argument("--client-heartbeat-ms", type=positive_int, metavar="MS",
                   help="the classic consumers' heartbeat.interval.ms (a client setting no record holds), which "
                        "dates a crashed member's stop; kept in the lake's cluster_settings (the clients' default, "
                        "3000, until given)")
    p.add_argument("--skip-checks", action="store_true",
                   help="do not run the data-quality checks (faster; nothing then guards downstream tables)")
    p.add_argument("--timings", action="store_true",
                   help="print each step's wall time (assets and checks) on stderr, slowest first")
    p.set_defaults(func=run)


def build_resources(args: argparse.Namespace) -> dict:
    """Dagster resources from the command's options (the CLI is one more resource config)."""
    from assets.resources import KafkaResource, LakeResource, SourcesResource, SparkResource
    from pipelines.ingest.bronze import check_cluster
    from pipelines.ingest.kafka import parse_overrides

    try:
        check_cluster(args.cluster)
        props = parse_overrides(args.props)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    missing = [p for p in [*args.segments, *args.logs] if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")
    if args.logs:
        from pipelines.logs import TimestampParser

        try:
            TimestampParser(args.tz)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.properties and not Path(args.properties).is_file():
        raise UsageError(f"no such properties file: {args.properties}")
    if getattr(args, "broker_properties", None) and not Path(args.broker_properties).is_file():
        raise UsageError(f"no such broker properties file: {args.broker_properties}")
    bootstrap = args.bootstrap_servers or props.pop("bootstrap.servers", None)
    if (props or args.properties) and not bootstrap:
        from pipelines.ingest.kafka import read_properties

        bootstrap = read_properties(args.properties).get("bootstrap.servers") if args.properties else None
        if not bootstrap:
            raise UsageError("Kafka properties given but no bootstrap servers (--bootstrap-servers or -X bootstrap.servers=...)")
    return {
        "lake": LakeResource(root=args.lake),
        "spark": SparkResource(master=args.spark_master),
        "sources": SourcesResource(cluster=args.cluster, segment_paths=list(args.segments),
                                   log_paths=list(args.logs), log_tz=args.tz, kafka_version=args.kafka_version),
        "kafka": KafkaResource(bootstrap_servers=bootstrap, properties=props, properties_file=args.properties,
                               timeout_seconds=args.timeout),
    }


def run(args: argparse.Namespace) -> int:
    resources = build_resources(args)
    from assets.inprocess import blocked_message, check_summary, materialize_all, step_timings, summary_table

    lake = resources["lake"].lake()
    # The whole run writes as one: another run or ingestion of this lake waits for it.
    with lake.writer_lock(say=lambda text: print(f"rebalance-audit run: {text}", file=sys.stderr, flush=True)):
        if getattr(args, "broker_properties", None) or getattr(args, "client_heartbeat_ms", None):
            _store_cluster_settings(lake, args.cluster, args.broker_properties, args.client_heartbeat_ms)
        started = time.monotonic()
        checks = not getattr(args, "skip_checks", False)
        outcome = materialize_all(resources, log_level="DEBUG" if getattr(args, "debug", False) else "CRITICAL",
                                  checks=checks, progress=lambda line: print(f"rebalance-audit run: {line}",
                                                                             file=sys.stderr, flush=True))
    print(summary_table(outcome.tables))
    if checks:
        print("\n".join(check_summary(outcome)))
    if getattr(args, "timings", False):
        print(step_timings(outcome), file=sys.stderr)
    print(f"{len(outcome.tables)} tables materialized in {time.monotonic() - started:.1f}s; lake: {_display(args.lake)}",
          file=sys.stderr)
    if outcome.report:
        print(f"report: {outcome.report}")
    blocked = blocked_message(outcome)
    if blocked:
        # A finding about the data, not a crash: one line, no traceback even with --debug.
        print(f"rebalance-audit run: error: {blocked}", file=sys.stderr)
        return 1
    return 0


def _store_cluster_settings(lake, cluster: str, properties_path: str | None, client_heartbeat_ms: int | None) -> None:
    """The cluster's settings in the lake's cluster_settings, before anything is materialized."""
    from pipelines.gold import runner, settings

    text = Path(properties_path).read_text(errors="replace") if properties_path else None
    try:
        runner.give_cluster_settings(lake, cluster, text, client_heartbeat_ms)
    except settings.SettingsError as exc:
        raise UsageError(f"{properties_path}: {exc}") from None


def _display(root: str) -> str:
    return root if "://" in root else os.path.abspath(root)
