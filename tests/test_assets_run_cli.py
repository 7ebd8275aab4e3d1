"""`rebalance-audit run`: bad usage is caught before any asset runs; a failing asset step
is one line on stderr with exit 1; the quality checks run with the assets, and a blocking
check that fails (a wrong table) exits 1 naming it."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(*argv, timeout=600, env=None):
    return subprocess.run([sys.executable, "-m", "rebalance_audit.cli", "run", *argv],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


def test_missing_path_is_bad_usage(tmp_path):
    done = _run("--lake", str(tmp_path / "lake"), "--segments", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"rebalance-audit run: no such file or folder: {tmp_path / 'nope'}"]
    assert not (tmp_path / "lake").exists()


def test_bad_time_zone_is_bad_usage(tmp_path, recordings_dir):
    done = _run("--lake", str(tmp_path / "lake"), "--logs", str(recordings_dir / "crash_autocommit" / "server.log"),
                "--tz", "Mars/Olympus")
    assert done.returncode == 2
    assert "Mars/Olympus" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_properties_without_bootstrap_servers_is_bad_usage(tmp_path):
    done = _run("--lake", str(tmp_path / "lake"), "-X", "security.protocol=SSL")
    assert done.returncode == 2
    assert "bootstrap servers" in done.stderr


def test_unreachable_kafka_fails_in_one_line(tmp_path):
    # Nothing listens on port 9 of loopback: live ingestion gives up after its timeout, and the
    # command reports the failed step in one line (the password given never shows).
    done = _run("--lake", str(tmp_path / "lake"), "--bootstrap-servers", "127.0.0.1:9",
                "-X", "socket.connection.setup.timeout.ms=2000", "-X", "sasl.password=hunter2-secret",
                "--timeout", "3")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("rebalance-audit run: error: asset step bronze_ingest failed:"), done.stderr[-2000:]
    assert "hunter2-secret" not in done.stderr + done.stdout


def _check_specs() -> int:
    from assets.definitions import ALL_CHECKS

    return sum(len(list(c.check_specs)) for c in ALL_CHECKS)


def _lower_a_generation(table_path: Path) -> dict:
    """Rewrite group_generations with one group's last generation record set below the
    generations before it (what a decoder bug reading the wrong field would do)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    table = DeltaTable(str(table_path)).to_pyarrow_table()
    rows = table.to_pylist()
    live = sorted((r for r in rows if not r["is_deletion"]), key=lambda r: (r["group_id"], r["log_offset"]))
    victim = None
    for r in live:
        earlier = [x for x in live if x["group_id"] == r["group_id"] and x["incarnation"] == r["incarnation"]
                   and x["log_offset"] < r["log_offset"] and x["generation"] >= 1]
        if earlier:
            victim = r
    assert victim is not None
    victim["generation"] = 0
    write_deltalake(str(table_path), pa.Table.from_pylist(rows, schema=table.schema), mode="overwrite")
    return victim


def test_skip_checks_then_a_wrong_table_fails_the_run(tmp_path, recordings_dir):
    rec = recordings_dir / "cooperative_rolling"
    lake = tmp_path / "lake"
    # --skip-checks builds the tables and runs no check (that checks pass on real data through
    # this command is test_demo's; in-process, test_assets_materialize's).
    home = tmp_path / "dagster-home"  # as `dagster dev` would use it
    home.mkdir()
    done = _run("--lake", str(lake), "--cluster", "coop", "--segments", str(rec / "offsets_segments"),
                "--logs", str(rec / "server.log"), "--skip-checks", timeout=1500, env={"DAGSTER_HOME": str(home)})
    assert done.returncode == 0, done.stderr[-3000:]
    # The run is in that instance: the UI started on it shows the tables as materialized.
    from dagster import AssetKey, DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:
        for table in ("offsets_records", "group_generations", "duplicate_windows"):
            assert instance.get_latest_materialization_event(AssetKey(table)) is not None, table
    assert "checks passed" not in done.stdout
    # Minutes of work are not silent: every asset step says when it starts and what it took.
    for step in ("bronze_ingest", "offsets_silver", "gold_tables", "whatif_tables", "sre_report"):
        assert f"rebalance-audit run: {step}: started" in done.stderr, done.stderr[-3000:]
        assert re.search(rf"^rebalance-audit run: {step}: done in \d+\.\d s$", done.stderr, re.M), step
    assert (lake / "group_generations" / "_delta_log").is_dir()
    assert not (lake / "quality_results").exists()
    # It says where the report is (beside the lake, written by the run).
    index = Path(re.search(r"^report: (.+)$", done.stdout, re.M).group(1))
    assert index == (tmp_path / "report" / "index.html").resolve() and index.is_file()

    # The lake's group_generations goes wrong; a run with nothing new to ingest finds it,
    # names the check and the offending key count, does not build what depends on it, exits 1.
    victim = _lower_a_generation(lake / "group_generations")
    done = _run("--lake", str(lake), timeout=1500)
    assert done.returncode == 1, (done.stdout[-2000:], done.stderr[-3000:])
    assert ("check group_generations:quality FAILED [ERROR]: 1 offending key(s): generation_never_decreases (1)"
            in done.stdout.splitlines()), done.stdout
    total = re.search(r"^(\d+) checks passed, (\d+) warnings, (\d+) failed \(checks [\d.]+ s, assets [\d.]+ s, Spark start-up [\d.]+ s\)$",
                      done.stdout, re.M)
    assert total, done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("rebalance-audit run: error: 1 blocking quality check(s) failed: group_generations:quality"), last
    downstream = last.split("not materialized downstream: ")[1].split(", ")
    assert {"rebalance_episodes", "ownership_intervals", "whatif_episodes"} <= set(downstream)
    # Every other check of a materialized table ran and passed.
    from quality import SUITES

    unchecked = sum(1 for t in downstream if t in SUITES)
    assert (int(total.group(1)), int(total.group(2)), int(total.group(3))) == (_check_specs() - 1 - unchecked, 0, 1)
    # The history keeps the failure with the offending key.
    from deltalake import DeltaTable

    results = DeltaTable(str(lake / "quality_results")).to_pyarrow_table().to_pylist()
    bad = [r for r in results if not r["success"]]
    assert [(r["table_name"], r["expectation"]) for r in bad] == [("group_generations", "generation_never_decreases")]
    assert str(victim["log_offset"]) in bad[0]["failing_keys_sample"]
