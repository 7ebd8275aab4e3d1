"""The lake's Delta operations on real tables in a temp folder: appends, keyed inserts,
replace-where, versions, schema evolution, positions and the ledger's pruning
(OPTIMIZE and VACUUM, which go through delta-spark: test_lake_replace.py)."""
from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

from pipelines.lake import Lake, LakeError, Positions, PositionsLost

SCHEMA = pa.schema([("cluster", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("value", pa.binary())])
KEY = ["cluster", "partition", "offset"]


def rows(cluster: str, partition: int, offsets, value: bytes = b"v") -> pa.Table:
    offsets = list(offsets)
    return pa.table(
        {
            "cluster": [cluster] * len(offsets),
            "partition": pa.array([partition] * len(offsets), pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "value": [value + str(o).encode() for o in offsets],
        }
    )


def keys(table: pa.Table) -> list[tuple]:
    return sorted(zip(*(table.column(k).to_pylist() for k in KEY)))


@pytest.fixture
def lake(tmp_path):
    lake = Lake(tmp_path / "lake")
    lake.create("t", SCHEMA, ["cluster", "partition"])
    return lake


def test_append_then_read_back(lake):
    v = lake.append("t", rows("a", 0, range(5)))
    assert v == 1
    got = lake.read_arrow("t")
    assert keys(got) == [("a", 0, o) for o in range(5)]
    assert sorted(got.column("value").to_pylist()) == [b"v%d" % o for o in range(5)]


def test_insert_if_absent_is_idempotent_and_dedups_within_batch(lake):
    first = lake.insert_if_absent("t", rows("a", 0, [1, 2, 3, 3]), KEY, "offset")
    assert first.num_rows == 3
    version = lake.version("t")
    again = lake.insert_if_absent("t", rows("a", 0, [1, 2, 3], value=b"other"), KEY, "offset")
    assert again.num_rows == 0
    assert lake.version("t") == version  # nothing new, no commit
    mixed = lake.insert_if_absent("t", pa.concat_tables([rows("a", 0, [3, 4]), rows("a", 1, [3]), rows("b", 0, [3])]), KEY, "offset")
    assert keys(mixed) == [("a", 0, 4), ("a", 1, 3), ("b", 0, 3)]
    table = lake.read_arrow("t")
    assert len(keys(table)) == len(set(keys(table))) == 6
    # The first copy wins: the rewritten value of offset 1 was not stored.
    assert set(table.filter(ds.field("offset") == 1).column("value").to_pylist()) == {b"v1"}


def test_insert_if_absent_reads_only_overlapping_files(lake):
    for start in range(0, 1000, 100):
        lake.append("t", rows("a", 0, range(start, start + 100)))
    lake.append("t", rows("a", 1, range(0, 1000)))
    batch = rows("a", 0, range(450, 460))
    dt = lake.table("t")
    expr = lake._batch_filter(dt, batch, "offset")
    files = [f.path for f in dt.to_pyarrow_dataset().get_fragments(filter=expr)]
    # Only the one file of partition 0 holding offsets 400-499 is opened, of 11 files.
    assert len(dt.file_uris()) == 11
    assert len(files) == 1
    existing = lake._existing_keys(dt, batch, KEY, "offset")
    assert sorted(existing.column("offset").to_pylist()) == list(range(450, 460))


def test_positions_commit_with_rows(lake):
    v0 = lake.version("t")
    kafka = "kafka:a"
    inserted = lake.insert_if_absent("t", rows("a", 0, range(10)), KEY, "offset",
                                     positions=Positions(kafka, {"kafka:a:0": 10}, partial=True))
    assert inserted.num_rows == 10
    assert lake.version("t") == v0 + 1  # rows and the run naming their positions: one commit
    assert lake.positions("t", kafka) == {"kafka:a:0": 10}
    # Positions move even when every row was already there (an empty commit of positions);
    # a partial update keeps the keys it does not name.
    lake.insert_if_absent("t", rows("a", 0, range(5, 10)), KEY, "offset",
                          positions=Positions(kafka, {"kafka:a:1": 3}, partial=True))
    assert lake.version("t") == v0 + 2
    assert lake.positions("t", kafka) == {"kafka:a:0": 10, "kafka:a:1": 3}
    assert lake.positions("t", kafka, version=v0 + 1) == {"kafka:a:0": 10}
    # A whole map replaces; another writer's positions on the same table are its own.
    lake.append("t", rows("a", 0, []), positions=Positions(kafka, {"kafka:a:0": 12}))
    lake.append("t", rows("a", 0, []), positions=Positions("other", {"o": 1}))
    assert lake.positions("t", kafka) == {"kafka:a:0": 12}
    assert lake.positions("t", "other") == {"o": 1}
    assert lake.positions("t", "nobody") == {}
    # The commit names the run in a Delta `txn` any reader sees: plain delta-rs too.
    run = DeltaTable(lake.uri("t")).transaction_version(kafka)
    assert lake.ledger.values(kafka, run) == {"kafka:a:0": 12}


def test_positions_survive_checkpoint_and_a_fresh_process(lake):
    lake.append("t", rows("a", 0, [1]), positions=Positions("w", {"x": 1}))
    lake.table("t").create_checkpoint()
    lake.append("t", rows("a", 0, [2]), positions=Positions("w", {"x": 1, "y": 5}))
    lake.table("t").create_checkpoint()
    assert Lake(lake.root).positions("t", "w") == {"x": 1, "y": 5}
    assert Lake(lake.root).positions("t", "w", version=1) == {"x": 1}


def test_a_run_the_ledger_lost_is_a_loud_error(lake):
    lake.append("t", rows("a", 0, [1]), positions=Positions("w", {"x": 1}))
    import shutil

    shutil.rmtree(lake.ledger.uri)
    with pytest.raises(PositionsLost, match="positions lost"):
        Lake(lake.root).positions("t", "w")


def test_a_crash_between_ledger_and_commit_leaves_the_old_positions(lake):
    lake.append("t", rows("a", 0, [1]), positions=Positions("w", {"x": 1}))
    # Run recorded, commit never made (the process died in between).
    lake.ledger.record(Positions("w", {"x": 2}), after=lake.table("t").transaction_version("w"))
    assert Lake(lake.root).positions("t", "w") == {"x": 1}
    assert lake.read_arrow("t").num_rows == 1


def test_overwrite_where_replaces_one_partition(lake):
    lake.append("t", pa.concat_tables([rows("a", 0, range(3)), rows("b", 0, range(3))]))
    lake.overwrite_where("t", rows("a", 0, [7]), "cluster = 'a'")
    assert keys(lake.read_arrow("t")) == [("a", 0, 7), ("b", 0, 0), ("b", 0, 1), ("b", 0, 2)]


def test_read_a_given_version(lake):
    lake.append("t", rows("a", 0, range(3)))
    lake.append("t", rows("a", 0, range(3, 6)))
    assert lake.read_arrow("t", version=1).num_rows == 3
    assert lake.read_arrow("t").num_rows == 6


def test_schema_evolution_adds_nullable_columns(lake):
    lake.append("t", rows("a", 0, [1]))
    wider = rows("a", 0, [2]).append_column("note", pa.array(["hi"]))
    with pytest.raises(LakeError, match="note"):
        lake.append("t", wider)
    lake.append("t", wider, evolve=True)
    got = {r["offset"]: r["note"] for r in lake.read_arrow("t").to_pylist()}
    assert got == {1: None, 2: "hi"}
    clash = rows("a", 0, [3]).append_column("note", pa.array([5], pa.int64()))
    with pytest.raises(LakeError, match="note"):
        lake.evolve("t", clash.schema)


def test_the_ledger_prunes_runs_no_table_names_once_they_are_old(lake):
    for n in range(3):
        lake.append("t", rows("a", 0, [n]), positions=Positions("w", {"x": n}))
    lake.append("t", rows("a", 0, [9]), positions=Positions("other", {"o": 1}))
    dt = lake.table("t")
    keep = {("w", dt.transaction_version("w")), ("other", dt.transaction_version("other"))}
    # Younger than the cutoff: kept although no table names them (a writer may be between
    # recording and committing; a table version within time travel may name them).
    assert lake.ledger.prune(keep, recorded_before_us=0) == 0
    assert lake.ledger.prune(keep, recorded_before_us=time.time_ns() // 1000 + 1) == 2
    assert lake.positions("t", "w") == {"x": 2} and lake.positions("t", "other") == {"o": 1}
    with pytest.raises(PositionsLost):
        lake.positions("t", "w", version=1)
    assert len(DeltaTable(lake.ledger.uri).file_uris()) == 1  # compacted


def test_tables_lists_only_delta_tables(lake, tmp_path):
    os.makedirs(tmp_path / "lake" / "not_a_table")
    lake.create("u", SCHEMA)
    assert lake.tables() == ["t", "u"]


def test_bad_names_are_refused(lake):
    with pytest.raises(LakeError):
        lake.uri("../escape")
    with pytest.raises(LakeError, match="no table"):
        lake.read_arrow("missing")


def test_commit_metadata_is_recorded(lake):
    lake.append("t", rows("a", 0, [1]), metadata={"rebalance_audit.ingest": "segments"})
    last = lake.table("t").history(1)[0]
    assert last.get("rebalance_audit.ingest") == "segments" or json.dumps(last).find("segments") >= 0
