"""Read the app-transaction positions (`txn` actions) of a Delta table from its log.

delta-rs answers `transaction_version(app_id)` for one id it is told, but cannot list the
ids a table holds. The listing is read here from the log itself: the latest checkpoint
(Parquet, a `txn` struct column) plus every JSON commit after it; a later `txn` for an
app id replaces an earlier one (Delta protocol, "Transaction Identifiers").

The files are read through the table's own object-store filesystem (the one delta-rs
hands to pyarrow), so this works wherever delta-rs can open the table.
"""
from __future__ import annotations

import json

import pyarrow.fs as pafs
import pyarrow.parquet as pq

LOG_DIR = "_delta_log"


def _checkpoint(fs: pafs.FileSystem) -> tuple[int, list[str]]:
    """(version, parquet paths) of the last checkpoint, or (-1, []) without one."""
    try:
        with fs.open_input_stream(f"{LOG_DIR}/_last_checkpoint") as f:
            last = json.loads(f.read())
    except (FileNotFoundError, OSError):
        return -1, []
    version = int(last["version"])
    parts = last.get("parts")
    if parts:
        names = [f"{version:020d}.checkpoint.{i:010d}.{int(parts):010d}.parquet" for i in range(1, int(parts) + 1)]
    else:
        names = [f"{version:020d}.checkpoint.parquet"]
    return version, [f"{LOG_DIR}/{n}" for n in names]


def app_transactions(fs: pafs.FileSystem, up_to_version: int | None = None) -> dict[str, int]:
    """Every app id → its latest version, as of `up_to_version` (default: latest)."""
    found: dict[str, int] = {}
    cp_version, cp_files = _checkpoint(fs)
    if up_to_version is not None and cp_version > up_to_version:
        cp_version, cp_files = -1, []  # the checkpoint is newer than asked: replay all commits
    for path in cp_files:
        with fs.open_input_file(path) as f:
            table = pq.read_table(f, columns=["txn"])
        for txn in table.column("txn").to_pylist():
            if txn is not None:
                found[txn["appId"]] = int(txn["version"])
    commits = []
    for info in fs.get_file_info(pafs.FileSelector(LOG_DIR)):
        name = info.path.rsplit("/", 1)[-1]
        if name.endswith(".json") and name[:-5].isdigit():
            version = int(name[:-5])
            if version > cp_version and (up_to_version is None or version <= up_to_version):
                commits.append((version, info.path))
    for _, path in sorted(commits):
        with fs.open_input_stream(path) as f:
            for line in f.read().decode("utf-8").splitlines():
                if '"txn"' not in line:
                    continue
                action = json.loads(line)
                txn = action.get("txn")
                if txn:
                    found[txn["appId"]] = int(txn["version"])
    return found


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
