"""A command whose Spark JVM ends under it says so: pid, exit code or signal, the error the
JVM logged, and where its log is (pipelines/jvm_exit.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.jvm_exit import last_error

REPO = Path(__file__).resolve().parents[1]


def _log_line(pid: int, level: str, text: str) -> str:
    return f"2026-11-28 12:08:17.561 [{pid}] {level} {text}\n"


def test_last_error_is_the_fatal_error_of_that_jvm_among_other_processes_lines(tmp_path):
    """The shared log holds several JVMs' lines; a stack trace's lines carry no pid."""
    log = tmp_path / "spark.log"
    log.write_text(
        _log_line(100, "WARN", "NativeCodeLoader: Unable to load native-hadoop library")
        + _log_line(100, "ERROR", "Executor: Exception in task 134.0 in stage 15.0 (TID 486)")
        + "java.lang.OutOfMemoryError: Java heap space\n"
        + "\tat java.base/java.nio.HeapByteBuffer.<init>(HeapByteBuffer.java:64)\n"
        + _log_line(200, "ERROR", "Utils: Aborting task")
        + "java.io.IOException: No space left on device\n"
        + _log_line(100, "ERROR", "SparkUncaughtExceptionHandler: Uncaught exception in thread Thread[x,5,main]")
        + "java.lang.OutOfMemoryError: Java heap space\n"
        + _log_line(100, "ERROR", "Executor: Exception in task 135.0: SparkEnv is null")
        + _log_line(300, "WARN", "TaskSetManager: Lost task 1.0 (executor driver): java.lang.StackOverflowError"))
    assert last_error(log, 100) == "java.lang.OutOfMemoryError: Java heap space"
    assert last_error(log, 200) == "Utils: Aborting task"
    assert last_error(log, 300) == "java.lang.StackOverflowError"
    assert last_error(log, 400) is None
    assert last_error(tmp_path / "absent.log", 100) is None


def _java_child(pid: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid ...: comm may hold spaces, so split after its ")".
            comm, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            if comm == "java" and int(fields[1]) == pid:
                return int(entry.name)
    return None


@pytest.mark.spark
def test_a_run_whose_jvm_is_killed_names_it_and_its_log(tmp_path, recordings_dir):
    recording = recordings_dir / "crash_autocommit"
    lake, log = tmp_path / "lake", tmp_path / "spark.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rebalance_audit.cli", "run", "--lake", str(lake), "--cluster", "crash",
         "--segments", str(recording / "offsets_segments"), "--skip-checks"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "REBALANCE_AUDIT_SPARK_LOG": str(log)})
    try:
        deadline = time.monotonic() + 600
        # Silver's first table committed: the JVM is up and working for the run.
        while not (lake / "member_assignments" / "_delta_log" / f"{1:020d}.json").exists():
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "silver never committed"
            time.sleep(0.05)
        jvm = _java_child(proc.pid)
        assert jvm is not None
        os.kill(jvm, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1, err[-3000:]
    lines = err.strip().splitlines()
    assert f"rebalance-audit run: the Spark JVM (pid {jvm}) was killed by signal 9; its log: {log}" in lines, err[-3000:]


OOM_SCRIPT = """
import sys
from pipelines.jvm_exit import describe
from pipelines.spark import get_spark, spark_log_file
spark = get_spark("local[1]")
try:  # 1.5 GB of strings built inside one task, on a 512 MB heap (not constant-folded: from id)
    spark.range(1).selectExpr("array_repeat(repeat(cast(id AS string), 1000000), 1500) AS a") \\
        .selectExpr("length(concat_ws('', a)) AS n").groupBy().sum("n").collect()
except Exception:
    pass
import time
from pipelines.jvm_exit import ended_jvm
deadline = time.monotonic() + 60
while ended_jvm() is None and time.monotonic() < deadline:  # Spark's handler exits after the job fails
    time.sleep(0.1)
print(describe(spark_log_file()))
"""


@pytest.mark.spark
def test_a_jvm_out_of_heap_in_a_task_is_told_by_its_error(tmp_path):
    log = tmp_path / "spark.log"
    done = subprocess.run([sys.executable, "-c", OOM_SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "REBALANCE_AUDIT_SPARK_LOG": str(log),
                               "REBALANCE_AUDIT_SPARK_DRIVER_MEMORY": "512m"})
    line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-3000:]
    assert line.startswith("the Spark JVM (pid "), line
    assert line.endswith(" exited with code 52 (out of memory): java.lang.OutOfMemoryError: Java heap space; "
                         f"its log: {log} (REBALANCE_AUDIT_SPARK_DRIVER_MEMORY sets its heap in local mode)"), line
