"""`rebalance-audit run`: bad usage is caught before any asset runs; a failing asset step
is one line on stderr with exit 1."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(*argv, timeout=600):
    return subprocess.run([sys.executable, "-m", "rebalance_audit.cli", "run", *argv],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_missing_path_is_bad_usage(tmp_path):
    done = _run("--lake", str(tmp_path / "lake"), "--segments", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"rebalance-audit run: no such file or folder: {tmp_path / 'nope'}"]
    assert not (tmp_path / "lake").exists()


def test_bad_time_zone_is_bad_usage(tmp_path, recordings_dir):
    done = _run("--lake", str(tmp_path / "lake"), "--logs", str(recordings_dir / "crash_autocommit" / "server.log"),
                "--tz", "Mars/Olympus")
    assert done.returncode == 2
    assert "Mars/Olympus" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_properties_without_bootstrap_servers_is_bad_usage(tmp_path):
    done = _run("--lake", str(tmp_path / "lake"), "-X", "security.protocol=SSL")
    assert done.returncode == 2
    assert "bootstrap servers" in done.stderr


def test_unreachable_kafka_fails_in_one_line(tmp_path):
    # Nothing listens on port 9 of loopback: live ingestion gives up after its timeout, and the
    # command reports the failed step in one line (the password given never shows).
    done = _run("--lake", str(tmp_path / "lake"), "--bootstrap-servers", "127.0.0.1:9",
                "-X", "socket.connection.setup.timeout.ms=2000", "-X", "sasl.password=hunter2-secret")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("rebalance-audit run: error: asset step bronze_ingest failed:"), done.stderr[-2000:]
    assert "hunter2-secret" not in done.stderr + done.stdout
