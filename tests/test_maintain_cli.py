"""`rebalance-audit maintain`: bad usage is caught before Spark starts; on a lake it compacts
every table (the rows stay), reports each table's files, drops the quality validation results
past the retention with their data docs pages, and a dry run changes nothing."""
from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
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


def _quality_results(folder: Path, *ages: timedelta) -> list[str]:
    """One validation result (and its data docs page) per age, as a check run that long ago
    leaves them; returns their run times as GE names their folders."""
    from quality.gx import QualityContext, folder_lock
    from quality.suites import suite_for

    suite = suite_for("offset_commits")
    frame = pd.DataFrame({c: pd.Series([], dtype=object) for c in ["cluster", "key", *(i.name for i in suite.invariants)]})
    now = datetime.now(timezone.utc)
    with folder_lock(folder):
        ctx = QualityContext.at(folder)
        results = [ctx.validate(suite, frame, run_time=now - age) for age in ages]
        ctx.build_docs(results)
    return [(now - age).strftime("%Y%m%dT%H%M%S") for age in ages]


def _run_times(folder: Path, pattern: str) -> list[str]:
    return sorted(p.parent.name[:15] for p in folder.rglob(pattern))


def test_maintain_compacts_every_table_and_a_dry_run_changes_nothing(tmp_path):
    lake = _lake(tmp_path / "lake")
    quality = tmp_path / "lake" / "_quality"
    old, recent = _quality_results(quality, timedelta(days=30), timedelta(hours=1))
    stored, pages = quality / "gx" / "uncommitted" / "validations", quality / "data_docs" / "validations"
    assert _run_times(stored, "*.json") == _run_times(pages, "*.html") == [old, recent]
    versions = {t: lake.version(t) for t in ("a", "b")}
    done = _maintain("--lake", str(tmp_path / "lake"), "--dry-run", "--spark-master", "local[2]")
    assert done.returncode == 0, done.stderr[-3000:]
    assert {t: lake.version(t) for t in ("a", "b")} == versions
    assert "quality: 1 validation results older than the retention would be dropped" in done.stderr
    assert _run_times(stored, "*.json") == [old, recent]
    done = _maintain("--lake", str(tmp_path / "lake"), "--spark-master", "local[2]")
    assert done.returncode == 0, done.stderr[-3000:]
    # The result past the retention (7 days) goes with its page; the index no longer links it.
    assert "quality: 1 validation results older than the retention dropped" in done.stderr
    assert _run_times(stored, "*.json") == _run_times(pages, "*.html") == [recent]
    index = (quality / "data_docs" / "index.html").read_text()
    assert recent in index and old not in index
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[1:]}
    assert rows == {"a": ["4", "1", "0", rows["a"][3]], "b": ["4", "1", "0", rows["b"][3]]}, done.stdout
    for t in ("a", "b"):
        assert len(lake.table(t).file_uris()) == 1
        assert sorted(lake.read_arrow(t).column("n").to_pylist()) == [0, 1, 2, 3]
        assert lake.positions(t, "w") == {"i": 3}
