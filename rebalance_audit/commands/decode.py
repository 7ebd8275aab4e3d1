"""`rebalance-audit decode PATH...`: `__consumer_offsets` segment files to JSON lines.

One line per record on stdout (see pipelines/segments/jsonlines.py for the three line
shapes: record, empty batch, error). Records that cannot be read or decoded become
`{"error": ...}` lines and every other record is still decoded; the exit code is 0 with a
count of errors on stderr, or 1 with `--strict` when there was any error.
"""
from __future__ import annotations

import argparse
import re
import sys

from rebalance_audit.cli import UsageError

_RELEASE = re.compile(r"^\d+\.\d+$")
_FLUSH_EVERY = 2000


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "decode",
        help="decode __consumer_offsets segment files or folders to JSON lines",
        description=(
            "Decode __consumer_offsets .log segment files to JSON lines on stdout, one per "
            "record. PATH may be a .log file, a __consumer_offsets-N folder, a broker's log "
            "dir, or a folder holding several brokers' log dirs (each broker is labelled by "
            "its folder). Unreadable batches and undecodable records come out as "
            '{"error": ...} lines; everything else is still decoded.'
        ),
        epilog=(
            "Line shapes: records have partition, offset, timestamp, key {type, data}, "
            "value {version, data} or null (tombstone) and batch facts; control records "
            "(transaction markers) have control=true, control_type and marker; "
            "empty_batch=true lines are empty batches left by compaction; error lines have "
            "error, partition, offset, file. Exit 0 (errors counted on stderr), 1 with "
            "--strict if any error, 2 on bad usage."
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="segment file(s) or folder(s)")
    p.add_argument(
        "--kafka-version",
        metavar="X.Y",
        help="Kafka release that wrote the records, for layouts that changed without a "
        "version bump (without it such records are error lines, never a guess)",
    )
    p.add_argument("--strict", action="store_true", help="exit 1 if any record could not be read or decoded")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.segments import discover, iter_segment_records
    from pipelines.segments.jsonlines import LineEncoder
    from pipelines.segments.paths import SegmentPathError

    if args.kafka_version is not None and not _RELEASE.match(args.kafka_version):
        raise UsageError(f"--kafka-version must look like 3.9 or 4.0, not {args.kafka_version!r}")
    try:
        segments = discover(args.paths)
    except SegmentPathError as exc:
        raise UsageError(str(exc)) from None

    progress = sys.stderr.isatty()
    encode = LineEncoder(args.kafka_version).encode
    out = sys.stdout
    lines: list[str] = []
    records = errors = empty = 0
    for i, seg in enumerate(segments, 1):
        if progress:
            print(f"\rdecoding {i}/{len(segments)}: {seg.path} ", end="", file=sys.stderr, flush=True)
        for item in iter_segment_records(seg.path, partition=seg.partition, broker=seg.broker):
            line, kind = encode(item)
            if kind == "record":
                records += 1
            elif kind == "error":
                errors += 1
            else:
                empty += 1
            lines.append(line)
            if len(lines) >= _FLUSH_EVERY:
                out.write("\n".join(lines) + "\n")
                lines.clear()
    if lines:
        out.write("\n".join(lines) + "\n")
    out.flush()
    if progress:
        print("\r\033[K", end="", file=sys.stderr)
    summary = (
        f"rebalance-audit decode: {records} records, {empty} empty batches, {errors} errors "
        f"in {len(segments)} segment files"
    )
    if errors:
        summary += ' (see the {"error": ...} lines)'
    print(summary, file=sys.stderr)
    return 1 if (args.strict and errors) else 0
