"""`rebalance-audit parse-logs PATH...`: coordinator lines of broker server.log files → JSON lines.

stdout: one JSON object per coordinator entry (an event, `unrecognized` with the raw text, or
`error` for input that could not be read), in file order. stderr: one summary line.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rebalance_audit.cli import UsageError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "parse-logs",
        help="parse group-coordinator lines of broker server.log files into JSON events",
        description=(
            "Read broker server.log files (and their rotations, gzipped or not; folders are "
            "searched recursively for server.log*) and print one JSON line per group-coordinator "
            "entry: the parsed event, or {\"event\": \"unrecognized\"} / {\"event\": \"error\"} "
            "with file and line. A summary goes to stderr."
        ),
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="server.log file or folder")
    p.add_argument("--tz", default="UTC",
                   help="time zone of the log timestamps, which print none (IANA name or +HH:MM; default UTC)")
    p.add_argument("--broker", action="append", default=[], metavar="ID=PATH",
                   help="broker id of the files under PATH (also reads PATH); lines that print their "
                        "broker id keep it")
    p.add_argument("--all-fields", action="store_true",
                   help="print every field, null ones included (default: omit nulls)")
    p.set_defaults(func=run)


def _parse_broker_args(values: list[str]) -> dict[Path, int]:
    out: dict[Path, int] = {}
    for v in values:
        bid, sep, path = v.partition("=")
        if not sep or not path or not bid.strip().lstrip("-").isdigit():
            raise UsageError(f"--broker expects ID=PATH, got {v!r}")
        out[Path(path)] = int(bid)
    return out


def run(args: argparse.Namespace) -> int:
    from pipelines.logs import ReadStats, parse_events, TimestampParser

    brokers = _parse_broker_args(args.broker)
    paths = [Path(p) for p in args.paths] + [p for p in brokers if p not in {Path(x) for x in args.paths}]
    if not paths:
        raise UsageError("give at least one PATH (or --broker ID=PATH)")
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")
    try:
        TimestampParser(args.tz)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc

    stats = ReadStats()
    counts = {"events": 0, "unrecognized": 0, "errors": 0}
    out = sys.stdout
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    for rec in parse_events(paths, tz=args.tz, brokers=brokers, stats=stats):
        kind = rec["event"]
        if kind == "unrecognized":
            counts["unrecognized"] += 1
        elif kind == "error":
            counts["errors"] += 1
        else:
            counts["events"] += 1
        if not args.all_fields:
            # The fixed keys (docs/logs.md) stay even when null, so every line has them.
            rec = {k: v for k, v in rec.items()
                   if v is not None or k in ("event", "ts", "broker", "group_id", "file", "line")}
        out.write(dumps(rec))
        out.write("\n")
    out.flush()
    print(
        f"parse-logs: {stats.files} files, {stats.lines_read} lines read, "
        f"{stats.coordinator_lines} coordinator lines, {counts['events']} events, "
        f"{counts['unrecognized']} unrecognized, {counts['errors']} errors",
        file=sys.stderr,
    )
    return 0
