"""One lake holding every recording, shared by the silver, gold and quality tests.

Each recording of ../shared/recordings is ingested as its own `cluster` (named after the
scenario), which is exactly how several real clusters share one lake. Spark's per-job
overhead then pays once for all fourteen recordings instead of once each.

Two lakes, each built once per test run (bronze and silver, Spark's jobs: most of a
minute) and copied into every module that asks for it, which may then write to its copy:
* `segments_lake`: from the brokers' segment files (with batch facts and transaction
  markers) plus each recording's server.log;
* `wire_lake`: from the same records as librdkafka read them (`offsets_records.jsonl`,
  no batch facts, no markers), without logs;
* `findings_lake`: `segments_lake` with gold and what-if built by their runners, with the
  settings a user's `run` has.

Import the fixtures into a test module with
`from tests.recordings_lake import segments_lake, wire_lake, spark  # noqa: F401`.
Imported into a module, a fixture is that module's own (pytest keeps one per importing
module, whatever its scope): hence the build once per run on disk, under a lock that the
pytest-xdist workers share.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.ingest.logs import ingest_logs
from pipelines.ingest.schemas import OFFSETS_RECORDS, ensure
from pipelines.ingest.segments import ingest_segments
from pipelines.lake import Lake
from pipelines.silver import runner
from tests.conftest import RECORDINGS

SCENARIOS = (
    sorted(p.name for p in RECORDINGS.iterdir() if (p / "offsets_segments").is_dir()) if RECORDINGS.is_dir() else []
)
# The wire copy of transactional_commits was read with read_uncommitted: it holds the
# aborted commits that a live read_committed ingestion never receives.
WIRE_SCENARIOS = [s for s in SCENARIOS if s != "transactional_commits"]


def build_silver(lake: Lake) -> None:
    runner.update_offsets_silver(lake)
    runner.update_events_silver(lake)
    runner.update_target_assignments(lake)


def wire_rows(scenario: str) -> list[dict]:
    """Bronze rows of the records as librdkafka delivered them (source "kafka")."""
    rows = []
    for line in (RECORDINGS / scenario / "offsets_records.jsonl").read_text().splitlines():
        r = json.loads(line)
        rows.append(
            {
                "cluster": scenario,
                "partition": r["partition"],
                "offset": r["offset"],
                "timestamp": r["timestamp_ms"],
                "key": bytes.fromhex(r["key_hex"]),
                "value": None if r["value_hex"] is None else bytes.fromhex(r["value_hex"]),
                "source": "kafka",
            }
        )
    return rows


def halves(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Per partition, the records up to the median offset, then the rest: two increments of
    a live ingestion."""
    first, second = [], []
    by_part: dict[int, list[dict]] = {}
    for r in rows:
        by_part.setdefault(r["partition"], []).append(r)
    for part in by_part.values():
        part.sort(key=lambda r: r["offset"])
        cut = len(part) // 2
        first += part[:cut]
        second += part[cut:]
    return first, second


def load_rows(lake: Lake, rows: list[dict]) -> None:
    """Insert bronze rows as live ingestion does (keyed, a re-run adds nothing)."""
    ensure(lake, OFFSETS_RECORDS)
    lake.insert_if_absent(OFFSETS_RECORDS.name, pa.Table.from_pylist(rows), key=list(OFFSETS_RECORDS.key), range_column="offset")


def load_wire(lake: Lake, scenario: str) -> None:
    """The recording's wire copy into bronze."""
    load_rows(lake, wire_rows(scenario))


@pytest.fixture(scope="session")
def spark():
    from pipelines.spark import get_spark

    return get_spark()


def _built_once(tmp_path_factory, name: str, build: Callable[[Lake], None], spark) -> Path:
    """The folder of a lake `build` filled, once per test run: the first worker to ask
    builds it in the run's temporary folder, which every xdist worker shares, while the
    others wait on the lock."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # .../pytest-N/popen-gwK → .../pytest-N
    path = root / f"built-once-{name}"
    with open(root / f"built-once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / f"built-once-{name}.done").exists():
            shutil.rmtree(path, ignore_errors=True)
            build(Lake(path, spark=spark))
            (root / f"built-once-{name}.done").touch()
    return path


def _copy(tmp_path_factory, base: Path, spark) -> Lake:
    copy = tmp_path_factory.mktemp(base.name.removeprefix("built-once-"))
    shutil.copytree(base, copy, dirs_exist_ok=True)
    return Lake(copy, spark=spark)


def _build_segments(lake: Lake) -> None:
    for scenario in SCENARIOS:
        rec: Path = RECORDINGS / scenario
        ingest_segments(lake, [str(rec / "offsets_segments")], cluster=scenario)
        ingest_logs(lake, [str(rec / "server.log")], cluster=scenario)
    build_silver(lake)


def _build_wire(lake: Lake) -> None:
    for scenario in WIRE_SCENARIOS:
        load_wire(lake, scenario)
    build_silver(lake)


def _build_findings(tmp_path_factory, spark) -> Callable[[Lake], None]:
    def build(lake: Lake) -> None:
        from pipelines.gold.runner import update_gold
        from pipelines.whatif.spark_job import update_whatif

        base = _built_once(tmp_path_factory, "recordings-segments", _build_segments, spark)
        shutil.copytree(base, lake.root, dirs_exist_ok=True)
        update_gold(lake)
        update_whatif(lake)
    return build


@pytest.fixture(scope="module")
def segments_lake(tmp_path_factory, spark) -> Lake:
    return _copy(tmp_path_factory, _built_once(tmp_path_factory, "recordings-segments", _build_segments, spark), spark)


@pytest.fixture(scope="module")
def wire_lake(tmp_path_factory, spark) -> Lake:
    return _copy(tmp_path_factory, _built_once(tmp_path_factory, "recordings-wire", _build_wire, spark), spark)


@pytest.fixture(scope="module")
def findings_lake(tmp_path_factory, spark) -> Lake:
    base = _built_once(tmp_path_factory, "recordings-findings", _build_findings(tmp_path_factory, spark), spark)
    return _copy(tmp_path_factory, base, spark)
