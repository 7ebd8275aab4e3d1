"""`rebalance-audit demo` end to end, as `make demo` runs it: a real Kafka 0.9 broker, real
consumers, live ingestion, every asset and its quality check, then the lake holds the
scenario's group history."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.broker
@pytest.mark.spark
def test_demo_end_to_end(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("java is not installed (the demo's Kafka 0.9 broker needs it)")
    lake = tmp_path / "lake"
    done = subprocess.run(
        [sys.executable, "-m", "rebalance_audit.cli", "demo", "--lake", str(lake)],
        cwd=REPO, capture_output=True, text=True, timeout=1500,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert f"lake: {lake}" in out
    cluster = re.search(r"^cluster: (\S+)", out, re.M).group(1)
    rows = {m.group(1): int(m.group(2).replace(",", "")) for m in re.finditer(r"^  (\w+)\s+([\d,]+) rows", out, re.M)}
    for table in ("offsets_records", "coordinator_log_lines", "offset_commits", "group_generations",
                  "member_assignments", "coordinator_events", "rebalance_episodes"):
        assert rows.get(table, 0) > 0, (table, out)
    assert "rebalance-audit sql" in out
    # Every table's quality check ran with the assets; none blocking failed (exit 0 says so too).
    total = re.search(r"^(\d+) checks passed, (\d+) warnings, (\d+) failed", out, re.M)
    assert total, out
    from assets.definitions import ALL_CHECKS

    specs = sum(len(list(c.check_specs)) for c in ALL_CHECKS)
    assert int(total.group(1)) + int(total.group(2)) == specs and int(total.group(3)) == 0, out
    assert (lake / "quality_results" / "_delta_log").is_dir()

    # The printed figures are the lake's, and the scenario's group is in it under the run's cluster.
    gens = DeltaTable(str(lake / "group_generations")).to_pyarrow_table().to_pylist()
    assert len(gens) == rows["group_generations"]
    ours = [g for g in gens if g["cluster"] == cluster and g["group_id"] == "orders-processor"]
    # Three members joined, one left, one crashed: at least a generation per membership change.
    assert len({g["generation"] for g in ours}) >= 3
    # The broker (temporary folder) is gone: nothing listens any more on the printed ports.
    assert "broker left running" not in done.stderr

    # The first query the demo prints works from a fresh shell (a new process, its own Spark).
    sql = subprocess.run(
        [sys.executable, "-c", "import sys; from rebalance_audit.cli import main; sys.exit(main())",
         "sql", "SELECT group_id, count(*) AS n FROM group_generations GROUP BY 1", "--lake", str(lake), "--format", "csv"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert sql.returncode == 0, sql.stderr[-2000:]
    assert "orders-processor" in sql.stdout
