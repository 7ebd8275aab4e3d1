"""Why this process's Spark JVM ended under it, told from the JVM's own log.

When the driver JVM dies (its heap exhausted, killed by the kernel or a user) PySpark's next
call fails with "Connection refused" or "Answer from Java side is empty": nothing about the
cause. The JVM wrote it to its log first (`pipelines.spark.spark_log_file`, shared by every
process, each line tagged with its pid): `java.lang.OutOfMemoryError: Java heap space` after
an executor thread's "Exception in task", then Spark's handler exits with code 52. A command
that fails after its JVM ended says so in one more line (`describe`).
"""
from __future__ import annotations

import re
from pathlib import Path

# The log's line layout (pipelines.spark's log4j2 pattern): time, [pid], level, logger.
_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[(\d+)\] (\w+) ")
# A Java error that ends a JVM (heap, stack, a class that cannot load), as a stack trace's
# first line or at the end of a log message.
_FATAL = re.compile(r"(java\.lang\.\w+Error(?:: .*)?)$")
# Spark's exit codes (org.apache.spark.util.SparkExitCode) a user can act on.
_EXIT_CODES = {50: "an uncaught exception", 52: "out of memory"}
# How much of the shared log's end is read: the JVM's last minutes, whatever other
# processes appended meanwhile.
_TAIL_BYTES = 4 * 2**20


def ended_jvm() -> tuple[int, int] | None:
    """(pid, exit code) of this process's Spark JVM if it has ended, else None (none started,
    or still running). A negative exit code is the signal that killed it."""
    import sys

    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None or proc.poll() is None:
        return None
    return proc.pid, proc.returncode


def last_error(log: Path, pid: int) -> str | None:
    """The Java error the JVM `pid` logged that ended it (the first fatal `java.lang.*Error`),
    else its last ERROR line's message; None when it logged neither (killed from outside)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - _TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    current, fatal, error = None, None, None
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            current = int(m.group(1))
        if current != pid:
            continue  # another process's line, or a continuation of one
        found = _FATAL.search(line)
        if found and fatal is None:
            fatal = found.group(1)
        if m and m.group(2) == "ERROR":
            error = line[m.end():].strip()
    return fatal or error


def describe(log: Path | None) -> str | None:
    """One line on the JVM's end, or None while it runs: its pid, exit code or signal, the
    error its log names and where that log is."""
    ended = ended_jvm()
    if ended is None:
        return None
    pid, code = ended
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    if code in _EXIT_CODES:
        how += f" ({_EXIT_CODES[code]})"
    line = f"the Spark JVM (pid {pid}) {how}"
    cause = last_error(log, pid) if log is not None else None
    if cause:
        line += f": {cause}"
    if log is not None:
        line += f"; its log: {log}"
    if cause and "OutOfMemoryError" in cause:
        line += " (REBALANCE_AUDIT_SPARK_DRIVER_MEMORY sets its heap in local mode)"
    return line
