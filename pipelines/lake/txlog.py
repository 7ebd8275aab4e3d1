"""Rows one commit added, from its add actions' statistics in the Delta log.

Both writers (delta-rs and delta-spark) record `numRecords` per added file, but their
commit metrics differ (delta-spark's MERGE counts inserted, updated and copied rows apart;
delta-rs's writes name theirs otherwise): the add actions are the one count both agree on.
The commit file is read through the table's own object-store filesystem (the one delta-rs
hands to pyarrow), so this works wherever delta-rs can open the table.
"""
from __future__ import annotations

import json

import pyarrow.fs as pafs

LOG_DIR = "_delta_log"


def rows_added(fs: pafs.FileSystem, version: int) -> int:
    """Sum of `numRecords` over the add actions of commit `version` (a file without
    statistics is an error: the count would be wrong, not zero)."""
    total = 0
    with fs.open_input_stream(f"{LOG_DIR}/{version:020d}.json") as f:
        for line in f.read().decode("utf-8").splitlines():
            if '"add"' not in line:
                continue
            add = json.loads(line).get("add")
            if not add:
                continue
            stats = json.loads(add.get("stats") or "{}")
            if "numRecords" not in stats:
                raise ValueError(f"commit {version}: file {add.get('path')} has no numRecords statistic")
            total += int(stats["numRecords"])
    return total
