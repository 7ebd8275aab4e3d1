"""Find `__consumer_offsets` segment files under what a user points at, with a broker label.

Accepted inputs (mixable, several at once):
* a `.log` file (any name; the partition comes from an enclosing `__consumer_offsets-N`);
* a partition folder `__consumer_offsets-N/`;
* a broker's log dir, holding `__consumer_offsets-N/` folders (and other topics, ignored);
* a parent folder holding several brokers' log dirs, at any depth up to `MAX_DEPTH`
  (e.g. `cluster/broker-1/data/__consumer_offsets-7/`).

Broker label: when a path is itself a log dir, or a partition folder or file inside one,
the log dir's folder name; when a path holds several log dirs, each one's path relative to
it (`broker-1` or `broker-1/data`), so that brokers with equally named data dirs stay apart.

Only `NNNNNNNNNNNNNNNNNNNN.log` files (20 digits, the base offset) are segments; Kafka's
`.cleaned`, `.swap` and `.deleted` leftovers, and `__consumer_offsets-N.<id>-delete` /
`-future` folders, are ignored during folder discovery, but any file named explicitly is read.
"""
from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

PARTITION_DIR = re.compile(r"^__consumer_offsets-(\d+)$")
SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")
MAX_DEPTH = 4


@dataclass(frozen=True, slots=True)
class SegmentFile:
    path: Path
    broker: str | None
    partition: int | None
    base_offset: int | None  # from the file name, when it is a Kafka segment name

    def sort_key(self):
        return (
            self.broker or "",
            -1 if self.partition is None else self.partition,
            -1 if self.base_offset is None else self.base_offset,
            str(self.path),
        )


class SegmentPathError(ValueError):
    """A path given by the user that holds no segment files (or does not exist)."""


def partition_from_path(path: Path) -> int | None:
    """N of the `__consumer_offsets-N` folder holding `path`, if any."""
    m = PARTITION_DIR.match(Path(path).parent.name)
    return int(m.group(1)) if m else None


def _base_offset(name: str) -> int | None:
    m = SEGMENT_FILE.match(name)
    return int(m.group(1)) if m else None


def _segments_in_partition_dir(folder: Path, broker: str | None) -> list[SegmentFile]:
    # Resolved: a partition folder given as "." or through a symlink is named by its target.
    name = PARTITION_DIR.match(folder.resolve().name)
    assert name is not None, folder  # callers pass only folders whose resolved name matched
    partition = int(name.group(1))
    out = []
    for entry in os.scandir(folder):
        base = _base_offset(entry.name)
        if base is not None and entry.is_file():
            out.append(SegmentFile(Path(entry.path), broker, partition, base))
    return out


def _is_log_dir(folder: Path) -> bool:
    try:
        return any(PARTITION_DIR.match(e.name) and e.is_dir() for e in os.scandir(folder))
    except OSError:
        return False


def _find_log_dirs(root: Path) -> list[Path]:
    """Log dirs (folders holding partition folders) under root, not descending into them."""
    found = []
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        if _is_log_dir(folder):
            found.append(folder)
            continue
        if depth >= MAX_DEPTH:
            continue
        try:
            subdirs = [Path(e.path) for e in os.scandir(folder) if e.is_dir() and not e.name.startswith(".")]
        except OSError:
            continue
        stack.extend((d, depth + 1) for d in subdirs)
    return found


def discover(paths: Iterable[str | os.PathLike]) -> list[SegmentFile]:
    """Every segment file under `paths`, sorted by (broker, partition, base offset).

    Raises SegmentPathError for a path that does not exist or holds no segment file.
    """
    found: dict[Path, SegmentFile] = {}
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise SegmentPathError(f"{raw}: no such file or directory")
        items: list[SegmentFile] = []
        if path.is_file():
            parent = path.resolve().parent
            partition = partition_from_path(path.resolve())
            broker = parent.parent.name if partition is not None else None
            items.append(SegmentFile(path, broker, partition, _base_offset(path.name)))
        elif PARTITION_DIR.match(path.resolve().name):
            items = _segments_in_partition_dir(path, path.resolve().parent.name)
            if not items:
                # An empty partition folder is legitimate (nothing written yet), but a user
                # naming one explicitly should hear that nothing was read from it.
                raise SegmentPathError(f"{raw}: partition folder holds no NNNNNNNNNNNNNNNNNNNN.log segment")
        else:
            log_dirs = _find_log_dirs(path)
            if not log_dirs:
                raise SegmentPathError(
                    f"{raw}: no __consumer_offsets-N folders found (looked {MAX_DEPTH} levels deep)"
                )
            for log_dir in log_dirs:
                if log_dir == path:
                    broker = path.resolve().name
                else:
                    broker = log_dir.relative_to(path).as_posix()
                for entry in os.scandir(log_dir):
                    if PARTITION_DIR.match(entry.name) and entry.is_dir():
                        items.extend(_segments_in_partition_dir(Path(entry.path), broker))
        for item in items:
            found.setdefault(item.path.resolve(), item)  # the same file named twice is read once
    return sorted(found.values(), key=SegmentFile.sort_key)


def iter_paths(paths: Iterable[str | os.PathLike]):
    """Records, empty batches and errors of every segment under `paths`, in
    (broker, partition, base offset) order. See `reader.iter_segment_records`."""
    from .reader import iter_segment_records

    segments = discover(paths)  # path errors surface here, before any record
    return itertools.chain.from_iterable(
        iter_segment_records(seg.path, partition=seg.partition, broker=seg.broker) for seg in segments
    )
