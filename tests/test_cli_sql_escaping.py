"""`sql` on a terminal shows control and bidi characters of group ids as escapes; piped, it
prints the data as it is, and the lake's tables are never changed.

The lake is real: `ingest logs` of a server.log whose coordinator lines name hostile groups
(a terminal title change, a screen clear, NUL, CR, a C1 CSI, right-to-left override and
isolate). `sql` runs in its own process on a pseudo-terminal (what a person sees).
"""
from __future__ import annotations

import json
import os
import pty
import select
import subprocess
from pathlib import Path

import pytest
from deltalake import DeltaTable
from tests.cli import CLI

REPO = Path(__file__).resolve().parents[1]

HOSTILE = {
    "title": "g\x1b]0;pwned\x07",          # sets the terminal's window title
    "clear": "g\x1b[2J\x1b[H",              # clears the screen
    "nul": "a\x00b",
    "cr": "shown\rhidden",                  # CR: "hidden" overwrites "shown"
    "csi": "c1\x9b31m",                     # the one-character C1 CSI
    "rlo": "invoice\u202egnp.exe",          # shows as invoiceexe.png
    "isolate": "x\u2066y\u2069",
    "backslash": "lit\\x1b",                # a literal backslash: must not pass for an escape
}
RAW = ("\x1b", "\x00", "\x9b", "\u202e", "\u2066", "\u2069", "\x07")


def _server_log(path: Path) -> Path:
    lines = [f"[2024-05-01 10:00:{i:02d},000] INFO [GroupCoordinator 1]: Stabilized group {g} generation 1 "
             f"(__consumer_offsets-1) with 1 members (kafka.coordinator.group.GroupCoordinator)\n"
             for i, g in enumerate(HOSTILE.values())]
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    lake = root / "lake"
    done = subprocess.run([*CLI, "ingest", "logs", str(_server_log(root / "server.log")), "--lake", str(lake),
                           "--cluster", "c1"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return lake


QUERY = "SELECT message FROM coordinator_log_lines ORDER BY line"


def _on_a_terminal(args: list[str]) -> str:
    """What the command writes to a pseudo-terminal as its standard output."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, cwd=REPO, stdout=slave, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 300)
            if not ready:
                raise AssertionError("no output for 300 s")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        proc.wait(timeout=60)
    assert proc.returncode == 0
    return out.decode("utf-8")


def test_sql_on_a_terminal_shows_escapes_and_leaves_the_lake_as_it_was(lake):
    stored = [r["message"] for r in DeltaTable(str(lake / "coordinator_log_lines")).to_pyarrow_table()
              .sort_by("line").to_pylist()]
    shown = _on_a_terminal([*CLI, "sql", QUERY, "--lake", str(lake)])
    # The terminal turns "\n" into "\r\n" itself; no other raw control reaches it.
    text = shown.replace("\r\n", "\n")
    for ch in (*RAW, "\r"):
        assert ch not in text, (repr(ch), text)
    for visible in ("g\\x1b]0;pwned\\x07", "g\\x1b[2J\\x1b[H", "a\\x00b", "shown\\rhidden", "c1\\x9b31m",
                    "invoice\\u202egnp.exe", "x\\u2066y\\u2069", "lit\\\\x1b"):
        assert visible in text, (visible, text)
    # The tables keep the raw names.
    after = [r["message"] for r in DeltaTable(str(lake / "coordinator_log_lines")).to_pyarrow_table()
             .sort_by("line").to_pylist()]
    assert after == stored and all(any(g in m for m in stored) for g in HOSTILE.values())


def test_into_a_pipe_the_data_is_printed_as_it_is_and_json_escapes_keep_the_value(tmp_path):
    """Piped or redirected, `sql` escapes nothing by default (a file gets the data); on a
    terminal its JSON lines spell the characters as JSON escapes: the same strings when read."""
    from rebalance_audit.commands.sql import _escaping
    from rebalance_audit.terminal import json_terminal_safe, terminal_safe

    read, write = os.pipe()
    with os.fdopen(read), os.fdopen(write, "w") as w, open(tmp_path / "out.txt", "w") as f:
        assert not _escaping("auto", w) and not _escaping("auto", f) and _escaping("always", f)
    for name in HOSTILE.values():
        line = json.dumps({"group_id": name}, ensure_ascii=False)
        safe = json_terminal_safe(line)
        assert json.loads(safe) == {"group_id": name}
        assert not any(ch in safe for ch in (*RAW, "\r"))
        assert not any(ch in terminal_safe(name) for ch in (*RAW, "\r"))


def test_a_failed_query_is_one_line_and_sparks_log_goes_to_its_file(lake, tmp_path):
    """A mistyped column: one line on stderr, the Java stack and Spark's warnings in the log
    file the user can attach to a bug report."""
    log = tmp_path / "logs" / "spark.log"
    done = subprocess.run([*CLI, "sql", "--lake", str(lake), "SELECT nosuch FROM coordinator_log_lines"], cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "REBALANCE_AUDIT_SPARK_LOG": str(log)})
    assert done.returncode == 2
    # The JVM itself announces the incubating module Spark's launcher adds; the rest is ours.
    lines = [line for line in done.stderr.splitlines()
             if line.strip() and not line.startswith("WARNING: Using incubator modules")]
    assert len(lines) == 1 and lines[0].startswith("rebalance-audit sql: query failed: [UNRESOLVED_COLUMN"), done.stderr
    assert done.stdout == ""
    logged = log.read_text(encoding="utf-8")
    assert "UNRESOLVED_COLUMN" in logged and "at org.apache.spark.sql" in logged  # the stack, for a bug report
    assert " WARN " in logged  # Spark's own start-up warnings (host name, native Hadoop)
