"""What delta-rs's Rust threads print while a write fails, kept off the terminal.

delta-rs does its I/O on Rust worker threads. When a write fails underneath it (a disk that
fills during the write), a worker can panic on its way out ("Already shut down") and Rust's
panic hook writes that, with a stack trace, straight to file descriptor 2: ahead of the one
line in which the command says what happened. So while delta-rs writes, file descriptor 2
is a pipe drained into memory; afterwards what came through is written to stderr as it came
if the write succeeded, and if it failed it is attached to the exception as a note (shown by
`--debug` and in Dagster's error view) instead of being printed. Nothing is dropped.

Only this process's descriptor moves: the Spark JVM, a child process, keeps its own.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import deltalake

_lock = threading.Lock()
_held = False  # a write holds the descriptor: nested or concurrent writes leave it to that one
_NOTE_LIMIT = 8192


def write_deltalake(*args: Any, **kwargs: Any) -> None:
    """`deltalake.write_deltalake`, its Rust threads' stderr held as the module says."""
    with held_stderr():
        deltalake.write_deltalake(*args, **kwargs)


@contextlib.contextmanager
def held_stderr() -> Iterator[None]:
    global _held
    with _lock:
        outermost = not _held
        _held = True
    if not outermost:
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no usable descriptor 2: nothing to guard
        with _lock:
            _held = False
        yield
        return
    read_end, write_end = os.pipe()
    caught = bytearray()
    drain = threading.Thread(target=_drain, args=(read_end, caught), name="delta-rs-stderr", daemon=True)
    drain.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    except BaseException as exc:
        _restore(saved, drain)
        if caught:
            text = caught[:_NOTE_LIMIT].decode("utf-8", "replace")
            more = f" ({len(caught) - _NOTE_LIMIT} more bytes)" if len(caught) > _NOTE_LIMIT else ""
            exc.add_note(f"delta-rs printed while this write failed{more}:\n{text}")
        raise
    else:
        _restore(saved, drain)
        view = memoryview(bytes(caught))
        while view:
            view = view[os.write(2, view):]
    finally:
        with _lock:
            _held = False


def _restore(saved: int, drain: threading.Thread) -> None:
    with contextlib.suppress(ValueError, AttributeError):
        sys.stderr.flush()
    os.dup2(saved, 2)  # the pipe's last write end closes: the drain reads to its end
    os.close(saved)
    drain.join()


def _drain(fd: int, into: bytearray) -> None:
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(65536):
            into += chunk
