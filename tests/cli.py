"""The command line as a user runs it, for the tests that drive it end to end."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "rebalance_audit.cli"]


def run_cli(*args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
    """`rebalance-audit ARGS` from the repository; with `check`, a failure shows its stderr's end."""
    done = subprocess.run([*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, f"{args[:2]} failed:\n{done.stderr[-3000:]}"
    return done


def need_kafka() -> None:
    """Skip the test when this machine cannot start the testbed's Kafka (no Java)."""
    from testbed import TestbedUnavailable, find_java

    try:
        find_java()
    except TestbedUnavailable as exc:
        pytest.skip(f"no real Kafka broker: {exc}")
