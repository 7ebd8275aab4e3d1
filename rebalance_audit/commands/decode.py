"""`rebalance-audit decode PATH...`: `__consumer_offsets` segment files to JSON lines.

One line per record on stdout (see pipelines/segments/jsonlines.py for the three line
shapes: record, empty batch, error). Records that cannot be read or decoded become
`{"error": ...}` lines and every other record is still decoded; the exit code is 0 with a
count of errors on stderr, or 1 with `--strict` when there was any error.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from collections import Counter

from pipelines.segments.parallel import PARALLEL_FROM
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
    p.add_argument("--jobs", type=int, metavar="N",
                   help="processes decoding segment files at once (default: one per CPU when the files hold "
                        f"{PARALLEL_FROM >> 20} MiB or more, else 1); the output is the same, in the same order")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.segments import discover
    from pipelines.segments.parallel import default_jobs
    from pipelines.segments.paths import SegmentPathError

    if args.kafka_version is not None and not _RELEASE.match(args.kafka_version):
        raise UsageError(f"--kafka-version must look like 3.9 or 4.0, not {args.kafka_version!r}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, not {args.jobs}")
    try:
        segments = discover(args.paths)
    except SegmentPathError as exc:
        raise UsageError(str(exc)) from None

    jobs = args.jobs or default_jobs(segments)
    progress = sys.stderr.isatty()
    totals: Counter[str] = Counter()
    decoded = _decode_in_parallel(segments, args.kafka_version, jobs) if jobs > 1 and len(segments) > 1 \
        else (_decode_here(seg, args.kafka_version) for seg in segments)
    for i, (seg, counts) in enumerate(decoded, 1):
        totals.update(counts)
        if progress:
            print(f"\rdecoded {i}/{len(segments)}: {seg.path} ", end="", file=sys.stderr, flush=True)
    sys.stdout.flush()
    if progress:
        print("\r\033[K", end="", file=sys.stderr)
    summary = (
        f"rebalance-audit decode: {totals['record']} records, {totals['empty_batch']} empty batches, "
        f"{totals['error']} errors in {len(segments)} segment files"
    )
    if totals["error"]:
        summary += ' (see the {"error": ...} lines)'
    print(summary, file=sys.stderr)
    return 1 if (args.strict and totals["error"]) else 0


def _write_lines(seg, kafka_version: str | None, out) -> Counter:
    """Every line of one segment file to the text stream `out`; counts per line kind."""
    from pipelines.segments.jsonlines import LineEncoder

    counts: Counter = Counter()
    pieces: list[str] = []
    lines = 0
    for text, kind, n in LineEncoder(kafka_version).segment(seg.path, partition=seg.partition, broker=seg.broker):
        counts[kind] += n
        pieces.append(text)
        lines += n
        if lines >= _FLUSH_EVERY:
            out.write("".join(pieces))
            pieces.clear()
            lines = 0
    if pieces:
        out.write("".join(pieces))
    return counts


def _decode_here(seg, kafka_version: str | None):
    return seg, _write_lines(seg, kafka_version, sys.stdout)


def _decode_to_file(seg, kafka_version: str | None, path: str) -> Counter:
    """A worker's task: one segment file's lines into `path` (ASCII: `decode` escapes the rest)."""
    with open(path, "w", encoding="ascii", newline="\n") as out:
        return _write_lines(seg, kafka_version, out)


def _decode_in_parallel(segments, kafka_version: str | None, jobs: int):
    """(segment, counts) in `segments`' order, each segment's lines written to stdout first.

    Each worker decodes whole segment files into a temporary file, which the parent copies
    to stdout in order: the output is byte for byte the sequential one, and memory stays
    bounded by the files in flight, not by the output's size."""
    from pipelines.segments.parallel import ordered_map

    with tempfile.TemporaryDirectory(prefix="rebalance-audit-decode-") as tmp:
        tasks = ((seg, kafka_version, os.path.join(tmp, f"{i}.jsonl")) for i, seg in enumerate(segments))
        out = sys.stdout
        for (seg, _, path), counts in ordered_map(_decode_to_file, tasks, jobs):
            out.flush()
            with open(path, "rb") as f:
                if hasattr(out, "buffer"):
                    shutil.copyfileobj(f, out.buffer, 1 << 20)
                else:  # a text stream without bytes underneath (an in-process caller's StringIO)
                    out.write(f.read().decode("ascii"))
            os.unlink(path)
            yield seg, counts
