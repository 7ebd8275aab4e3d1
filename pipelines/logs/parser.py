"""Turn one coordinator LogEntry into a flat event record (keys = EVENT_FIELDS)."""
from __future__ import annotations

import re

from .fields import EVENT_FIELDS, FIELD_TYPES, typed_int
from .formats import FORMATS, Format
from .linear import LinearMatch
from .reader import LogEntry

__all__ = ["parse_entry", "strip_prefix", "unrecognized_record", "error_record"]

# Logging prefixes (reference §2.2). The Java shard prefix carries the partition.
_PREFIX_RE = re.compile(
    r"^\[(?:GroupCoordinator (?P<b1>\d+)\]: "
    r"|GroupCoordinator id=(?P<b2>\d+)(?: topic=(?P<topic>\S+?) partition=(?P<part>\d+))?\] "
    r"|GroupMetadataManager brokerId=(?P<b3>\d+)\] "
    r"|Group Metadata Manager on Broker (?P<b4>\d+)\]: "
    r"|ReplicaFetcherManager on broker (?P<b5>\d+)\] )"
)
_OLD_TP_RE = re.compile(r"\[__consumer_offsets,(\d+)\]")

_INT_FIELDS = frozenset(k for k, t in FIELD_TYPES.items() if t in ("int", "long"))
_FIELD_SET = frozenset(EVENT_FIELDS)
# Named groups that hold helper values, never copied as fields.
_HELPER_GROUPS = frozenset({"raw_reason", "mm", "gi", "old", "why", "current", "op", "glist", "removed",
                            "frm", "to", "hash", "topic_epoch", "thread", "plist"})


def strip_prefix(message: str) -> tuple[str, int | None, int | None]:
    """(body, broker id, coordinator partition) of a coordinator message."""
    m = _PREFIX_RE.match(message)
    if m is None:
        body, broker, part = message, None, None
    else:
        body = message[m.end():]
        b = m.group("b1") or m.group("b2") or m.group("b3") or m.group("b4") or m.group("b5")
        # An id too long for its column counts as not printed (typed_int gives None).
        broker = typed_int("broker", b)
        part = typed_int("coordinator_partition", m.group("part")) if m.group("part") is not None else None
    if "[__consumer_offsets," in body:
        body = _OLD_TP_RE.sub(r"__consumer_offsets-\1", body)
    return body.rstrip(), broker, part


def _base(entry: LogEntry) -> dict:
    rec = dict.fromkeys(EVENT_FIELDS)
    rec["ts"] = entry.ts
    rec["ts_text"] = entry.ts_text
    rec["level"] = entry.level
    rec["logger"] = entry.logger
    rec["broker"] = entry.broker
    rec["file"] = entry.file
    rec["line"] = entry.line
    rec["message"] = entry.message if entry.message is not None else entry.text
    return rec


def _match(body: str) -> tuple[Format, LinearMatch] | None:
    for fmt in FORMATS:
        if fmt.needle in body:
            m = fmt.regex.match(body)
            if m is not None:
                return fmt, m
    return None


def _out_of_range(entry: LogEntry, key: str, digits: str) -> dict:
    """An error record naming the field whose printed number the lake cannot hold."""
    shown = digits if len(digits) <= 24 else f"{digits[:20]}... ({len(digits)} characters)"
    rec = error_record(entry)
    rec["error"] = f"{key} {shown} is out of range for its column ({FIELD_TYPES[key]})"
    rec["message"] = entry.message
    return rec


def parse_entry(entry: LogEntry) -> dict | None:
    """The event of one coordinator entry, an `error` record for a read error or a number
    too large for its column, or None.

    None means: a coordinator line that no known format matches. The caller keeps it (see
    `unrecognized_record`), it is never dropped silently.
    """
    if entry.error is not None:
        return error_record(entry)
    if entry.message is None:
        return None
    body, broker, part = strip_prefix(entry.message)
    hit = _match(body)
    if hit is None:
        return None
    fmt, m = hit
    rec = _base(entry)
    rec["event"] = fmt.event
    if broker is not None:
        rec["broker"] = broker
    rec["coordinator_partition"] = part
    groups = {k: v for k, v in m.groupdict().items() if v is not None}
    for key, value in groups.items():
        if key in _FIELD_SET:
            if key in _INT_FIELDS:
                number = typed_int(key, value)
                if number is None:
                    return _out_of_range(entry, key, value)
                rec[key] = number
            else:
                rec[key] = value
        elif key not in _HELPER_GROUPS:  # pragma: no cover - a table bug, caught by the corpus test
            raise AssertionError(f"format {fmt.event}/{fmt.versions} has stray group {key}")
    for key, value in fmt.const.items():
        rec[key] = value
    if fmt.post is not None:
        fmt.post(rec, groups)
    return rec


def unrecognized_record(entry: LogEntry) -> dict:
    """A coordinator line no format matched: kept with its raw text, file and line."""
    rec = _base(entry)
    rec["event"] = "unrecognized"
    if entry.message is not None:
        _, broker, part = strip_prefix(entry.message)
        if broker is not None:
            rec["broker"] = broker
        rec["coordinator_partition"] = part
    return rec


def error_record(entry: LogEntry) -> dict:
    rec = _base(entry)
    rec["event"] = "error"
    rec["error"] = entry.error
    rec["message"] = entry.text
    return rec
