"""Offline ingestion: broker `server.log` files → bronze `coordinator_log_lines`.

Key of a line: (cluster, broker, line_key) with
    line_key = sha256(raw entry text)[:32] + "#" + n
where n counts earlier entries with the same text in the same file. The text carries the
millisecond timestamp, so two different events practically never share it; n keeps
genuinely repeated identical entries apart. File names and line numbers are not in the key
on purpose: log4j rotation renames `server.log` to `server.log.2024-01-01-10` (or shifts
`server.log.1` → `.2`), and the renamed file re-read later must match what was stored
when it was still `server.log`. A file re-read while it grows yields the same keys for its
old lines. Limits: the broker id must be the same on both reads (it is, when the coordinator
prints it in the line, which every coordinator version does); an entry cut in half by a
read during a write of its stack trace is stored twice (whole and cut).

Unreadable input (missing file, binary content, invalid UTF-8, a broken gzip) goes to
`quarantine`, keyed by (broker, file name, line).
"""
from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterable, Mapping

from pipelines.ingest.bronze import BufferedWriter, Summary, check_cluster, now_utc, quarantine_row, quarantine_writer
from pipelines.ingest.schemas import COORDINATOR_LOG_LINES
from pipelines.logs import ReadStats, iter_log_entries


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def ingest_logs(
    lake,
    paths: Iterable[str],
    cluster: str = "default",
    tz: str = "UTC",
    brokers: Mapping[str, int] | None = None,
) -> Summary:
    """Load the coordinator entries of the server.log files under `paths`. Idempotent."""
    check_cluster(cluster)
    summary = Summary()
    lines = BufferedWriter(lake, COORDINATOR_LOG_LINES, summary)
    quarantine = quarantine_writer(lake, summary)
    stats = ReadStats()
    ingested_at = now_utc()
    seen_in_file: dict[str, Counter] = {}
    for entry in iter_log_entries(list(paths), tz=tz, brokers=dict(brokers or {}), stats=stats):
        if entry.error:
            summary.quarantined_seen += 1
            quarantine.add(
                quarantine_row(
                    cluster, "logs", f"{entry.broker}:{os.path.basename(entry.file)}:{entry.line}", entry.error,
                    target_table="coordinator_log_lines",
                    broker=None if entry.broker is None else str(entry.broker),
                    file=entry.file, line=entry.line,
                    raw=entry.text.encode("utf-8", "replace") if entry.text else None,
                )
            )
            continue
        assert entry.text is not None  # an entry that is not an error has its text
        counts = seen_in_file.setdefault(entry.file, Counter())
        digest = text_digest(entry.text)
        n = counts[digest]  # digests, not texts: bounded memory on big files
        counts[digest] = n + 1
        summary.seen += 1
        lines.add(
            {
                "cluster": cluster,
                "broker": entry.broker,
                "file": entry.file,
                "line": entry.line,
                "ts": entry.ts,
                "ts_text": entry.ts_text,
                "level": entry.level,
                "logger": entry.logger,
                "message": entry.message,
                "text": entry.text,
                "line_key": f"{digest}#{n}",
                "source": "logs",
                "ingested_at": ingested_at,
            }
        )
    quarantine.flush()
    lines.flush(metadata={"rebalance_audit.ingest": "logs"})
    summary.extra.update(files=stats.files, lines_read=stats.lines_read, bytes_read=stats.bytes_read,
                         broker_configs=dict(stats.broker_configs))
    return summary
