"""`python -m pipelines.lake.compare`: two lakes compared row for row, arrival stamps aside."""
from __future__ import annotations

import subprocess
import sys

import pyarrow as pa

from pipelines.lake import Lake
from tests.cli import REPO

SCHEMA = pa.schema([pa.field("cluster", pa.string()), pa.field("offset", pa.int64()),
                    pa.field("ingested_at", pa.timestamp("us", tz="UTC"))])


def _lake(path, offsets, stamp):
    lake = Lake(path)
    lake.create("commits", SCHEMA, partition_by=["cluster"])
    lake.append("commits", pa.table({"cluster": ["c"] * len(offsets), "offset": offsets,
                                     "ingested_at": [stamp] * len(offsets)}, schema=SCHEMA))
    return path


def _compare(*args):
    return subprocess.run([sys.executable, "-m", "pipelines.lake.compare", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_equal_rows_arrived_at_other_times_are_equal_and_other_rows_differ(tmp_path):
    a = _lake(tmp_path / "a", [1, 2, 3], 1_000)
    same = _lake(tmp_path / "same", [3, 1, 2], 2_000)  # other order, other arrival
    other = _lake(tmp_path / "other", [1, 2, 4], 1_000)

    done = _compare(a, same)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["commits: equal", "0 of 1 tables differ"]

    done = _compare(a, other)
    assert done.returncode == 1
    assert done.stdout.splitlines() == ["commits: DIFFERS", "1 of 1 tables differ"]
    assert _compare(a, other, "--ignore", "commits").returncode == 0


def test_a_path_without_tables_is_an_error_not_an_equal_lake(tmp_path):
    a = _lake(tmp_path / "a", [1], 1_000)
    for args in ((tmp_path / "missing", tmp_path / "missing"), (a, tmp_path / "missing")):
        done = _compare(*args)
        assert done.returncode == 2 and "not a lake" in done.stderr, (done.stdout, done.stderr)
