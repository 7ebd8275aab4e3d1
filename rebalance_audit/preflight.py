"""Checks a command makes before it starts work, so that a bad invocation fails in one line
and writes nothing: a lake path that is a file, a folder that is not a lake, a lake or
report folder on a read-only or full file system.

A disk that fills during a write is still possible: Delta commits are atomic, so every table
keeps its last committed version, and `cli.one_line` names the cause.
"""
from __future__ import annotations

import errno
import os
import re
from pathlib import Path

# Commands that write into the lake (whatif only with --write; report writes beside it).
WRITES_LAKE = frozenset({"ingest", "run", "demo"})
READS_LAKE = frozenset({"sql", "report", "whatif"})
MIN_FREE_ENV = "REBALANCE_AUDIT_MIN_FREE_MB"
# A write needs room for its Parquet files and Delta log entries; below this a run would
# stop in the middle of a table with an error from deep inside delta-rs.
DEFAULT_MIN_FREE_MB = 16


class PreflightError(RuntimeError):
    """A bad invocation found before any work (exit code 1, one line)."""


def check(args) -> None:
    """The checks that apply to `args.command`; raises PreflightError naming the problem."""
    lake = getattr(args, "lake", None)
    if lake is None or "://" in str(lake):
        return  # object stores: their own client reports what is wrong
    path = Path(lake)
    if path.exists() and not path.is_dir():
        raise PreflightError(f"--lake {lake} is a file, not a lake folder")
    writes = args.command in WRITES_LAKE or (args.command == "whatif" and getattr(args, "write", False))
    if args.command in READS_LAKE and path.is_dir():
        _check_is_lake(path)
    if writes:
        check_writable(path, "the lake")


def _check_is_lake(path: Path) -> None:
    from pipelines.lake import Lake

    if not Lake(path).tables():
        raise PreflightError(f"{path} is not a lake: it holds no Delta table (run `rebalance-audit ingest ...` "
                             "or `run` into it first, or pass --lake)")


def _existing(path: Path) -> Path:
    """`path`, or the nearest folder above it that exists (where it would be created)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def min_free_bytes() -> int:
    text = os.environ.get(MIN_FREE_ENV, str(DEFAULT_MIN_FREE_MB))
    try:
        return int(float(text) * 1024 * 1024)
    except ValueError:
        raise PreflightError(f"{MIN_FREE_ENV}={text!r} is not a number of megabytes") from None


def check_writable(path: Path, what: str) -> None:
    """`what` at `path` (created if missing) can be written: not read-only, not full."""
    base = _existing(path)
    st = os.statvfs(base)
    if st.f_flag & os.ST_RDONLY:
        raise PreflightError(f"{what} at {path} is on a read-only file system")
    if not os.access(base, os.W_OK):
        raise PreflightError(f"{what} at {path} is not writable (permission denied on {base})")
    free, need = st.f_bavail * st.f_frsize, min_free_bytes()
    if free < need:
        raise PreflightError(f"{what} at {path}: only {_size(free)} free on its file system, "
                             f"at least {_size(need)} needed ({MIN_FREE_ENV} sets it)")


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 1024 * 1024 else f"{n // 1024} KB"


# What the OS's error numbers mean to someone running a command.
_OS_ERRORS = {
    errno.ENOSPC: "no space left on the device",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EDQUOT: "disk quota exceeded",
}
# The same errors as delta-rs and the JVM word them.
_OS_ERROR_TEXT = re.compile(r"No space left on device|os error (28|30|13|122)|Read-only file system|Permission denied")


def os_cause(exc: BaseException) -> str | None:
    """A short name for a full, read-only or forbidden file system behind `exc`, else None."""
    if isinstance(exc, OSError) and exc.errno in _OS_ERRORS:
        return _OS_ERRORS[exc.errno]
    m = _OS_ERROR_TEXT.search(str(exc))
    if m is None:
        return None
    word = m.group(0)
    if "28" in word or "space" in word:
        return _OS_ERRORS[errno.ENOSPC]
    if "30" in word or "Read-only" in word:
        return _OS_ERRORS[errno.EROFS]
    if "122" in word:
        return _OS_ERRORS[errno.EDQUOT]
    return _OS_ERRORS[errno.EACCES]
