"""Every documented coordinator format (reference §2, §7), one corpus line each, parsed right.

The corpus (tests/data/coordinator_lines/formats.jsonl) was written from the documented format
strings, one JSON object per line: {"version", "line", "expect": {field: value}}.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.logs import EVENT_FIELDS, EVENT_TYPES, TRIGGERS, parse_text
from pipelines.logs.formats import FORMATS
from pipelines.logs.parser import _match, strip_prefix
from pipelines.logs.reader import entry_from_text

CORPUS = Path(__file__).parent / "data" / "coordinator_lines" / "formats.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("row", ROWS, ids=[f"{i}:{r['version']}:{r['expect']['event']}" for i, r in enumerate(ROWS)])
def test_corpus_line_parses_to_expected_fields(row):
    rec = parse_text(row["line"], file="corpus", line=1)
    assert list(rec) == list(EVENT_FIELDS)
    for key, want in row["expect"].items():
        assert rec[key] == want, f"{key}: got {rec[key]!r}, want {want!r}\n{row['line']}"
    # Every parsed line keeps its raw message and a UTC timestamp (corpus lines are at 12:00:00.250).
    assert rec["ts"] == 1710072000250
    assert rec["message"] and rec["message"] in row["line"]
    assert rec["event"] in EVENT_TYPES
    assert rec["trigger"] is None or rec["trigger"] in TRIGGERS


def test_every_format_row_is_covered_by_the_corpus():
    hit = set()
    for row in ROWS:
        entry = entry_from_text(row["line"])
        body, _, _ = strip_prefix(entry.message)
        fmt, _ = _match(body)
        hit.add(id(fmt))
    missing = [f"{f.event} ({f.versions})" for f in FORMATS if id(f) not in hit]
    assert not missing, f"formats without a corpus line: {missing}"


def test_unknown_coordinator_wording_is_unrecognized_not_dropped():
    line = ("[2024-03-10 12:00:00,250] INFO [GroupCoordinator 3]: Group g did something new in 5.0 "
            "(kafka.coordinator.group.GroupCoordinator)")
    rec = parse_text(line, file="x.log", line=42)
    assert rec["event"] == "unrecognized"
    assert rec["broker"] == 3
    assert rec["file"] == "x.log" and rec["line"] == 42
    assert rec["message"] == "[GroupCoordinator 3]: Group g did something new in 5.0"


def test_not_a_log_entry_is_an_error_record():
    rec = parse_text("garbage without layout", file="f", line=7)
    assert rec["event"] == "error" and "log4j" in rec["error"] and rec["line"] == 7


@pytest.mark.parametrize("prefix", ["kafka_1  | ", "\x00\x00\x00\x00", "broker-2.kafka  | "])
def test_layout_variants_docker_prefix_and_nul_padding(prefix):
    line = (f"{prefix}[2024-03-10 12:00:00,250] INFO [GroupCoordinator 1]: Stabilized group g generation 2 "
            "(__consumer_offsets-4) with 3 members (kafka.coordinator.group.GroupCoordinator)")
    rec = parse_text(line)
    assert (rec["event"], rec["group_id"], rec["generation"], rec["members"], rec["coordinator_partition"]) == \
        ("group_stabilized", "g", 2, 3, 4)


def test_group_id_with_spaces_and_brackets_survives():
    line = ("[2024-03-10 12:00:00,250] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=9] "
            "[GroupId my group [prod]] Bumped group epoch to 12. (org.apache.kafka.coordinator.group.GroupMetadataManager)")
    rec = parse_text(line)
    assert rec["event"] == "group_epoch_bumped"
    assert rec["group_id"] == "my group [prod]"
    assert rec["epoch"] == 12 and rec["broker"] == 2 and rec["coordinator_partition"] == 9


def test_time_zone_shifts_ts():
    line = ("[2024-07-01 10:00:00,000] INFO [GroupCoordinator 1]: Stabilized group g generation 2 "
            "(__consumer_offsets-4) with 3 members (kafka.coordinator.group.GroupCoordinator)")
    utc = parse_text(line)["ts"]
    paris = parse_text(line, tz="Europe/Paris")["ts"]      # CEST, UTC+2 in July
    fixed = parse_text(line, tz="-05:00")["ts"]
    assert utc == 1719828000000
    assert utc - paris == 2 * 3600 * 1000
    assert fixed - utc == 5 * 3600 * 1000
    assert parse_text(line, tz="Europe/Paris")["ts_text"] == "2024-07-01 10:00:00,000"
