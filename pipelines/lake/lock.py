"""One writer per lake at a time: an exclusive lock on a file in the lake's folder.

Writing a table is read-check-commit (keyed inserts read the keys present, then append what
is new; incremental steps read their positions, then write): two processes doing it at once
on one table can both append the same rows. So every command and every Dagster run that
writes holds the lake's writer lock while it writes; a second one waits until the first is
done (saying who holds it), or gives up after a timeout with a clear error.

The lock is `flock` on `<lake>/_writer.lock`: the operating system releases it when its
process dies, however it dies, so a crashed writer never leaves the lake locked. The file
holds who took it (pid, host, command, time) for the waiting side's message. It works on a
local or shared POSIX file system; on an object store there is no lock and the scheduler
must run one writer at a time (Dagster's run queue, see docs/orchestration.md).

Re-entrant within a process: a command that runs Dagster in-process takes it once in the
command and again in the run's lake resource.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator

LOCK_FILE = "_writer.lock"
TIMEOUT_ENV = "REBALANCE_AUDIT_LOCK_TIMEOUT"
DEFAULT_TIMEOUT_S = 3600.0

_held: dict[str, list] = {}  # lock path -> [open file, depth]
_guard = threading.Lock()


class LakeLockTimeout(Exception):
    """Another writer held the lake longer than this one would wait."""


def _timeout() -> float:
    text = os.environ.get(TIMEOUT_ENV)
    return float(text) if text else DEFAULT_TIMEOUT_S


def holder(path: str) -> str:
    """Who holds (or last held) the lock, from its file: for messages only."""
    try:
        with open(path, encoding="utf-8") as f:
            info = json.loads(f.read() or "{}")
    except (OSError, ValueError):
        return "another process"
    return f"pid {info.get('pid')} on {info.get('host')} ({info.get('command')}, since {info.get('since')})"


@contextlib.contextmanager
def writer_lock(root: str, timeout: float | None = None, say=None) -> Iterator[None]:
    """Hold the writer lock of the local lake at `root` (a folder; created if missing).

    `say(text)` is told once when the lock is busy and this waits (default: a warning on
    the `rebalance_audit` logger, which reaches stderr). Raises LakeLockTimeout
    after `timeout` seconds (default $REBALANCE_AUDIT_LOCK_TIMEOUT, else an hour)."""
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, LOCK_FILE)
    with _guard:
        entry = _held.get(path)
        if entry is not None:
            entry[1] += 1
    if entry is not None:
        try:
            yield
        finally:
            with _guard:
                entry[1] -= 1
        return
    f = open(path, "a+", encoding="utf-8")
    try:
        _acquire(f, path, _timeout() if timeout is None else timeout, say)
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                            "command": " ".join(os.path.basename(a) for a in sys.argv[:2]),
                            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
        f.flush()
        with _guard:
            _held[path] = [f, 1]
        try:
            yield
        finally:
            with _guard:
                entry = _held[path]
                entry[1] -= 1
                if entry[1] == 0:
                    del _held[path]
            if path not in _held:
                fcntl.flock(f, fcntl.LOCK_UN)
    finally:
        if path not in _held:
            f.close()


def _acquire(f, path: str, timeout: float, say) -> None:
    deadline = time.monotonic() + timeout
    told = False
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        if time.monotonic() >= deadline:
            raise LakeLockTimeout(f"the lake at {os.path.dirname(path)} is being written by {holder(path)}; "
                                  f"gave up after {timeout:.0f} s (${TIMEOUT_ENV} sets how long to wait)")
        if not told:
            (say or logging.getLogger("rebalance_audit").warning)(f"waiting for the lake: it is being written by {holder(path)}")
            told = True
        time.sleep(0.2)
