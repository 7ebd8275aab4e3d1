"""Silver is incremental: bronze arriving in pieces gives the same tables as bronze at once.

Real records (two recordings' broker segment files, with their transaction markers and
KIP-848 records) are cut per `__consumer_offsets` partition at the middle offset, so
transactions straddle the cut (their COMMIT markers arrive with the second increment)
and groups continue across it. A run that dies between two silver tables is repaired by
the next run.
"""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from pipelines.ingest.schemas import OFFSETS_RECORDS, TOPIC_METADATA, ensure
from pipelines.ingest.segments import read_segment_file
from pipelines.lake import Lake
from pipelines.segments import discover
from pipelines.silver import decode_job, runner
from tests.conftest import RECORDINGS
from tests.recordings_lake import build_silver, spark  # noqa: F401

SCENARIOS = ("transactional_commits", "kip848_consumer_protocol", "static_membership")
TABLES = (*decode_job.DECODED_TABLES, "target_assignments")

pytestmark = pytest.mark.skipif(not RECORDINGS.is_dir(), reason="../shared/recordings not present")


def _bronze_rows() -> list[dict]:
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    rows = []
    for scenario in SCENARIOS:
        for seg in discover([str(RECORDINGS / scenario / "offsets_segments")]):
            rows += read_segment_file(seg, scenario, at).records.to_pylist()
    return rows


def _halves(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Each (cluster, partition) cut at its middle offset."""
    by_part: dict[tuple, list[int]] = {}
    for r in rows:
        by_part.setdefault((r["cluster"], r["partition"]), []).append(r["offset"])
    cut = {k: sorted(v)[len(v) // 2] for k, v in by_part.items()}
    first = [r for r in rows if r["offset"] < cut[(r["cluster"], r["partition"])]]
    second = [r for r in rows if r["offset"] >= cut[(r["cluster"], r["partition"])]]
    return first, second


def _load(lake: Lake, rows: list[dict]) -> None:
    ensure(lake, OFFSETS_RECORDS)
    lake.insert_if_absent(OFFSETS_RECORDS.name, pa.Table.from_pylist(rows), key=list(OFFSETS_RECORDS.key),
                          range_column="offset")


def _content(lake: Lake, table: str) -> list[tuple]:
    """The table's rows as a sorted list (order and files do not matter)."""
    if not lake.exists(table):
        return []
    data = lake.read_arrow(table)
    return sorted((tuple(repr(v) for v in row.values()) for row in data.to_pylist()))


@pytest.fixture(scope="module")
def rows():
    return _bronze_rows()


@pytest.fixture(scope="module")
def at_once(tmp_path_factory, spark, rows):  # noqa: F811
    lake = Lake(tmp_path_factory.mktemp("silver-at-once"), spark=spark)
    _load(lake, rows)
    build_silver(lake)
    return lake


def test_two_increments_give_the_tables_of_one(tmp_path, spark, rows, at_once):  # noqa: F811
    first, second = _halves(rows)
    lake = Lake(tmp_path / "lake", spark=spark)
    _load(lake, first)
    build_silver(lake)
    # The cut leaves transactions open: their commits wait for the markers of part two.
    assert runner.OPEN_TXN in lake.tables() and lake.read_arrow(runner.OPEN_TXN).num_rows > 0
    _load(lake, second)
    build_silver(lake)
    # The KIP-848 groups that continue across the cut were recomputed and replaced, not the
    # whole table rewritten.
    assert lake.table("target_assignments").history(1)[0]["operation"] == "MERGE"
    assert lake.read_arrow(runner.OPEN_TXN).num_rows == at_once.read_arrow(runner.OPEN_TXN).num_rows
    for table in TABLES:
        assert _content(lake, table) == _content(at_once, table), table
    assert lake.read_arrow("offset_commits").num_rows > 0
    assert lake.read_arrow("consumer_group_epochs").num_rows > 0


def test_a_run_with_nothing_new_commits_nothing(at_once):
    lake = at_once
    versions = {t: lake.version(t) for t in lake.tables()}
    build_silver(lake)
    assert {t: lake.version(t) for t in lake.tables()} == versions


def test_a_run_that_dies_between_tables_is_repaired_by_the_next(tmp_path, spark, rows, at_once, monkeypatch):  # noqa: F811
    first, second = _halves(rows)
    lake = Lake(tmp_path / "lake", spark=spark)
    _load(lake, first)
    build_silver(lake)
    _load(lake, second)
    real_write = runner._write

    def dying_write(lake_, run, table, df, source, **kw):
        # A crash after member_assignments committed and before group_generations did.
        if table == "group_generations":
            raise RuntimeError("simulated crash")
        return real_write(lake_, run, table, df, source, **kw)

    monkeypatch.setattr(runner, "_write", dying_write)
    with pytest.raises(RuntimeError, match="simulated crash"):
        runner.update_offsets_silver(lake)
    monkeypatch.setattr(runner, "_write", real_write)
    behind = runner._consumed(lake, "group_generations", runner.BRONZE_OFFSETS)
    assert behind < runner._consumed(lake, "member_assignments", runner.BRONZE_OFFSETS)
    build_silver(lake)
    for table in TABLES:
        assert _content(lake, table) == _content(at_once, table), table


def test_a_topic_name_sampled_later_replaces_the_groups_that_name_it(tmp_path, spark, rows):  # noqa: F811
    """A name sampled live (bronze topic_metadata → topic_ids) for a topic id the KIP-848
    deltas name recomputes those groups only, and the table equals one built whole."""
    lake = Lake(tmp_path / "lake", spark=spark)
    _load(lake, rows)
    build_silver(lake)
    named = lake.read_arrow("target_assignments").to_pylist()
    cluster, topic_id, topic = next((r["cluster"], r["topic_id"], r["topic"]) for r in named if r["topic"])
    groups = {r["group_id"] for r in named if r["cluster"] == cluster and r["topic_id"] == topic_id}
    ensure(lake, TOPIC_METADATA)
    sample = pa.Table.from_pylist([{"cluster": cluster, "topic_id": topic_id, "topic": topic, "num_partitions": 3,
                                    "sampled_at": dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)}],
                                  schema=TOPIC_METADATA.schema)
    lake.insert_if_absent(TOPIC_METADATA.name, sample, key=list(TOPIC_METADATA.key))
    assert runner.update_topic_names(lake) == 1
    assert runner.update_target_assignments(lake) == sum(
        1 for r in named if r["cluster"] == cluster and r["group_id"] in groups)
    assert lake.table("target_assignments").history(1)[0]["operation"] == "MERGE"
    whole = Lake(tmp_path / "whole", spark=spark)
    _load(whole, rows)
    ensure(whole, TOPIC_METADATA)
    whole.insert_if_absent(TOPIC_METADATA.name, sample, key=list(TOPIC_METADATA.key))
    build_silver(whole)
    runner.update_topic_names(whole)
    runner.update_target_assignments(whole)
    assert _content(lake, "target_assignments") == _content(whole, "target_assignments")
