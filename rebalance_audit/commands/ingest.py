"""`rebalance-audit ingest kafka|segments|logs`: append new raw data to the lake's bronze tables.

Every form is resumable and exactly once: rows are keyed by their source position, so a
re-run (or a run after a crash) stores nothing twice; live positions are committed with the
rows. Prints what it loaded on stdout: rows, offset ranges per partition, quarantined inputs.
No Spark is started.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pipelines.segments.parallel import PARALLEL_FROM
from rebalance_audit.cli import UsageError, add_common_options, positive_float, positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ingest",
        help="append new raw data (live __consumer_offsets, segment files, server.log) to the lake",
        description="Append new raw data to the lake's bronze tables; resumable, exactly once.",
    )
    sub = p.add_subparsers(dest="source", metavar="SOURCE")
    sub.required = True

    k = sub.add_parser(
        "kafka",
        help="read __consumer_offsets live from where the last run stopped",
        description=(
            "Read every partition of __consumer_offsets with librdkafka (assign, read_committed) "
            "from the positions stored in the lake, up to the current end or the given bounds, "
            "and sample the log-end offsets of the partitions the groups commit on."
        ),
    )
    add_common_options(k)
    _cluster(k, identified=True)
    k.add_argument("-X", dest="props", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka property (repeatable), e.g. -X security.protocol=SASL_SSL")
    k.add_argument("--properties", metavar="FILE", help="librdkafka properties file (key=value lines)")
    k.add_argument("--bootstrap-servers", metavar="HOST:PORT,...", help="same as -X bootstrap.servers=...")
    k.add_argument("--max-records", type=positive_int, metavar="N", help="stop after N records")
    k.add_argument("--max-seconds", type=positive_float, metavar="S", help="stop after S seconds")
    k.add_argument("--timeout", type=positive_float, default=30.0, metavar="S",
                   help="give up when the cluster cannot be reached, or sends nothing, for S seconds (default 30)")
    k.add_argument("--commit-every", type=positive_int, default=50_000, metavar="N",
                   help="records per Delta commit (default 50000)")
    k.add_argument("--no-end-offsets", action="store_true", help="do not sample partition end offsets")
    k.set_defaults(func=run_kafka, exit_at_end=True)

    s = sub.add_parser(
        "segments",
        help="load __consumer_offsets segment files (one or many brokers)",
        description=(
            "Load every record (transaction markers included) of __consumer_offsets .log segments: "
            "files, partition folders, broker log dirs, or a folder of several brokers' log dirs. "
            "A record seen on several replicas is stored once."
        ),
    )
    add_common_options(s)
    _cluster(s, identified=True)
    s.add_argument("paths", nargs="+", metavar="PATH")
    s.add_argument("--jobs", type=positive_int, metavar="N",
                   help="processes reading segment files at once (default: one per CPU when the files hold "
                        f"{PARALLEL_FROM >> 20} MiB or more, else 1); the tables are the same either way")
    s.set_defaults(func=run_segments, exit_at_end=True)

    g = sub.add_parser(
        "logs",
        help="load group-coordinator entries of broker server.log files",
        description="Load the group-coordinator entries of server.log files (rotated, gzipped, several brokers).",
    )
    add_common_options(g)
    _cluster(g)
    g.add_argument("paths", nargs="*", metavar="PATH")
    g.add_argument("--tz", default="UTC", help="time zone the logs were written in (IANA name or +HH:MM; default UTC)")
    g.add_argument("--broker", action="append", default=[], metavar="ID=PATH",
                   help="broker id of the files under PATH (also reads PATH)")
    g.set_defaults(func=run_logs, exit_at_end=True)


def _cluster(p: argparse.ArgumentParser, identified: bool = False) -> None:
    if identified:
        p.add_argument("--cluster", help="cluster name stored with every row (default: the name this Kafka "
                                         "cluster was loaded under before, by its cluster id, else default)")
    else:
        p.add_argument("--cluster", default="default", help="cluster name stored with every row (default: default)")


def _lake(args):
    from pipelines.ingest.bronze import check_cluster
    from pipelines.lake import Lake

    try:
        if args.cluster is not None:
            check_cluster(args.cluster)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return Lake(args.lake)


def _writing(lake):
    """The lake's writer lock for the ingestion: another writer of this lake waits for it."""
    return lake.writer_lock(say=lambda text: print(f"rebalance-audit ingest: {text}", file=sys.stderr, flush=True))


def _progress(summary) -> None:
    if sys.stderr.isatty():
        print(f"\r  {summary.seen} records read, {summary.inserted} new", end="", file=sys.stderr, flush=True)


def _print(what: str, summary, seconds: float, table: str = "offsets_records") -> None:
    from pipelines.ingest.bronze import format_ranges

    if sys.stderr.isatty():
        print(file=sys.stderr)
    rate = summary.seen / seconds if seconds > 0 else 0.0
    print(f"{what}: {summary.seen} read, {summary.inserted} new rows in {table}, "
          f"{summary.seen - summary.inserted} already present; "
          f"{summary.quarantined_seen} quarantined ({summary.quarantined} new); "
          f"{summary.commits} commits; {seconds:.1f}s ({rate:,.0f} rows/s)")
    for (cluster, partition), rs in summary.loaded_ranges().items():
        n = sum(b - a + 1 for a, b in rs)
        print(f"  {cluster} partition {partition}: {n} new, offsets {format_ranges(rs)}")


def _print_identity(summary) -> None:
    """The cluster name the rows went under, the identity that chose it, and any conflict."""
    x = summary.extra
    for warning in x.get("identity_warnings", []):
        print(f"rebalance-audit ingest: warning: {warning}", file=sys.stderr)
    if x.get("identity_failed"):
        print(f"rebalance-audit ingest: warning: the brokers did not say which cluster they are "
              f"({x['identity_failed']}); the name is not checked", file=sys.stderr)
    found = x.get("identity", [])
    print(f"cluster {x['cluster']}" + (f" ({', '.join(found)})" if found else ""))


def run_segments(args: argparse.Namespace) -> int:
    from pipelines.ingest import identity
    from pipelines.ingest.segments import ingest_segments
    from pipelines.segments import SegmentPathError

    lake = _lake(args)
    t = time.monotonic()
    try:
        with _writing(lake):
            summary = ingest_segments(lake, args.paths, cluster=args.cluster, progress=_progress, jobs=args.jobs)
    except SegmentPathError as exc:
        raise UsageError(str(exc)) from None
    except identity.IdentityError as exc:
        raise UsageError(str(exc)) from None
    _print_identity(summary)
    _print("segments", summary, time.monotonic() - t)
    if summary.extra.get("empty_batches"):
        print(f"  {summary.extra['empty_batches']} empty batches (compaction leftovers, no records)")
    return 0


def run_logs(args: argparse.Namespace) -> int:
    from pipelines.gold.runner import fill_from_broker_configs
    from pipelines.ingest.logs import ingest_logs
    from pipelines.logs import TimestampParser

    brokers: dict[str, int] = {}
    for v in args.broker:
        bid, sep, path = v.partition("=")
        if not sep or not path or not bid.strip().isdigit():
            raise UsageError(f"--broker expects ID=PATH, got {v!r}")
        brokers[path] = int(bid)
    paths = list(args.paths) + [p for p in brokers if p not in args.paths]
    if not paths:
        raise UsageError("give at least one PATH (or --broker ID=PATH)")
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")
    try:
        TimestampParser(args.tz)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    lake = _lake(args)
    t = time.monotonic()
    with _writing(lake):
        summary = ingest_logs(lake, paths, cluster=args.cluster, tz=args.tz, brokers=brokers)
        filled = fill_from_broker_configs(lake, args.cluster, summary.extra.get("broker_configs", {}))
    seconds = time.monotonic() - t
    rate = summary.seen / seconds if seconds > 0 else 0.0
    print(f"logs: {summary.extra.get('files', 0)} files, {summary.extra.get('lines_read', 0)} lines, "
          f"{summary.seen} coordinator entries, {summary.inserted} new rows in coordinator_log_lines, "
          f"{summary.seen - summary.inserted} already present; {summary.quarantined_seen} quarantined "
          f"({summary.quarantined} new); {seconds:.1f}s ({rate:,.0f} entries/s)")
    for column, value in filled.items():
        print(f"  cluster settings: {column} = {value} (from the brokers' logged configuration)")
    return 0


def run_kafka(args: argparse.Namespace) -> int:
    from pipelines.ingest import identity
    from pipelines.ingest.kafka import IngestError, ingest_kafka, parse_overrides, read_properties

    config: dict[str, str] = {}
    try:
        if args.properties:
            config.update(read_properties(args.properties))
        config.update(parse_overrides(args.props))
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if args.bootstrap_servers:
        config["bootstrap.servers"] = args.bootstrap_servers
    lake = _lake(args)
    t = time.monotonic()
    try:
        with _writing(lake):
            summary = ingest_kafka(
                lake, config, cluster=args.cluster, max_records=args.max_records, max_seconds=args.max_seconds,
                timeout=args.timeout, commit_every=args.commit_every, sample_end_offsets=not args.no_end_offsets,
                progress=_progress,
            )
    except IngestError as exc:
        raise RuntimeError(str(exc)) from None
    except identity.IdentityError as exc:
        raise UsageError(str(exc)) from None
    _print_identity(summary)
    _print("kafka", summary, time.monotonic() - t)
    x = summary.extra
    state = "caught up" if x.get("caught_up") else "stopped at a bound (run again to continue)"
    print(f"  {x.get('partitions', 0)} partitions, {state}")
    if x.get("aborted_records"):
        print(f"  {x['aborted_records']} records of aborted transactions (read back where read_committed skips; "
              f"stored with aborted=true, never taken as commits)")
    for partition, (stable, end) in x.get("held_by_open_transactions", {}).items():
        print(f"  partition {partition}: an open transaction holds its last stable offset at {stable} (log end "
              f"{end}); what follows is read once it commits or aborts (if it never does, it is hanging: "
              f"kafka-transactions --find-hanging)")
    if "end_offsets_sampled" in x:
        print(f"  end offsets: {x['end_offsets_sampled']} partitions sampled into partition_end_offsets"
              + (f", {x['end_offsets_failed']} failed" if x.get("end_offsets_failed") else ""))
    return 0
