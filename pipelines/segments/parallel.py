"""Segment files read by several processes, results taken in the files' order.

`decode` and offline ingestion read whole segment files independently of each other, so
each file is a task of its own. The caller consumes results in the order of the files:
its output (decode's lines, ingestion's first-source-wins inserts) is the sequential
one. At most two tasks per process are in flight, so memory stays bounded by a few
files' results, not by the input's size, when the caller is the slower side.
"""
from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

# Below this much segment data a second process costs more than it saves (its start-up and
# imports take about half a second).
PARALLEL_FROM = 16 << 20


def cpus() -> int:
    """The CPUs this process may run on (a container's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_jobs(segments: Sequence) -> int:
    """One process per CPU when the files (`SegmentFile`s) hold PARALLEL_FROM bytes or
    more, else 1."""
    if len(segments) < 2:
        return 1
    size = 0
    for seg in segments:
        try:
            size += seg.path.stat().st_size
        except OSError:
            pass  # unreadable: the reader reports it
    return cpus() if size >= PARALLEL_FROM else 1


def ordered_map(fn: Callable[..., Any], tasks: Iterable[tuple], jobs: int) -> Iterator[tuple[tuple, Any]]:
    """(task, fn(*task)) for every task, in the tasks' order. With `jobs` > 1, `jobs`
    processes run the tasks (`fn` and its arguments must pickle); a task's exception is
    raised here, when its turn comes."""
    if jobs <= 1:
        for task in tasks:
            yield task, fn(*task)
        return
    ctx = multiprocessing.get_context("forkserver")  # no fork of a process that may hold threads
    window: deque = deque()
    pending = iter(tasks)
    with ctx.Pool(jobs) as pool:
        def submit() -> bool:
            task = next(pending, None)
            if task is None:
                return False
            window.append((task, pool.apply_async(fn, task)))
            return True

        while len(window) < 2 * jobs and submit():
            pass
        while window:
            task, result = window.popleft()
            value = result.get()
            submit()
            yield task, value
