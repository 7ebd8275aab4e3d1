"""Throughput of coordinator-log parsing over a large multi-broker log folder.

Builds a folder of about --size-mb MB (default 1024) out of the recordings' real server.logs:
each copy is shifted to its own day (the date in every timestamp is rewritten), interleaved
with extra non-coordinator lines (request-handler and replica-fetcher noise plus a stack
trace, as a busy broker prints), and spread over three brokers as hourly rotations. Then it
runs the same path as `rebalance-audit parse-logs` (read + filter + parse, optionally JSON
encoding) and prints lines/s and MB/s.

    .venv/bin/python bench/bench_parse_logs.py --size-mb 100
    .venv/bin/python bench/bench_parse_logs.py            # 1 GB
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.logs import ReadStats, parse_events  # noqa: E402

SHARED = Path(os.environ.get("REBALANCE_AUDIT_SHARED", REPO.parent / "shared"))
RECORDED_DATE = b"2026-11-22"

NOISE = (
    b"[2026-11-22 08:30:00,000] INFO [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Node 2 was unable to "
    b"process the fetch request with (sessionId=1928, epoch=7): FETCH_SESSION_ID_NOT_FOUND. "
    b"(org.apache.kafka.clients.FetchSessionHandler)\n"
    b"[2026-11-22 08:30:00,001] INFO [Log partition=orders-3, dir=/var/lib/kafka] Rolled new log segment at offset "
    b"912834 in 1 ms. (kafka.log.LocalLog)\n"
    b"[2026-11-22 08:30:00,002] WARN [SocketServer listenerType=BROKER, nodeId=1] Unexpected error from /10.0.0.9 "
    b"(channelId=10.0.0.1:9092-10.0.0.9:51234-7); closing connection (org.apache.kafka.common.network.Selector)\n"
    b"org.apache.kafka.common.network.InvalidReceiveException: Invalid receive (size = 1195725856 larger than 104857600)\n"
    b"\tat org.apache.kafka.common.network.NetworkReceive.readFrom(NetworkReceive.java:94)\n"
    b"\tat org.apache.kafka.common.network.KafkaChannel.receive(KafkaChannel.java:452)\n"
    b"[2026-11-22 08:30:00,003] INFO [TransactionCoordinator id=1] Initialized transactionalId tx-1 with producerId "
    b"4001 and producer epoch 3 on partition __transaction_state-12 "
    b"(kafka.coordinator.transaction.TransactionCoordinator)\n"
) * 20


def build(folder: Path, size_mb: int) -> int:
    logs = sorted(SHARED.glob("recordings/*/server.log"))
    if not logs:
        raise SystemExit(f"no recordings under {SHARED}")
    sources = [p.read_bytes() for p in logs]
    target = size_mb * 1024 * 1024
    written = 0
    copy = 0
    day0 = dt.date(2025, 1, 1)
    while written < target:
        broker = copy % 3 + 1
        day = (day0 + dt.timedelta(days=copy // 3)).isoformat().encode()
        src = sources[copy % len(sources)]
        # Interleave noise after every 40 lines of the real log.
        lines = src.split(b"\n")
        parts = []
        for i in range(0, len(lines), 40):
            parts.append(b"\n".join(lines[i:i + 40]))
            parts.append(NOISE.rstrip(b"\n"))
        data = (b"\n".join(parts) + b"\n").replace(b"[" + RECORDED_DATE + b" ", b"[" + day + b" ")
        d = folder / f"broker-{broker}"
        d.mkdir(parents=True, exist_ok=True)
        name = f"server.log.{day.decode()}-{copy % 24:02d}"
        (d / name).write_bytes(data)
        written += len(data)
        copy += 1
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the generated log folder (default 1024)")
    ap.add_argument("--dir", help="where to build it (default: a temp folder, removed afterwards)")
    ap.add_argument("--json", action="store_true", help="also JSON-encode every record, as the CLI does")
    args = ap.parse_args()

    tmp = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_logs_"))
    try:
        t0 = time.perf_counter()
        size = build(tmp, args.size_mb)
        t1 = time.perf_counter()
        print(f"built {size / 1e6:.0f} MB in {len(list(tmp.rglob('server.log*')))} files in {t1 - t0:.1f} s", file=sys.stderr)

        stats = ReadStats()
        events = unrecognized = errors = 0
        enc = json.JSONEncoder(separators=(",", ":")).encode
        t2 = time.perf_counter()
        for rec in parse_events([tmp], stats=stats):
            kind = rec["event"]
            if kind == "unrecognized":
                unrecognized += 1
            elif kind == "error":
                errors += 1
            else:
                events += 1
            if args.json:
                enc(rec)
        t3 = time.perf_counter()
        secs = t3 - t2
        print(json.dumps({
            "bytes": stats.bytes_read, "mb": round(stats.bytes_read / 1e6, 1), "files": stats.files,
            "lines": stats.lines_read, "coordinator_lines": stats.coordinator_lines, "events": events,
            "unrecognized": unrecognized, "errors": errors, "seconds": round(secs, 2),
            "lines_per_s": round(stats.lines_read / secs), "mb_per_s": round(stats.bytes_read / 1e6 / secs, 1),
            "events_per_s": round(events / secs), "json": args.json,
        }))
    finally:
        if not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
