"""Group-coordinator lines of broker `server.log` files → typed coordinator events.

Two steps, so the lake can keep raw lines in bronze and parse them later (e.g. in Spark):

    stats = ReadStats()
    for entry in iter_log_entries(paths, tz="UTC", brokers={"/logs/b1": 1}, stats=stats):
        record = parse_entry(entry)          # dict with EVENT_FIELDS keys, or None
        if record is None:
            record = unrecognized_record(entry)

`parse_events` does both and is what `rebalance-audit parse-logs` uses.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping
import os

from .fields import EVENT_FIELDS, EVENT_TYPES, FIELD_TYPES, TRIGGERS, empty_event
from .parser import error_record, parse_entry, strip_prefix, unrecognized_record
from .reader import LogEntry, ReadStats, TimestampParser, discover_files, entry_from_text, iter_log_entries
from .triggers import classify_reason

__all__ = [
    "EVENT_FIELDS", "EVENT_TYPES", "FIELD_TYPES", "TRIGGERS", "empty_event",
    "LogEntry", "ReadStats", "TimestampParser", "iter_log_entries", "entry_from_text", "discover_files",
    "parse_entry", "parse_text", "parse_events", "unrecognized_record", "error_record", "strip_prefix",
    "classify_reason",
]


def parse_text(text: str, *, file: str = "", line: int = 0, broker: int | None = None,
               tz: str | TimestampParser = "UTC") -> dict:
    """Parse one raw entry as stored in bronze (`coordinator_log_lines.text`) to a record.

    Always returns a record: the event, `unrecognized`, or `error` if the text is not a
    log4j entry at all.
    """
    parser = tz if isinstance(tz, TimestampParser) else TimestampParser(tz)
    entry = entry_from_text(text, file=file, line=line, broker=broker, ts_parser=parser)
    if entry is None:
        return error_record(LogEntry(file=file, line=line, text=text, broker=broker,
                                     error="not a log4j `[%d] %p %m (%c)` entry"))
    rec = parse_entry(entry)
    return rec if rec is not None else unrecognized_record(entry)


def parse_events(paths: Iterable[str | os.PathLike], tz: str = "UTC",
                 brokers: Mapping[Any, int] | None = None,  # keys: str or os.PathLike paths
                 stats: ReadStats | None = None) -> Iterator[dict]:
    """Every coordinator record of the inputs, in file order: events, `unrecognized`, `error`."""
    for entry in iter_log_entries(paths, tz=tz, brokers=brokers, stats=stats):
        rec = parse_entry(entry)
        yield rec if rec is not None else unrecognized_record(entry)
