"""Finding the Apache Kafka JARs (and Java) the testbed runs.

``scripts/setup-kafka.sh`` fetches one pinned Kafka 4.x release with Maven into the
set-up cache and records its libs folder in ``$CACHE/kafka/LIBS``. The folder comes
from, in order: ``REBALANCE_AUDIT_KAFKA_LIBS``, that record, or (when asked to) a run
of the script itself.

Every Kafka program the project starts (brokers, StorageTool, DumpLogSegments,
kafka-consumer-groups) runs from these JARs with ``java_command``.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SETUP_SCRIPT = REPO_ROOT / "scripts" / "setup-kafka.sh"
POM = REPO_ROOT / "scripts" / "maven" / "kafka.pom.xml"
TOOLS_LOG4J2 = Path(__file__).with_name("log4j2-tools.properties")


class TestbedUnavailable(RuntimeError):
    """Java or the Kafka JARs are missing; the message says how to get them."""

    __test__ = False  # not a pytest test class, despite the name


def kafka_version() -> str:
    """The Kafka release pinned in the pom (e.g. ``4.4.0``)."""
    match = re.search(r"<kafka.version>([^<]+)</kafka.version>", POM.read_text())
    if match is None:
        raise TestbedUnavailable(f"{POM} pins no <kafka.version>")
    return match.group(1)


def cache_dir() -> Path:
    explicit = os.environ.get("REBALANCE_AUDIT_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "rebalance-audit"


def _is_kafka_libs(path: Path, version: str) -> bool:
    return all((path / f"{artifact}-{version}.jar").is_file()
               for artifact in ("kafka_2.13", "kafka-tools", "connect-runtime"))


def find_kafka_libs(install: bool = False) -> Path:
    """The folder of the pinned Kafka release's JARs; ``install=True`` fetches it if missing."""
    version = kafka_version()
    explicit = os.environ.get("REBALANCE_AUDIT_KAFKA_LIBS")
    if explicit:
        if not _is_kafka_libs(Path(explicit), version):
            raise TestbedUnavailable(
                f"REBALANCE_AUDIT_KAFKA_LIBS={explicit} holds no kafka_2.13-{version}.jar and kafka-tools-{version}.jar")
        return Path(explicit)
    recorded = cache_dir() / "kafka" / "LIBS"
    if recorded.is_file():
        libs = Path(recorded.read_text().strip())
        if _is_kafka_libs(libs, version):
            return libs
    if not install:
        raise TestbedUnavailable(f"Kafka {version} is not fetched: run {SETUP_SCRIPT} (needs Maven)")
    done = subprocess.run(["bash", str(SETUP_SCRIPT)], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise TestbedUnavailable(f"{SETUP_SCRIPT} failed (exit {done.returncode}): {tail}")
    libs = Path(done.stdout.strip().splitlines()[-1])
    if not _is_kafka_libs(libs, version):
        raise TestbedUnavailable(f"{SETUP_SCRIPT} printed {libs}, which holds no Kafka {version} JARs")
    return libs


def find_java() -> str:
    """The java executable: $JAVA_HOME/bin/java, else java on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise TestbedUnavailable("java is not installed (Kafka 4 needs Java 17 or newer)")
    return java


def java_command(main: str, *args: object, heap_mb: int = 256, log4j2: Path | None = None,
                 jvm_options: list[str] | tuple[str, ...] = (), install: bool = False) -> list[str]:
    """argv running Kafka class ``main`` from the pinned JARs.

    Small-machine JVM flags: serial GC and the C1 compiler only start faster and use one
    thread where the defaults would take both cores. Without ``log4j2`` the program logs
    warnings to stderr only, as Kafka's own tools do.
    """
    libs = find_kafka_libs(install=install)
    classpath = os.pathsep.join(str(p) for p in sorted(libs.glob("*.jar")))
    log4j2 = log4j2 or TOOLS_LOG4J2
    return [
        find_java(), f"-Xmx{heap_mb}m", f"-Xms{min(heap_mb, 64)}m",
        "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j2.as_uri()}", *jvm_options,
        "-cp", classpath, main, *map(str, args),
    ]
