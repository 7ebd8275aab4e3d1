"""Reading inputs: rotations, gzip, several brokers, stack traces, bad files, time zones, the CLI."""
from __future__ import annotations

import gzip
import json
from pathlib import Path


from pipelines.logs import ReadStats, iter_log_entries, parse_events
from rebalance_audit.cli import main

SCALA = "kafka.coordinator.group.GroupCoordinator"


def _line(ts: str, msg: str, logger: str = SCALA, level: str = "INFO") -> str:
    return f"[{ts}] {level} {msg} ({logger})\n"


def _stab(ts: str, broker: int, group: str, gen: int) -> str:
    return _line(ts, f"[GroupCoordinator {broker}]: Stabilized group {group} generation {gen} (__consumer_offsets-1) with 2 members")


NOISE = _line("2024-05-01 00:00:00,000", "[ReplicaFetcher replicaId=1] Node 2 disconnected.",
              "org.apache.kafka.clients.NetworkClient")


def _write(path: Path, text: str, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_rotated_gzipped_multi_broker_folder_reads_in_order_with_broker_ids(tmp_path):
    for broker in (1, 2):
        d = tmp_path / f"broker-{broker}"
        # Generation 1 in the oldest (gzipped) rotation, 2 in the next hour, 3 in the live file.
        _write(d / "server.log.2024-05-01-10.gz", NOISE + _stab("2024-05-01 10:15:00,000", broker, f"g{broker}", 1), gz=True)
        _write(d / "server.log.2024-05-01-11", NOISE * 3 + _stab("2024-05-01 11:15:00,000", broker, f"g{broker}", 2))
        _write(d / "server.log", _stab("2024-05-01 12:15:00,000", broker, f"g{broker}", 3) + NOISE)
        _write(d / "controller.log", _stab("2024-05-01 12:15:00,000", 9, "not-read", 9))   # not a server.log
    stats = ReadStats()
    recs = list(parse_events([tmp_path], stats=stats))
    got = [(r["broker"], r["group_id"], r["generation"], Path(r["file"]).name) for r in recs]
    assert got == [
        (1, "g1", 1, "server.log.2024-05-01-10.gz"), (1, "g1", 2, "server.log.2024-05-01-11"), (1, "g1", 3, "server.log"),
        (2, "g2", 1, "server.log.2024-05-01-10.gz"), (2, "g2", 2, "server.log.2024-05-01-11"), (2, "g2", 3, "server.log"),
    ]
    assert [r["line"] for r in recs[:3]] == [2, 4, 1]
    assert stats.files == 6 and stats.lines_read == 2 * (2 + 4 + 2) and stats.coordinator_lines == 6


def test_configured_broker_applies_to_lines_without_a_prefix_id(tmp_path):
    log = _write(tmp_path / "b7" / "server.log",
                 _line("2024-05-01 10:00:00,000", "Loaded member MemberMetadata(memberId=m1, groupInstanceId=None, clientId=c, "
                       "clientHost=/1.2.3.4, sessionTimeoutMs=1, rebalanceTimeoutMs=1, supportedProtocols=List(range)) "
                       "in group g with generation 3.", "kafka.coordinator.group.GroupMetadata"))
    assert [r["broker"] for r in parse_events([log])] == [None]
    assert [r["broker"] for r in parse_events([log], brokers={tmp_path / "b7": 7})] == [7]


def test_stack_trace_continuation_lines_belong_to_the_entry(tmp_path):
    text = (NOISE
            + _line("2024-05-01 10:00:00,000", "[GroupCoordinator 1]: Group g could not complete rebalance because no members rejoined",
                    level="ERROR")
            + "java.lang.IllegalStateException: boom\n\tat kafka.coordinator.group.GroupCoordinator.onCompleteJoin(GroupCoordinator.scala:1)\n"
            + _stab("2024-05-01 10:00:01,000", 1, "g", 4)
            + NOISE + "\tat org.apache.kafka.coordinator.group.Foo.bar(Foo.java:9)\n")   # a stack frame of a non-coordinator entry
    log = _write(tmp_path / "server.log", text)
    entries = list(iter_log_entries([log]))
    assert [e.line for e in entries] == [2, 5]
    assert entries[0].continuation[0] == "java.lang.IllegalStateException: boom"
    assert len(entries[0].continuation) == 2 and entries[0].text.count("\n") == 2
    recs = list(parse_events([log]))
    assert [r["event"] for r in recs] == ["rebalance_failed", "group_stabilized"]


def test_truncated_gzip_gives_an_error_record_and_the_rest_still_parses(tmp_path):
    body = "".join(_stab(f"2024-05-01 10:{i // 60:02d}:{i % 60:02d},000", 1, "g", i) for i in range(1, 3000))
    blob = gzip.compress(body.encode())
    _write(tmp_path / "a" / "server.log.2024-05-01-10.gz", "")
    (tmp_path / "a" / "server.log.2024-05-01-10.gz").write_bytes(blob[: len(blob) // 2])   # cut off
    _write(tmp_path / "a" / "server.log", _stab("2024-05-01 11:00:00,000", 1, "g", 5000))
    stats = ReadStats()
    recs = list(parse_events([tmp_path / "a"], stats=stats))
    errors = [r for r in recs if r["event"] == "error"]
    assert len(errors) == 1 and "gzip" in errors[0]["error"] and errors[0]["file"].endswith(".gz")
    good = [r for r in recs if r["event"] == "group_stabilized"]
    assert 0 < len(good) - 1 < 2999                       # part of the cut file, then the live file
    assert good[-1]["generation"] == 5000 and stats.errors == 1
    assert [r["generation"] for r in good[:-1]] == list(range(1, len(good)))   # in order, nothing skipped


def test_binary_file_and_bad_utf8_line_are_error_records(tmp_path):
    d = tmp_path / "logs"
    bad = d / "server.log.2024-05-01-09"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(bytes(range(256)) * 64)
    not_gz = d / "server.log.2024-05-01-10.gz"
    not_gz.write_bytes(b"\x1f\x8b" + b"\xff" * 100)           # gzip magic, corrupt body
    utf = _stab("2024-05-01 11:00:00,000", 1, "g", 1).encode().replace(b"group g", b"group g\xff\xfe")
    (d / "server.log").write_bytes(utf + _stab("2024-05-01 11:00:01,000", 1, "h", 2).encode())
    recs = list(parse_events([d]))
    kinds = [(r["event"], Path(r["file"]).name) for r in recs]
    assert kinds == [("error", "server.log.2024-05-01-09"), ("error", "server.log.2024-05-01-10.gz"),
                     ("error", "server.log"), ("group_stabilized", "server.log")]
    assert "binary" in recs[0]["error"]
    assert "UTF-8" in recs[2]["error"] and recs[2]["line"] == 1
    assert recs[3]["group_id"] == "h"


def test_missing_and_empty_inputs_are_reported(tmp_path):
    (tmp_path / "empty").mkdir()
    recs = list(parse_events([tmp_path / "nope", tmp_path / "empty"]))
    assert [r["event"] for r in recs] == ["error", "error"]
    assert "no such" in recs[0]["error"] and "no server.log" in recs[1]["error"]


def test_time_zone_is_applied_to_file_timestamps(tmp_path):
    log = _write(tmp_path / "server.log", _stab("2024-01-15 09:30:00,125", 1, "g", 1))
    utc = next(parse_events([log]))["ts"]
    ny = next(parse_events([log], tz="America/New_York"))["ts"]
    assert utc == 1705311000125 and ny - utc == 5 * 3600 * 1000


def test_cli_prints_json_lines_and_a_summary(tmp_path, capsys, recordings_dir):
    bad = _write(tmp_path / "x" / "server.log", _line("2024-05-01 10:00:00,000", "[GroupCoordinator 4]: Something unheard of"))
    rc = main(["parse-logs", str(recordings_dir / "crash_autocommit"), "--broker", f"4={bad.parent}", "--tz", "UTC"])
    assert rc == 0
    out, err = capsys.readouterr()
    lines = [json.loads(x) for x in out.splitlines()]
    for rec in lines:
        assert {"event", "ts", "broker", "group_id", "file", "line"} <= rec.keys()
    assert lines[-1]["event"] == "unrecognized" and lines[-1]["broker"] == 4 and lines[-1]["line"] == 1
    assert lines[-1]["message"] == "[GroupCoordinator 4]: Something unheard of"
    assert sum(1 for r in lines if r["event"] == "member_failed") == 1
    assert "1 unrecognized" in err and "0 errors" in err and "lines read" in err


def test_cli_bad_usage_exit_codes(tmp_path, capsys):
    assert main(["parse-logs", str(tmp_path / "missing")]) == 2
    assert main(["parse-logs", "--broker", "x=/tmp"]) == 2
    assert main(["parse-logs", str(tmp_path), "--tz", "Mars/Olympus"]) == 2
    capsys.readouterr()
