"""Read broker `server.log` files (rotated, gzipped, several brokers) into coordinator log entries.

Layout (Kafka's own log4j config, 0.9 to 4.x): `[%d] %p %m (%c)%n`, `%d` being
`yyyy-MM-dd HH:mm:ss,SSS` in the broker's local time with no zone. A throwable is printed
after the line without a prefix, so every line that does not start a new entry belongs to
the entry before it.

Only lines whose logger is the group coordinator's (old Scala or new Java) become entries,
and one line of the replica manager: "[ReplicaFetcherManager on broker N] Removed fetcher for
partitions ..." when it names a `__consumer_offsets` partition. A broker logs it when a
metadata change that moves those partitions reaches it, before the work the change asks for
(creating logs, loading groups), which the coordinator's own lines of the change follow:
it is the instant that the brokers' clocks are compared by (pipelines/silver/clocks.py).
Substring tests on the raw bytes reject everything else before any decoding or regex, which
is what keeps a multi-GB log folder cheap to scan.
"""
from __future__ import annotations

import calendar
import datetime as _dt
import io
import itertools
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, cast

from .fields import typed_int

__all__ = [
    "LogEntry", "ReadStats", "iter_log_entries", "entry_from_text", "discover_files",
    "is_coordinator_logger", "TimestampParser",
]

# Loggers of the group coordinator and its metadata manager, old and new (reference §2.2).
# 0.9/0.10 used `kafka.coordinator.GroupCoordinator` / `GroupMetadataManager` (no `.group`).
_COORDINATOR_LOGGER_PREFIXES = (
    "kafka.coordinator.group.",
    "kafka.coordinator.Group",
    "org.apache.kafka.coordinator.group.",
)
# The shared runtime (4.x) also serves the share-group and transaction coordinators; only
# its lines with the group coordinator's prefix are ours.
_SHARED_RUNTIME_PREFIX = "org.apache.kafka.coordinator.common.runtime."

# Cheap first test on raw bytes: every coordinator logger name contains this.
_NEEDLE = b"coordinator"
# The replica manager's line of a metadata change's receipt, kept when it names an offsets
# partition (the module's docstring says why).
_FETCHER_LOGGER = "kafka.server.ReplicaFetcherManager"
_FETCHER_PREFIX = "[ReplicaFetcherManager on broker "
# Its prefix, looked for only near the start of a line (after the timestamp, the level and
# any Docker Compose prefix): every line goes through this test, and a bounded search costs
# less than one over the line (on bench_parse_logs.py's folder, the test adds about 9 %).
_FETCHER_NEEDLE = b" INFO [ReplicaFetcherManager on broker "
_FETCHER_NEEDLE_END = 120
_OFFSETS_TOPIC = "__consumer_offsets"
# A line of the configuration dump a broker logs at start-up that the findings use.
_CONFIG_NEEDLE = b"\tgroup.consumer."

# `[2020-01-01 10:00:00,123] INFO message (logger)`, after optional NUL padding (a crashed
# broker's preallocated file) and an optional Docker Compose prefix (`kafka_1  | `).
_ENTRY_RE = re.compile(
    r"^\x00*(?:[\w.\-]+\s*\| )?"
    r"\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d{1,9})?)\] "
    r"(?P<level>[A-Z]+) (?P<msg>.*) \((?P<logger>[\w.$\-]+)\)\s*$",
    re.DOTALL,
)
# Does a raw line start a new entry? (Used only while a coordinator entry is open.)
_HEADER_RE = re.compile(rb"^\x00*(?:[\w.\-]+\s*\| )?\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d")

# Broker id as printed in the message prefix (reference §2.2).
_BROKER_RE = re.compile(
    r"^\[(?:GroupCoordinator (?:id=)?|GroupMetadataManager brokerId=|Group Metadata Manager on Broker "
    r"|ReplicaFetcherManager on broker )(\d+)[\]: ]"
)

# `server.log`, `server.log.2024-01-01-13` (DailyRollingFileAppender / log4j2), `server.log.3`
# (size-based RollingFileAppender), each optionally gzipped.
_ROTATION_RE = re.compile(r"^server\.log(?:\.(?P<date>\d{4}-\d\d-\d\d(?:-\d\d)?)|\.(?P<num>\d+))?(?P<gz>\.gz)?$")

_BINARY_SAMPLE = 8192
_CONTROL_BYTES = bytes(b for b in range(256) if b < 9 or 13 < b < 32 or b == 127)

# Second cheap test, still on bytes: the line names a group-coordinator logger in parentheses
# (rejects the transaction coordinator and stack frames before decoding or matching).
_LOGGER_NEEDLE_RE = re.compile(
    rb"\((?:org\.apache\.)?kafka\.coordinator\.(?:group\.|Group|common\.runtime\.)"
)
# A coordinator entry cut off before its `(logger)` (a file copied while the broker wrote it,
# a line truncated by a tool): its message still starts with a coordinator prefix. Without
# this test it would fail the logger test above and vanish without a word.
_CUT_ENTRY_RE = re.compile(
    rb"^\x00*(?:[\w.\-]+\s*\| )?\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d{1,9})?\] [A-Z]+ "
    rb"\[(?:GroupCoordinator[ \]]|GroupMetadataManager brokerId=|Group Metadata Manager on Broker )"
)
# Does a line end with `(logger)`? Linear: each try starts at a `(` and stops at the next
# character outside the class, so tries never overlap.
_LOGGER_TAIL_RE = re.compile(r"\(([\w.$\-]+)\)\s*$")


def is_coordinator_logger(logger: str, message: str = "") -> bool:
    if logger.startswith(_COORDINATOR_LOGGER_PREFIXES):
        return True
    if logger.startswith(_SHARED_RUNTIME_PREFIX):
        return message.startswith("[GroupCoordinator")
    return False


def _is_kept(logger: str, message: str) -> bool:
    """Does the reader keep this entry? The coordinator's lines, and the replica manager's
    removal of fetchers when it names an offsets partition."""
    if is_coordinator_logger(logger, message):
        return True
    return (logger == _FETCHER_LOGGER and message.startswith(_FETCHER_PREFIX)
            and "] Removed fetcher for partitions " in message and _OFFSETS_TOPIC in message)


@dataclass(slots=True)
class LogEntry:
    """One coordinator log entry (or a read error, when `error` is set).

    `text` is the raw entry (first line plus any continuation lines, without the final
    newline): what the bronze table `coordinator_log_lines` stores. `message` is the %m part
    of the first line; continuation lines (stack traces) are in `continuation`.
    """

    file: str
    line: int
    ts: int | None = None
    ts_text: str | None = None
    level: str | None = None
    logger: str | None = None
    message: str | None = None
    broker: int | None = None
    text: str | None = None
    continuation: tuple[str, ...] = ()
    error: str | None = None


@dataclass
class ReadStats:
    files: int = 0
    bytes_read: int = 0
    lines_read: int = 0
    coordinator_lines: int = 0   # entries yielded, the fetcher lines included (continuation lines not counted)
    errors: int = 0
    per_file: dict[str, int] = field(default_factory=dict)
    # The broker's group.consumer.* settings, from the configuration Kafka prints at every
    # start ("KafkaConfig values:" and its tab-indented "key = value" lines); the last start read wins.
    broker_configs: dict[str, str] = field(default_factory=dict)


class TimestampParser:
    """log4j `%d` text → epoch ms UTC, in a configured zone (the text carries none).

    Caches the UTC offset per local minute: zone transitions fall on minute boundaries,
    so this is exact. An ambiguous local time (clocks going back) resolves to its first
    occurrence (fold=0), a non-existent one (clocks going forward) as if before the jump.
    """

    def __init__(self, tz: str = "UTC"):
        self.tz_name = tz
        self._zone = _zone(tz)
        self._cache: dict[str, int] = {}

    def __call__(self, text: str) -> int | None:
        minute = text[:16]
        base = self._cache.get(minute)
        if base is None:
            try:
                naive = _dt.datetime(int(text[0:4]), int(text[5:7]), int(text[8:10]),
                                     int(text[11:13]), int(text[14:16]))
                if self._zone is None:
                    base = calendar.timegm(naive.timetuple()) * 1000
                else:
                    base = int(naive.replace(tzinfo=self._zone).timestamp()) * 1000
            except (ValueError, OverflowError):  # no such date, or year 1 moved before year 1
                return None
            if len(self._cache) > 100_000:
                self._cache.clear()
            self._cache[minute] = base
        try:
            seconds = int(text[17:19])
            frac = text[20:23] if len(text) > 20 else "0"
            millis = int(frac.ljust(3, "0"))
        except ValueError:
            return None
        return base + seconds * 1000 + millis


def _zone(tz: str):
    """None for UTC (fast path), else a tzinfo. Accepts IANA names and `+HH:MM` offsets."""
    if tz.upper() in ("UTC", "Z", "GMT", "ETC/UTC"):
        return None
    m = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d\d):?(\d\d)", tz)
    if m:
        sign = 1 if m.group(1) == "+" else -1
        return _dt.timezone(sign * _dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3))))
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {tz!r} (use an IANA name such as Europe/Paris, or +HH:MM)") from exc


def _rotation_key(name: str):
    """Oldest first: numbered rotations (higher = older), dated rotations, then the live file."""
    m = _ROTATION_RE.match(name)
    if m is None:
        return (3, name)
    if m.group("num") is not None:
        return (0, -int(m.group("num")), name)
    if m.group("date") is not None:
        return (1, m.group("date"), name)
    return (2, name)


def discover_files(paths: Iterable[str | os.PathLike]) -> Iterator[tuple[Path, Path | None]]:
    """Expand inputs to (file, error_path) pairs in reading order.

    A file is read as given; a folder contributes its `server.log*` files (recursively, one
    sub-folder per broker is the usual layout), oldest rotation first. A missing path or a
    folder without any `server.log` yields (path, path) so the caller can report it.
    """
    for raw in paths:
        p = Path(raw)
        if p.is_file():
            yield p, None
        elif p.is_dir():
            found = False
            for dirpath, dirnames, filenames in os.walk(p):
                dirnames.sort()
                logs = sorted((n for n in filenames if _ROTATION_RE.match(n)), key=_rotation_key)
                for name in logs:
                    found = True
                    yield Path(dirpath) / name, None
            if not found:
                yield p, p
        else:
            yield p, p


def _broker_for(path: Path, brokers: Mapping[Path, int]) -> int | None:
    """The configured broker id of the nearest configured path (the file or a parent)."""
    if not brokers:
        return None
    for candidate in (path, *path.parents):
        if candidate in brokers:
            return brokers[candidate]
    return None


_GZ_CHUNK = 1 << 20


def _gzip_chunks(f) -> Iterator[bytes]:
    """Decompressed blocks of a (multi-member) gzip file, bounded in size.

    Done by hand rather than with GzipFile so that a file cut off mid-stream still yields
    everything before the cut, then raises EOFError.
    """
    d = None
    while True:
        data = f.read(_GZ_CHUNK)
        if not data:
            if d is None or not d.eof:
                raise EOFError("compressed file ended before the end-of-stream marker was reached")
            return
        while data:
            if d is None or d.eof:
                if d is not None and not data.strip(b"\x00"):
                    break  # zero padding after the last member
                d = zlib.decompressobj(wbits=31)
            out = d.decompress(data, 8 * _GZ_CHUNK)
            if out:
                yield out
            data = d.unused_data if d.eof else d.unconsumed_tail


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    tail = b""
    for chunk in chunks:
        parts = (tail + chunk).split(b"\n") if tail else chunk.split(b"\n")
        tail = parts.pop()
        for part in parts:
            yield part + b"\n"
    if tail:
        yield tail


def _open(path: Path):
    """(line iterator, first bytes for sniffing, gzipped?, file). Gzip is detected by its
    magic bytes (logrotate may not keep `.gz`)."""
    # A buffered binary reader (it has peek); typeshed types open() with a non-literal
    # buffering size as a plain BinaryIO.
    f = cast(io.BufferedReader, open(path, "rb", buffering=1 << 20))
    try:
        if f.peek(2)[:2] == b"\x1f\x8b":
            chunks = _gzip_chunks(f)
            first = next(chunks, b"")
            return _lines(itertools.chain((first,), chunks)), first[:_BINARY_SAMPLE], True, f
        return f, f.peek(_BINARY_SAMPLE)[:_BINARY_SAMPLE], False, f
    except BaseException:
        f.close()
        raise


def _is_cut_entry(raw: bytes) -> bool:
    """A coordinator entry's first line that does not end with any `(logger)`."""
    if _CUT_ENTRY_RE.match(raw) is None:
        return False
    return _LOGGER_TAIL_RE.search(raw.decode("utf-8", "replace")) is None


def _looks_utf16(sample: bytes) -> bool:
    """A byte-order mark, or ASCII text with a NUL in every other byte (after any NUL padding).

    Brokers write UTF-8; a UTF-16 copy (re-saved by some tool) would pass the binary test (its
    NULs look like padding) and then yield no line at all."""
    if sample.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True
    text = sample.lstrip(b"\x00")
    if len(text) < 64:
        return False
    half = len(text) // 2
    even, odd = text[0::2].count(0), text[1::2].count(0)
    return max(even, odd) > 0.4 * half and min(even, odd) < 0.05 * half


def _looks_binary(sample: bytes) -> bool:
    """Text logs may start with NUL padding; anything else with many control bytes is not a log."""
    sample = sample.replace(b"\x00", b"")
    if not sample:
        return False
    bad = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    if bad > len(sample) * 0.05:
        return True
    # A stray invalid byte sequence is a per-line error later, not a binary file.
    text = sample.decode("utf-8", "replace")
    return text.count("\ufffd") > max(4, len(text) * 0.05)


def entry_from_text(text: str, *, file: str = "", line: int = 0, broker: int | None = None,
                    ts_parser: TimestampParser | None = None) -> LogEntry | None:
    """Split one raw entry (as stored in bronze) back into a LogEntry; None if not a log4j entry."""
    first, _, rest = text.partition("\n")
    m = _ENTRY_RE.match(first)
    if m is None:
        return None
    ts_text = m.group("ts")
    msg = m.group("msg")
    if broker is None:
        b = _BROKER_RE.match(msg)
        broker = typed_int("broker", b.group(1)) if b else None
    parse_ts = ts_parser or TimestampParser()
    return LogEntry(file=file, line=line, ts=parse_ts(ts_text), ts_text=ts_text,
                    level=m.group("level"), logger=m.group("logger"), message=msg,
                    broker=broker, text=text,
                    continuation=tuple(rest.split("\n")) if rest else ())


def iter_log_entries(paths: Iterable[str | os.PathLike], tz: str = "UTC",
                     brokers: Mapping[Any, int] | None = None,  # keys: str or os.PathLike paths
                     stats: ReadStats | None = None) -> Iterator[LogEntry]:
    """Yield coordinator entries of every input in order, and one error entry per bad input.

    `brokers` maps a file or folder to a broker id, used for lines whose message prefix does
    not print one (the prefix wins where present). Within one file, a line without either
    inherits the id last seen in that file. `stats`, if given, is filled as reading goes.
    """
    stats = stats if stats is not None else ReadStats()
    ts_parser = TimestampParser(tz)
    configured = {Path(k): int(v) for k, v in (brokers or {}).items()}
    for path, missing in discover_files(paths):
        if missing is not None:
            stats.errors += 1
            what = "no such file or folder" if not missing.exists() else "no server.log files found"
            yield LogEntry(file=str(missing), line=0, error=f"{what}: {missing}")
            continue
        stats.files += 1
        yield from _read_file(path, ts_parser, _broker_for(path, configured), stats)


def _read_file(path: Path, ts_parser: TimestampParser, configured_broker: int | None,
               stats: ReadStats) -> Iterator[LogEntry]:
    name = str(path)
    gzipped = path.name.endswith(".gz")
    try:
        lines, sample, gzipped, f = _open(path)
    except (OSError, EOFError, zlib.error) as exc:
        stats.errors += 1
        kind = "unreadable gzip file" if gzipped else "cannot open"
        yield LogEntry(file=name, line=0, error=f"{kind}: {exc}")
        return
    last_broker = configured_broker
    broker: int | None  # of the entry being read
    held = _HeldForBroker(configured_broker)
    lineno = 0
    pending: list | None = None  # [lineno, entry fields..., continuation list]
    try:
        if _looks_utf16(sample):
            stats.errors += 1
            yield LogEntry(file=name, line=0, error="UTF-16 text, not the UTF-8 a broker writes: "
                                                    "convert it first (iconv -f UTF-16 -t UTF-8)")
            return
        if _looks_binary(sample):
            stats.errors += 1
            yield LogEntry(file=name, line=0, error="not a text log file (binary content)")
            return
        nbytes = 0
        try:
            for raw in lines:
                lineno += 1
                nbytes += len(raw)
                if pending is not None:
                    if not _HEADER_RE.match(raw):
                        pending[-1].append(raw)
                        continue
                    yield from held.push(_finish(pending, name))
                    pending = None
                if raw.startswith(_CONFIG_NEEDLE):
                    key, sep, value = raw.decode("utf-8", "replace").strip().partition(" = ")
                    if sep:
                        stats.broker_configs[key] = value
                    continue
                coordinator = _NEEDLE in raw and _LOGGER_NEEDLE_RE.search(raw) is not None
                if not coordinator and raw.find(_FETCHER_NEEDLE, 0, _FETCHER_NEEDLE_END) < 0:
                    if b"[Group" in raw and _is_cut_entry(raw):
                        stats.errors += 1
                        yield from held.push(LogEntry(
                            file=name, line=lineno, text=raw.decode("utf-8", "replace").rstrip("\r\n"),
                            error="coordinator line cut off before its (logger): not parsed"))
                    continue
                try:
                    line = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as exc:
                    stats.errors += 1
                    yield from held.push(LogEntry(
                        file=name, line=lineno, text=raw.decode("utf-8", "replace").rstrip("\r\n"),
                        error=f"invalid UTF-8 at byte {exc.start} of the line"))
                    continue
                m = _ENTRY_RE.match(line)
                if m is None:
                    # A non-entry line naming a coordinator logger (a stack frame of another
                    # entry, or a message split by a newline) is not ours unless it ends with
                    # a coordinator logger; then keep it rather than drop it.
                    tail = _LOGGER_TAIL_RE.search(line)
                    if tail and is_coordinator_logger(tail.group(1)):
                        stats.coordinator_lines += 1
                        yield from held.push(LogEntry(file=name, line=lineno, logger=tail.group(1), message=line,
                                       broker=last_broker, text=line))
                    continue
                logger = m.group("logger")
                msg = m.group("msg")
                if not _is_kept(logger, msg):
                    continue
                bm = _BROKER_RE.match(msg)
                b = typed_int("broker", bm.group(1)) if bm is not None else None  # None: too long an id
                if b is not None:
                    broker = b
                    last_broker = broker
                    held.known(broker)
                else:
                    broker = configured_broker if configured_broker is not None else last_broker
                ts_text = m.group("ts")
                stats.coordinator_lines += 1
                pending = [lineno, ts_parser(ts_text), ts_text, m.group("level"), logger, msg,
                           broker, line, []]
        finally:
            stats.lines_read += lineno
            stats.bytes_read += nbytes
            stats.per_file[name] = lineno
        if pending is not None:
            yield from held.push(_finish(pending, name))
            pending = None
        yield from held.flush()
    except (EOFError, zlib.error, OSError) as exc:
        # gzip cut off mid-stream, or a corrupt member: keep what was read, report the rest.
        if pending is not None:
            yield from held.push(_finish(pending, name))
        yield from held.flush()
        stats.errors += 1
        kind = "truncated or corrupt gzip file" if gzipped else "read error"
        yield LogEntry(file=name, line=lineno, error=f"{kind} after line {lineno}: {exc}")
    finally:
        f.close()


def _finish(p: list, name: str) -> LogEntry:
    lineno, ts, ts_text, level, logger, msg, broker, line, cont = p
    continuation = tuple(c.decode("utf-8", "replace").rstrip("\r\n") for c in cont)
    text = line if not continuation else "\n".join((line, *continuation))
    return LogEntry(file=name, line=lineno, ts=ts, ts_text=ts_text, level=level, logger=logger,
                    message=msg, broker=broker, text=text, continuation=continuation)


class _HeldForBroker:
    """Entries read before the file has printed any broker id wait (in order, bounded) for
    the first one: a server.log is one broker's, so its id applies to them too (the Java
    event-processor threads log before any `[GroupCoordinator id=N]` line)."""

    LIMIT = 10_000

    def __init__(self, broker: int | None):
        self.broker = broker
        self.items: list[LogEntry] = []

    def known(self, broker: int) -> None:
        if self.broker is None:
            self.broker = broker

    def push(self, entry: LogEntry) -> Iterator[LogEntry]:
        if self.broker is not None:
            if self.items:
                yield from self.flush()
            if entry.broker is None:
                entry.broker = self.broker
            yield entry
            return
        self.items.append(entry)
        if len(self.items) >= self.LIMIT:
            yield from self.flush()

    def flush(self) -> Iterator[LogEntry]:
        items, self.items = self.items, []
        for e in items:
            if e.broker is None and e.error is None:
                e.broker = self.broker
            yield e
