"""Seeded mutations of the real server.log recordings, and the judge of what the reader and
the parser make of them. Shared by `tests/test_logs_fuzz.py` (a few thousand inputs) and
`bench/fuzz_logs.py` (the long run).

An input is a slice of one recording's server.log (whole lines, 4-16 KB, so a run tries many
inputs) with one to three mutations: flipped bits, binary junk, a megabyte line, a crafted
40 k-character line that almost matches a format (the shape that made backtracking
quadratic), latin-1 or UTF-16 text, other loggers' lines, truncated lines and files, huge
numbers, hostile group ids, gzip (whole or cut). Each input is read as `parse-logs` reads it
(reader, then the parser) and each entry again as silver reads bronze (`parse_text`), into
the Arrow schema of `coordinator_events`. The outcome must be rows: parsed events, or
`unrecognized` / `error` records with a reason and a position (file, line); an exception is
a crash, an input that takes more than a set CPU time a hang.
"""
from __future__ import annotations

import gzip
import random
import re
import signal
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from pipelines.logs import FIELD_TYPES, ReadStats, iter_log_entries, parse_entry, parse_text, unrecognized_record
from tests.conftest import RECORDINGS

_ARROW = {"string": pa.string(), "long": pa.int64(), "int": pa.int32(), "list<string>": pa.list_(pa.string())}
# The silver table's fields as the parser fills them (pipelines/silver/events_job.py adds
# cluster, event_ts and line_key around them).
EVENT_SCHEMA = pa.schema([pa.field(k, _ARROW[t]) for k, t in FIELD_TYPES.items()])


def seeds() -> list[bytes]:
    """The real server.log of every recording (read only, never copied)."""
    return [p.read_bytes() for p in sorted(RECORDINGS.glob("*/server.log"))]


def coordinator_lines(logs: list[bytes]) -> list[bytes]:
    return [line for data in logs for line in data.split(b"\n") if b"(kafka.coordinator" in line
            or b"(org.apache.kafka.coordinator.group" in line]


# --- mutations: each takes (rng, data, lines) and returns new bytes --------------------------

def _slice(rng: random.Random, data: bytes) -> bytes:
    """Whole lines, 4-16 KB, from a random place of a recording."""
    size = rng.randrange(4096, 16384)
    start = data.rfind(b"\n", 0, rng.randrange(max(1, len(data) - size))) + 1
    end = data.find(b"\n", start + size)
    return data[start:] if end < 0 else data[start:end + 1]


def _at_line(rng: random.Random, data: bytes) -> int:
    pos = data.find(b"\n", rng.randrange(len(data) + 1))
    return len(data) if pos < 0 else pos + 1


def bit_flips(rng, data, lines):
    b = bytearray(data)
    for _ in range(rng.randint(1, 24)):
        if b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b)


def binary_junk(rng, data, lines):
    pos = rng.randrange(len(data) + 1)
    return data[:pos] + rng.randbytes(rng.randint(1, 4096)) + data[pos:]


def megabyte_line(rng, data, lines):
    """A line of about a megabyte: junk, one character repeated, or a coordinator line whose
    message is blown up."""
    pos = _at_line(rng, data)
    kind = rng.randrange(3)
    if kind == 0:
        line = rng.randbytes(1 << 20).replace(b"\n", b" ")
    elif kind == 1:
        line = b"[2024-05-01 10:00:00,000] INFO " + bytes([rng.randrange(32, 127)]) * (1 << 20)
    else:
        line = crafted_line(rng, lines, 1 << 20)
    return data[:pos] + line + b"\n" + data[pos:]


def crafted_line(rng: random.Random, lines: list[bytes], size: int = 40_000) -> bytes:
    """A real coordinator line with one piece of its message repeated to `size` characters,
    its ending kept or broken: the input that made two `.+` groups backtrack quadratically."""
    line = rng.choice(lines)
    head = line.find(b"] ", line.find(b"] ") + 2) + 2
    tail = line.rfind(b" (")
    if not 0 < head < tail:
        head, tail = 0, len(line)
    a = rng.randrange(head, tail)
    b = rng.randrange(a + 1, min(tail, a + 40) + 1)
    piece = line[a:b]
    rest = line[b:tail]
    if rest and rng.random() < 0.5:
        rest = rest[:-1] + b"#"
    return line[:a] + piece * max(1, size // len(piece)) + rest + line[tail:]


def crafted(rng, data, lines):
    pos = _at_line(rng, data)
    return data[:pos] + crafted_line(rng, lines) + b"\n" + data[pos:]


def latin1(rng, data, lines):
    """Non-ASCII text written as latin-1 (invalid UTF-8), in one line or the whole file."""
    text = data.decode("utf-8", "replace")
    words = ["é", "ü", "ß", "ñ", "groupe-é", "Ærø"]
    if rng.random() < 0.5:
        pos = rng.randrange(len(text) + 1)
        text = text[:pos] + rng.choice(words) + text[pos:]
    else:
        text = re.sub(r"group ([\w.\-]+)", lambda m: f"group {m.group(1)}{rng.choice(words)}", text)
    return text.encode("latin-1", "replace")


def utf16(rng, data, lines):
    text = data.decode("utf-8", "replace")
    return text.encode(rng.choice(["utf-16", "utf-16-le", "utf-16-be"]))


_OTHER_LOGGERS = (
    "[2024-05-01 10:00:00,000] INFO [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Node 2 disconnected. "
    "(org.apache.kafka.clients.NetworkClient)",
    "[2024-05-01 10:00:00,000] INFO [TransactionCoordinator id=1] Initialized transactionalId tx-1 "
    "(kafka.coordinator.transaction.TransactionCoordinator)",
    "[2024-05-01 10:00:00,000] WARN [ShareCoordinator id=1] Something (org.apache.kafka.coordinator.share.ShareCoordinatorService)",
    "[2024-05-01 10:00:00,000] INFO [GroupCoordinator 1]: said by another logger (kafka.server.KafkaApis)",
    "[2024-05-01 10:00:00,000] ERROR Error processing (kafka.coordinator.group.GroupCoordinator) in a message "
    "(kafka.network.Processor)",
    "\tat org.apache.kafka.coordinator.group.GroupMetadataManager.load(GroupMetadataManager.java:1)",
    "2024-05-01T10:00:00.000Z stdout F {\"level\":\"INFO\",\"logger\":\"kafka.coordinator.group.GroupCoordinator\"}",
    "kafka_1  | [2024-05-01 10:00:00,000] INFO [GroupCoordinator 1]: Stabilized group g generation 1 "
    "(__consumer_offsets-1) with 1 members (kafka.coordinator.group.GroupCoordinator)",
)


def other_loggers(rng, data, lines):
    out = data
    for _ in range(rng.randint(1, 20)):
        pos = _at_line(rng, out)
        out = out[:pos] + rng.choice(_OTHER_LOGGERS).encode() + b"\n" + out[pos:]
    return out


def truncated_lines(rng, data, lines):
    """Lines cut short (a copy taken mid-write, a tool's column limit)."""
    parts = data.split(b"\n")
    for _ in range(rng.randint(1, 10)):
        i = rng.randrange(len(parts))
        if parts[i]:
            parts[i] = parts[i][:rng.randrange(len(parts[i]))]
    return b"\n".join(parts)


def truncated_file(rng, data, lines):
    return data[:rng.randrange(len(data) + 1)]


def shuffled_lines(rng, data, lines):
    """Lines deleted, duplicated or swapped."""
    parts = data.split(b"\n")
    for _ in range(rng.randint(1, 10)):
        i, j = rng.randrange(len(parts)), rng.randrange(len(parts))
        op = rng.randrange(3)
        if op == 0:
            del parts[i]
        elif op == 1:
            parts.insert(i, parts[j])
        else:
            parts[i], parts[j] = parts[j], parts[i]
        if not parts:
            parts = [b""]
    return b"\n".join(parts)


_HOSTILE = ("\x1b[31mred\x1b[0m", "a\x00b", "\u202egnp.exe", "x'; DROP TABLE t; --", "<script>alert(1)</script>",
            "$(rm -rf /)", "g" * 10_000, "tab\tsep", "a\rb", "\ufeffbom", "\U0001F600", "١٢٣", "\u00a0nbsp")


def hostile_ids(rng, data, lines):
    text = data.decode("utf-8", "replace")
    return re.sub(r"group ([\w.\-]+)", lambda m: f"group {rng.choice(_HOSTILE)}", text, count=rng.randint(1, 5)).encode()


def huge_numbers(rng, data, lines):
    """Numbers past int32/int64, and past int()'s 4300-digit limit."""
    big = rng.choice(["2147483648", "9223372036854775808", "-9223372036854775809", "9" * 30, "1" * 5000, "0" * 40 + "7"])
    return re.sub(rb"(generation|epoch|with|in) \d+", lambda m: m.group(1) + b" " + big.encode(), data,
                  count=rng.randint(1, 5))


def crlf_nul(rng, data, lines):
    """Windows line ends, NUL padding (a crashed broker's preallocated file), form feeds."""
    op = rng.randrange(3)
    if op == 0:
        return data.replace(b"\n", b"\r\n")
    if op == 1:
        return b"\x00" * rng.randint(1, 9000) + data
    pos = rng.randrange(len(data) + 1)
    return data[:pos] + b"\x0c\x0b\x1c\x85" + data[pos:]


MUTATIONS = {f.__name__: f for f in (
    bit_flips, binary_junk, megabyte_line, crafted, latin1, utf16, other_loggers, truncated_lines, truncated_file,
    shuffled_lines, hostile_ids, huge_numbers, crlf_nul)}
# Megabyte lines cost the most: one input in twenty has one.
_WEIGHTS = {name: (1 if name == "megabyte_line" else 5 if name == "crafted" else 4) for name in MUTATIONS}


@dataclass
class Input:
    number: int
    kinds: list[str]
    data: bytes
    gzipped: bool


def make_input(seed: int, number: int, logs: list[bytes], lines: list[bytes]) -> Input:
    """Input `number` of run `seed`: the same bytes on every machine, for a given Python."""
    rng = random.Random(f"{seed}:{number}")
    data = _slice(rng, rng.choice(logs))
    names = list(MUTATIONS)
    kinds = rng.choices(names, weights=[_WEIGHTS[n] for n in names], k=rng.randint(1, 3))
    for kind in kinds:
        data = MUTATIONS[kind](rng, data, lines)
    gzipped = rng.random() < 0.1
    if gzipped:
        data = gzip.compress(data, compresslevel=1)
        if rng.random() < 0.5:
            data = data[:rng.randrange(len(data) + 1)]
    return Input(number, kinds, data, gzipped)


# --- the judge -------------------------------------------------------------------------------

@dataclass
class Tally:
    inputs: int = 0
    crashes: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    parsed: int = 0
    reasons: Counter = field(default_factory=Counter)
    slowest: float = 0.0

    def merge_reason(self, reason: str) -> None:
        # Numbers and paths vary from input to input; the kind of reason is what is counted.
        self.reasons[re.sub(r"\b(?<!UTF-)\d+", "N", reason.split(": /")[0])[:100]] += 1


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def _position_ok(rec: dict, path: str) -> bool:
    return rec["file"] == path and isinstance(rec["line"], int) and rec["line"] >= 0


def judge(inp: Input, folder: Path, tally: Tally, hang_s: float = 10.0) -> None:
    """Read one input as `parse-logs` and silver would; count rows, reasons, crashes, hangs."""
    path = folder / ("server.log.1.gz" if inp.gzipped else "server.log")
    path.write_bytes(inp.data)
    tally.inputs += 1
    what = f"input {inp.number} ({'+'.join(inp.kinds)}{', gzip' if inp.gzipped else ''})"
    # CPU seconds, not wall time: on a loaded machine (or niced) a quick input can wait long.
    old = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, hang_s)
    started = time.process_time()
    try:
        records = []
        for entry in iter_log_entries([path], tz="Europe/Berlin", stats=ReadStats()):
            rec = parse_entry(entry) or unrecognized_record(entry)
            _check(rec, str(path), what)
            records.append(rec)
            if entry.error is None:
                # As silver reads it back from bronze: the raw text, parsed again.
                records.append(parse_text(entry.text, file=entry.file, line=entry.line, broker=entry.broker))
            if rec["event"] == "error":
                tally.merge_reason(rec["error"])
            elif rec["event"] == "unrecognized":
                tally.merge_reason("unrecognized coordinator line")
            else:
                tally.parsed += 1
        # Every record must be a row of the silver table (one batch: Arrow per record is slow).
        pa.RecordBatch.from_pylist(records, schema=EVENT_SCHEMA)
    except _Hang:
        tally.hangs.append(f"{what}: over {hang_s} CPU s")
    except Exception:  # noqa: BLE001 - a crash is what this counts
        tally.crashes.append(f"{what}:\n{traceback.format_exc()}")
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
        tally.slowest = max(tally.slowest, time.process_time() - started)


def _check(rec: dict, path: str, what: str) -> None:
    """An error or unrecognized record has a position (file, line); an error has a reason."""
    if rec["event"] in ("error", "unrecognized"):
        if not _position_ok(rec, path):
            raise AssertionError(f"{what}: {rec['event']} record without a position: {rec['file']!r}:{rec['line']!r}")
        if rec["event"] == "error" and not rec["error"]:
            raise AssertionError(f"{what}: error record without a reason")
