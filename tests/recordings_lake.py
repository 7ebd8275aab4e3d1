"""One lake holding every recording, shared by the silver, gold and quality tests.

Each recording of ../shared/recordings is ingested as its own `cluster` (named after the
scenario), which is exactly how several real clusters share one lake. Spark's per-job
overhead then pays once for all fourteen recordings instead of once each.

Two lakes are built, lazily, once per test session:
* `segments_lake`: from the brokers' segment files (with batch facts and transaction
  markers) plus each recording's server.log;
* `wire_lake`: from the same records as librdkafka read them (`offsets_records.jsonl`,
  no batch facts, no markers), without logs.

Import the fixtures into a test module with
`from tests.recordings_lake import segments_lake, wire_lake, spark  # noqa: F401`.
"""
from __future__ import annotations

import json
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
    runner.rebuild_target_assignments(lake)


def load_wire(lake: Lake, scenario: str) -> None:
    """Bronze rows from the records as librdkafka delivered them (source "kafka")."""
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
    ensure(lake, OFFSETS_RECORDS)
    lake.insert_if_absent(OFFSETS_RECORDS.name, pa.Table.from_pylist(rows), key=list(OFFSETS_RECORDS.key), range_column="offset")


@pytest.fixture(scope="session")
def spark():
    from pipelines.spark import get_spark

    return get_spark()


@pytest.fixture(scope="session")
def segments_lake(tmp_path_factory, spark) -> Lake:
    lake = Lake(tmp_path_factory.mktemp("recordings-segments"), spark=spark)
    for scenario in SCENARIOS:
        rec: Path = RECORDINGS / scenario
        ingest_segments(lake, [str(rec / "offsets_segments")], cluster=scenario)
        ingest_logs(lake, [str(rec / "server.log")], cluster=scenario)
    build_silver(lake)
    return lake


@pytest.fixture(scope="session")
def wire_lake(tmp_path_factory, spark) -> Lake:
    lake = Lake(tmp_path_factory.mktemp("recordings-wire"), spark=spark)
    for scenario in WIRE_SCENARIOS:
        load_wire(lake, scenario)
    build_silver(lake)
    return lake
