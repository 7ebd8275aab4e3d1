"""`rebalance-audit maintain`: bad usage is caught before Spark starts; on a lake it compacts
every table (the rows stay), reports each table's files, and a dry run changes nothing."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.lake import Lake, Positions

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]
SCHEMA = pa.schema([("cluster", pa.string()), ("group_id", pa.string()), ("n", pa.int64())])


def _maintain(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rebalance_audit.cli", "maintain", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=900)


def _lake(root: Path) -> Lake:
    lake = Lake(root)
    for name in ("a", "b"):
        lake.create(name, SCHEMA, ["cluster"])
        for i in range(4):
            lake.append(name, pa.table({"cluster": ["c"], "group_id": [f"g{i}"], "n": [i]}, schema=SCHEMA),
                        positions=Positions("w", {"i": i}))
    return lake


def test_bad_usage_is_caught_before_spark(tmp_path):
    done = _maintain("--lake", str(tmp_path / "nowhere"))
    assert done.returncode == 2 and "no lake at" in done.stderr
    _lake(tmp_path / "lake")
    done = _maintain("--lake", str(tmp_path / "lake"), "--table", "a", "--table", "x'; DROP")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("""no table "x'; DROP" in the lake at """ + str(tmp_path / "lake"))


def test_maintain_compacts_every_table_and_a_dry_run_changes_nothing(tmp_path):
    lake = _lake(tmp_path / "lake")
    versions = {t: lake.version(t) for t in ("a", "b")}
    done = _maintain("--lake", str(tmp_path / "lake"), "--dry-run", "--spark-master", "local[2]")
    assert done.returncode == 0, done.stderr[-3000:]
    assert {t: lake.version(t) for t in ("a", "b")} == versions
    done = _maintain("--lake", str(tmp_path / "lake"), "--spark-master", "local[2]")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[1:]}
    assert rows == {"a": ["4", "1", "0", rows["a"][3]], "b": ["4", "1", "0", rows["b"][3]]}, done.stdout
    for t in ("a", "b"):
        assert len(lake.table(t).file_uris()) == 1
        assert sorted(lake.read_arrow(t).column("n").to_pylist()) == [0, 1, 2, 3]
        assert lake.positions(t, "w") == {"i": 3}
