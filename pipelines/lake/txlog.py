"""What the Delta log says that the snapshot readers do not: rows a commit added, and which
files between two versions carry changed data (as opposed to rewritten data).

Both writers (delta-rs and delta-spark) record `numRecords` per added file, but their
commit metrics differ (delta-spark's MERGE counts inserted, updated and copied rows apart;
delta-rs's writes name theirs otherwise): the add actions are the one count both agree on.

A snapshot diff cannot tell a compaction (`OPTIMIZE`, delta-rs `compact`) from a rewrite of
the data: both remove files and add others. The log can: a compaction's actions say
`dataChange: false`. Change Data Feed would say it too, but needs a table feature the basic
protocol (reader 1 / writer 2, docs/lake.md) does not have.

Commit files are read through the table's own object-store filesystem (the one delta-rs
hands to pyarrow), so this works wherever delta-rs can open the table.
"""
from __future__ import annotations

import json

import pyarrow.fs as pafs

LOG_DIR = "_delta_log"


def _actions(fs: pafs.FileSystem, version: int) -> list[dict]:
    with fs.open_input_stream(f"{LOG_DIR}/{version:020d}.json") as f:
        return [json.loads(line) for line in f.read().decode("utf-8").splitlines() if line.strip()]


def rows_added(fs: pafs.FileSystem, version: int) -> int:
    """Sum of `numRecords` over the add actions of commit `version` (a file without
    statistics is an error: the count would be wrong, not zero)."""
    total = 0
    for action in _actions(fs, version):
        add = action.get("add")
        if not add:
            continue
        stats = json.loads(add.get("stats") or "{}")
        if "numRecords" not in stats:
            raise ValueError(f"commit {version}: file {add.get('path')} has no numRecords statistic")
        total += int(stats["numRecords"])
    return total


def data_changes(fs: pafs.FileSystem, since: int, upto: int) -> tuple[dict[str, dict], dict[str, dict]] | None:
    """(files whose rows are new, files whose rows are gone) between versions `since` and
    `upto`, each as {log path: partition values}, leaving out pure rewrites: a commit whose
    every action has `dataChange: false` and that rewrote only rows present at `since`
    changes no data, whatever files it swapped. A rewrite that took in rows added after
    `since` passes its new files on as added and the old files it consumed as removed (their
    rows moved: a consumer sees them replaced, which is true).

    None when a commit file in the range is gone (the log was cleaned up past its retention):
    the caller then compares snapshots."""
    added: dict[str, dict] = {}  # insertion-ordered
    removed: dict[str, dict] = {}
    for v in range(since + 1, upto + 1):
        try:
            actions = _actions(fs, v)
        except FileNotFoundError:
            return None
        adds = [a["add"] for a in actions if "add" in a]
        removes = [a["remove"] for a in actions if "remove" in a]
        rewrite = (adds or removes) and not any(x.get("dataChange", True) for x in adds + removes)
        if rewrite and not any(r["path"] in added for r in removes):
            continue  # old rows moved between files: nothing a consumer has not seen
        for r in removes:
            if added.pop(r["path"], None) is None:  # not one that came and went within the range
                removed[r["path"]] = r.get("partitionValues") or {}
        for a in adds:
            added[a["path"]] = a.get("partitionValues") or {}
    return added, removed
