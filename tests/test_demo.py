"""`rebalance-audit demo` end to end, as `make demo` runs it: a real Kafka 4.x cluster (KRaft),
five consumer groups of real librdkafka consumers at once, live ingestion, every asset and its
quality check, the report; then the truth files beside the lake, the findings printed next to
them, the log file holding the chatter and the printed query working from a new process."""
from __future__ import annotations

import collections
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

REPO = Path(__file__).resolve().parents[1]
GROUPS = ("orders-range", "orders-idle", "orders-flapping", "orders-cooperative", "orders-kip848")
TRUTH_FIELDS = ["group_id", "client_id", "topic", "partition", "offset", "ts_ms"]


def _rows(lake: Path, table: str, cluster: str) -> list[dict]:
    return [r for r in DeltaTable(str(lake / table)).to_pyarrow_table().to_pylist() if r["cluster"] == cluster]


def _member_events(folder: Path) -> dict[str, list[dict]]:
    """The scenario's raw per-member files (what the members wrote while they ran)."""
    out = {}
    for path in sorted(folder.glob("*.jsonl")):
        if path.name == "driver.jsonl":
            continue
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        out[path.stem] = [json.loads(line) for line in lines if line.endswith("\n")]  # a SIGKILL may tear the last
    return out


@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.alone
def test_demo_end_to_end(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("java is not installed (the demo's Kafka broker needs it)")
    lake = tmp_path / "lake"
    work = tmp_path / "work"  # kept, so the members' own files can be compared with the truth
    done = subprocess.run(
        [sys.executable, "-m", "rebalance_audit.cli", "demo", "--lake", str(lake), "--workdir", str(work)],
        cwd=REPO, capture_output=True, text=True, timeout=1500,
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    out = done.stdout
    assert f"lake: {lake}" in out
    cluster = re.search(r"^cluster: (demo-[\w.-]+)", out, re.M).group(1)

    # The terminal got one [demo] line per step and nothing else; the chatter is in the log.
    err_lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert err_lines and all(line.startswith("[demo] ") for line in err_lines), done.stderr[-3000:]
    assert 5 <= len(err_lines) <= 12, err_lines
    log = Path(re.search(r"^log: (.+)$", out, re.M).group(1))
    assert log == tmp_path / "demo.log" and log.is_file()
    log_text = log.read_text(errors="replace")
    assert "Spark" in log_text and "dagster" in log_text  # the JVM's and Dagster's lines went there

    # The printed figures are the lake's; every kind of input and finding has rows.
    rows = {m.group(1): int(m.group(2).replace(",", "")) for m in re.finditer(r"^  (\w+)\s+([\d,]+) rows", out, re.M)}
    for table in ("offsets_records", "coordinator_log_lines", "offset_commits", "group_generations",
                  "member_assignments", "coordinator_events", "consumer_group_epochs", "consumer_group_members",
                  "current_assignments", "ownership_intervals", "rebalance_episodes", "duplicate_windows",
                  "idle_consumers", "rebalance_storms", "whatif_episodes"):
        assert rows.get(table, 0) > 0, (table, out)
    gens = DeltaTable(str(lake / "group_generations")).to_pyarrow_table()
    assert gens.num_rows == rows["group_generations"]
    generations = _rows(lake, "group_generations", cluster)
    # Each group in the lake under the run's cluster: classic groups as generations, with the
    # cooperative protocol for the rolling restart, the KIP-848 group as group epochs.
    assert {g["group_id"] for g in generations} >= set(GROUPS) - {"orders-kip848"}
    assert any(g["protocol"] == "cooperative-sticky" for g in generations if g["group_id"] == "orders-cooperative")
    assert any(e["group_id"] == "orders-kip848" for e in _rows(lake, "consumer_group_epochs", cluster))
    assert any(w["group_id"] == "orders-range" and w["cause"] == "crash" for w in _rows(lake, "duplicate_windows", cluster))
    assert any(i["group_id"] == "orders-idle" for i in _rows(lake, "idle_consumers", cluster))
    assert any(s["group_id"] == "orders-flapping" for s in _rows(lake, "rebalance_storms", cluster))

    # Truth beside the lake: one line per processed message, exactly these fields, nothing lost.
    truth_dir = tmp_path / "truth"
    assert f"({truth_dir}/<group>.jsonl)" in out
    truth: dict[str, list[dict]] = {}
    for group in GROUPS:
        lines = (truth_dir / f"{group}.jsonl").read_text(encoding="utf-8").splitlines()
        truth[group] = [json.loads(line) for line in lines]
        assert truth[group], group
        assert all(list(r) == TRUTH_FIELDS and r["group_id"] == group for r in truth[group]), group
        members = _member_events(work / f"scenario-{group}")
        client = {name: next(e["config"]["client_id"] for e in ev if e["event"] == "start") for name, ev in members.items()}
        processed = collections.Counter(
            (client[name], e["topic"], e["partition"], e["offset"], e["ts"])
            for name, ev in members.items() for e in ev if e["event"] == "processed")
        written = collections.Counter((r["client_id"], r["topic"], r["partition"], r["offset"], r["ts_ms"])
                                      for r in truth[group])
        assert written == processed, group
    assert {p.name for p in truth_dir.iterdir()} == {f"{g}.jsonl" for g in GROUPS}

    # The findings printed next to the truth: re-consumption counted from the truth files,
    # the lake's estimate and bound summed from duplicate_windows, idle members.
    windows = _rows(lake, "duplicate_windows", cluster)
    idle_rows = _rows(lake, "idle_consumers", cluster)
    for group in GROUPS:
        block = re.search(rf"^  {re.escape(group)} \(.*?\)\n((?:    .*\n)+)", out, re.M)
        assert block, (group, out)
        text = block.group(1)
        seen = collections.Counter((r["topic"], r["partition"], r["offset"]) for r in truth[group])
        reconsumed = sum(n - 1 for n in seen.values())
        mine = [w for w in windows if w["group_id"] == group]
        estimated = sum(w["estimated_records"] or 0 for w in mine)
        bound = sum(w["end_offset_high"] - w["start_offset"] for w in mine
                    if w["end_offset_high"] is not None and w["start_offset"] is not None)
        assert f"re-consumed {reconsumed} records; estimated {estimated}, bound {bound} " in text, (group, text)
        found = {i["member_id"] for i in idle_rows if i["group_id"] == group and not i["transient"]}
        assert re.search(rf"idle members: found {len(found)} \[", text), (group, text)
        assert "episodes: " in text and ("storm: " in text or "storms: none" in text)
    idle_block = re.search(r"^  orders-idle .*\n    .*\n    idle members: (.*)$", out, re.M).group(1)
    # Three members on two partitions: the truth has one member that never got a partition.
    assert re.search(r"truth 1 \[c\d\]$", idle_block), idle_block
    flapping = re.search(r"^  orders-flapping .*\n((?:    .*\n)+)", out, re.M).group(1)
    assert "storm: " in flapping and "flappy" in flapping and "[flappy x5]" in flapping, flapping

    # The report was written and its index printed.
    index = Path(re.search(r"^report: (.+)$", out, re.M).group(1))
    assert index == tmp_path / "report" / "index.html" and index.is_file()
    # Live ingestion sampled the log ends: each group's lag is in the lake and on its page.
    lag = _rows(lake, "consumer_lag", cluster)
    assert {r["group_id"] for r in lag} >= set(GROUPS) and all(r["lag"] >= 0 for r in lag if r["lag"] is not None)
    from dashboards.safe import page_name

    page = (index.parent / "groups" / page_name(cluster, "orders-range")).read_text()
    section = page[page.index('id="lag-section"'):]
    assert "<table" in section[:section.index("</section>")]

    # Every table's quality check ran with the assets; none blocking failed (exit 0 says so too).
    total = re.search(r"^(\d+) checks passed, (\d+) warnings, (\d+) failed", out, re.M)
    assert total, out
    from assets.definitions import ALL_CHECKS

    specs = sum(len(list(c.check_specs)) for c in ALL_CHECKS)
    assert int(total.group(1)) + int(total.group(2)) == specs and int(total.group(3)) == 0, out
    assert (lake / "quality_results" / "_delta_log").is_dir()
    # The broker (temporary folder) is stopped.
    assert "broker left running" not in done.stderr and "[demo] broker stopped" in done.stderr

    # The first query the demo prints, about duplicate windows, works from a fresh shell (a new
    # process, its own Spark), exactly as printed.
    line = re.search(r"^first query to try:\n  (rebalance-audit sql .+)$", out, re.M).group(1)
    argv = shlex.split(line)
    assert argv[:2] == ["rebalance-audit", "sql"] and "duplicate_windows" in argv[2]
    sql = subprocess.run(
        [sys.executable, "-c", "import sys; from rebalance_audit.cli import main; sys.exit(main())",
         *argv[1:], "--format", "csv"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert sql.returncode == 0, sql.stderr[-2000:]
    csv_lines = sql.stdout.strip().splitlines()
    assert csv_lines[0].startswith("group_id,topic,partition,cause,estimated_records,bound")
    assert len(csv_lines) - 1 == len(windows)
    assert any(row.startswith("orders-range,orders-range-in,") for row in csv_lines[1:])
