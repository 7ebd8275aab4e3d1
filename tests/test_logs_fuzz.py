"""Hostile server.log input: seeded mutations of the real recordings end as rows or reasons.

The fast slice of `bench/fuzz_logs.py` (same inputs, fewer of them): no crash, no hang, and
every `error` / `unrecognized` record has a reason and a position. Beside it, the linear-time
engine (pipelines/logs/linear.py) must agree with Python's `re` on every format, and crafted
lines that used to take seconds must parse in linear time.
"""
from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path

import pytest

from pipelines.logs import parse_text
from pipelines.logs.formats import FORMATS
from pipelines.logs.linear import compile as linear_compile
from pipelines.logs.parser import strip_prefix
from pipelines.logs.reader import entry_from_text
from pipelines.logs.triggers import _REASONS
from tests import log_mutations as lm
from tests.conftest import RECORDINGS

pytestmark = pytest.mark.skipif(not RECORDINGS.is_dir(), reason="shared recordings not found")

CORPUS = Path(__file__).parent / "data" / "coordinator_lines" / "formats.jsonl"
INPUTS = 2000


@pytest.fixture(scope="module")
def material():
    logs = lm.seeds()
    return logs, lm.coordinator_lines(logs)


def test_mutated_logs_end_as_rows_or_reasons(material, tmp_path):
    logs, lines = material
    tally = lm.Tally()
    for number in range(INPUTS):
        lm.judge(lm.make_input(7, number, logs, lines), tmp_path, tally, hang_s=5.0)
    assert tally.crashes == [], tally.crashes[0]
    assert tally.hangs == []
    assert tally.parsed > 5 * INPUTS   # most of every slice still parses
    # Each kind of damage reaches its own reason (a mutation that stopped working fails here).
    reasons = " | ".join(tally.reasons)
    for want in ("invalid UTF-8", "UTF-16 text", "binary content", "cut off before its (logger)",
                 "out of range for its column (int)", "gzip", "unrecognized coordinator line"):
        assert want in reasons, f"no {want!r} among {dict(tally.reasons)}"


def _bodies() -> list[str]:
    """Message bodies of the corpus and of every recording, as the formats see them."""
    texts = [json.loads(line)["line"] for line in CORPUS.read_text().splitlines() if line.strip()]
    texts += [line.decode() for line in lm.coordinator_lines(lm.seeds())]
    out = []
    for text in texts:
        entry = entry_from_text(text)
        if entry is not None:
            out.append(strip_prefix(entry.message)[0])
    return out


def _variants(body: str, rng: random.Random) -> list[str]:
    """The body, and short mutations of it that keep it near a format (a Python `re` that
    backtracks stays fast on them)."""
    out = [body]
    for _ in range(6):
        a = rng.randrange(len(body) + 1)
        b = min(len(body), a + rng.randrange(1, 30))
        op = rng.randrange(4)
        if op == 0:
            out.append(body[:a] + body[a:b] * rng.randint(2, 5) + body[b:])
        elif op == 1:
            out.append(body[:a] + body[b:])
        elif op == 2:
            out.append(body[:a] + rng.choice(["١٢", "\u00a0", "\u2028", "\n", "K", "ſ", "_", "\u0663", " in group "])
                       + body[a:])
        else:
            out.append(body[:a] + body[a:b].upper() + body[b:])
    return out


def test_linear_engine_gives_pythons_groups_on_real_and_mutated_lines():
    rng = random.Random(5)
    bodies = [v for body in _bodies() for v in _variants(body, rng)]
    compared = 0
    for fmt in FORMATS:
        python = re.compile(fmt.regex.pattern, fmt.regex.flags)
        for body in bodies:
            if fmt.needle not in body:
                continue
            want = python.match(body)
            got = fmt.regex.match(body)
            assert (got is None) == (want is None), (fmt.event, fmt.versions, body)
            if want is not None:
                assert got.groupdict() == want.groupdict(), (fmt.event, fmt.versions, body)
            compared += 1
    for pattern, _trigger in _REASONS:
        python = re.compile(pattern.pattern, pattern.flags)
        for body in bodies:
            reason = body.partition("(reason: ")[2] or body
            want, got = python.match(reason), pattern.match(reason)
            assert (got is None) == (want is None), (pattern.pattern, reason)
            if want is not None:
                assert got.groupdict() == want.groupdict(), (pattern.pattern, reason)
    assert compared > 5000


def test_character_classes_are_pythons_not_re2s():
    """RE2's \\d, \\w and \\s are ASCII and its Unicode tables newer than Python's: the
    translation spells out Python's classes (U+11F50 is a digit for RE2's tables, not 3.11's)."""
    samples = "0\u0663\u0966\U00011F50a\u00e9\u0416\u4e00_\u00a0\u2028\u3000 \t\x1c\x85-.$\U0001F600\u0300"
    for cls in (r"\d", r"\w", r"\s", r"\S", r"[\w.$\-]"):
        python, linear = re.compile(cls), linear_compile(cls)
        for ch in samples:
            assert (python.fullmatch(ch) is None) == (linear.fullmatch(ch) is None), (cls, hex(ord(ch)))


OLD = "[2024-05-01 10:00:00,000] INFO [GroupCoordinator 1]: "
NEW = "[2024-05-01 10:00:00,000] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=1] "
SCALA = " (kafka.coordinator.group.GroupCoordinator)"
JAVA = " (org.apache.kafka.coordinator.group.GroupMetadataManager)"
# (head, piece repeated to the size, tail): lines that almost match a format. With Python's
# backtracking `re`, at 40 k characters: 3.1 s, 2.4 s, 0.56 s and 0.52 s of CPU (growing with
# the square of the length); the others were already fast and stay so.
CRAFTED = {
    "failed": (OLD + "Member m", " in group", " has failed, removing it from the group#" + SCALA),
    "static_left": (NEW + "[GroupId g] Static member m", " with instance id i", " has left the consumer group#" + JAVA),
    "static_left_prefix": (NEW, "[GroupId g] Static member m with instance id", JAVA),
    "assignment": (OLD + "Assignment received from leader", " for group g for generation 1", SCALA),
    "leave_reason": (NEW + "[GroupId g] Member m", " has left group through explicit `LeaveGroup`; client reason: ", JAVA),
    "member_metadata": (OLD + "Member MemberMetadata(memberId=", "m, groupInstanceId=None, clientId=c, clientHost=/h, ",
                        ") has left group g through explicit `LeaveGroup`#" + SCALA),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_40k_lines_parse_in_linear_time(case):
    head, piece, tail = CRAFTED[case]

    def best(size: int) -> float:
        line = head + piece * (size // len(piece)) + tail
        times = []
        for _ in range(3):
            started = time.process_time()
            parse_text(line)
            times.append(time.process_time() - started)
        return min(times)

    best(1000)  # RE2 builds its patterns on first use
    small, large = best(20_000), best(80_000)
    assert large < 1.0, f"{large:.2f} CPU s for an 80 k line"
    # Four times the length: about four times the time when linear, sixteen when quadratic.
    assert large < 8 * small + 0.02, (small, large)


@pytest.mark.parametrize("number,want", [
    ("0" * 40_000, 0),                  # int() refuses 40,000 digits; it is still a 0 (found by the long run)
    ("\u0660" * 50 + "\u0663", 3),      # Arabic-Indic zeros then 3: Python's \d and int() take them
    ("2147483647", 2147483647),
    ("2147483648", None),               # past the int column
    ("1" * 5000, None),                 # past int()'s own limit
])
def test_numbers_past_their_column_are_error_records(number, want):
    line = (f"[2024-05-01 10:00:00,000] INFO [GroupCoordinator 1]: Stabilized group g generation {number} "
            "(__consumer_offsets-1) with 2 members (kafka.coordinator.group.GroupCoordinator)")
    rec = parse_text(line, file="server.log", line=9)
    if want is None:
        assert rec["event"] == "error" and "generation" in rec["error"] and "out of range" in rec["error"]
        assert (rec["file"], rec["line"]) == ("server.log", 9)
    else:
        assert rec["event"] == "group_stabilized" and rec["generation"] == want


def test_mutated_logs_ingest_as_bronze_rows_or_quarantine_rows_with_reason_and_position(material, tmp_path):
    """Through `ingest logs` into a real lake (delta-rs): each entry the reader gives is a
    `coordinator_log_lines` row, each read error a `quarantine` row with its reason, file and line."""
    from pipelines.ingest.logs import ingest_logs
    from pipelines.lake import Lake
    from pipelines.logs import iter_log_entries

    logs, lines = material
    paths = []
    for number in range(60):
        inp = lm.make_input(11, number, logs, lines)
        path = tmp_path / "logs" / f"server.log.{number}"   # a name of its own: quarantine keys hold it
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(inp.data)
        paths.append(str(path))
    entries = list(iter_log_entries(paths))
    errors = [e for e in entries if e.error]
    assert len(errors) >= 10 and len(entries) > len(errors)

    lake = Lake(tmp_path / "lake")
    summary = ingest_logs(lake, paths, cluster="fuzz")
    quarantine = lake.read_arrow("quarantine").to_pylist()
    assert sorted((q["file"], q["line"], q["reason"]) for q in quarantine) == \
        sorted((e.file, e.line, e.error) for e in errors)
    assert all(q["reason"] and q["file"] in paths and q["line"] >= 0 for q in quarantine)
    # Every entry is stored (an entry whose text another input's file also holds is stored
    # once: bronze keys an entry by its text, so a rotated copy adds nothing).
    stored = lake.read_arrow("coordinator_log_lines").to_pylist()
    assert summary.seen == len(entries) - len(errors)
    assert {(r["broker"], r["text"]) for r in stored} == {(e.broker, e.text) for e in entries if not e.error}
