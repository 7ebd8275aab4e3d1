"""Great Expectations' store and data docs stay bounded: each table keeps its newest results
(quality.gx.RESULTS_PER_TABLE), their pages with them, and another table's are untouched.
GE alone, no Spark: the check steps call `validate` then `build_docs` the same way."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

from quality import gx as quality_gx
from quality.gx import QualityContext, folder_lock
from quality.suites import suite_for


def _empty(suite) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=object) for c in ["cluster", "key", *(i.name for i in suite.invariants)]})


def _run_times(folder: Path, suite_name: str, pattern: str) -> list[str]:
    return sorted(p.parent.name[:15] for p in folder.rglob(pattern) if suite_name in p.parts)


def test_each_table_keeps_its_newest_results(tmp_path, monkeypatch):
    # Three instead of 96, so the test validates a handful of results, not a hundred.
    monkeypatch.setattr(quality_gx, "RESULTS_PER_TABLE", 3)
    commits, episodes = suite_for("offset_commits"), suite_for("rebalance_episodes")
    now = datetime.now(timezone.utc)
    ages = [timedelta(hours=h) for h in (5, 4, 3, 2, 1)]
    folder = tmp_path / "_quality"
    with folder_lock(folder):
        ctx = QualityContext.at(folder)
        ctx.build_docs([ctx.validate(episodes, _empty(episodes), run_time=now - timedelta(hours=9))])
        for age in ages:  # one check step per run, as `run` does every 15 minutes
            ctx.build_docs([ctx.validate(commits, _empty(commits), run_time=now - age)])
    stored, pages = folder / "gx" / "uncommitted" / "validations", folder / "data_docs" / "validations"
    newest = [(now - age).strftime("%Y%m%dT%H%M%S") for age in ages[-3:]]
    assert _run_times(stored, commits.name, "*.json") == _run_times(pages, commits.name, "*.html") == newest
    index = (folder / "data_docs" / "index.html").read_text()
    assert all(t in index for t in newest)
    assert not any((now - age).strftime("%Y%m%dT%H%M%S") in index for age in ages[:2])
    # The other table's older result is not one of this table's.
    assert len(_run_times(stored, episodes.name, "*.json")) == len(_run_times(pages, episodes.name, "*.html")) == 1
