"""Incremental building blocks of the lake: `added_since` (rows of the files added after a
version) and `replace_rows` (delete + insert by key: one delta-spark MERGE, one commit)."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from spark_fixture import spark  # noqa: F401

from pipelines.lake import Lake, LakeError, Positions

pytestmark = pytest.mark.spark

KEYS = "cluster string, group_id string"
ROWS = "cluster string, group_id string, n long"

# Group ids are untrusted strings: quotes, SQL, separators, percent signs, newlines.
HOSTILE = ["o'brien", "x' OR '1'='1", 'dq"', "a/b%20c", "semi;colon --", "line\nbreak", ""]


def rows_of(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def commit_actions(lake: Lake, name: str, version: int) -> list[dict]:
    path = os.path.join(lake.uri(name), "_delta_log", f"{version:020d}.json")
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture
def lake(tmp_path, spark):  # noqa: F811
    return Lake(tmp_path / "lake", spark=spark)


def test_added_since_reads_only_files_added_after_the_version(lake, spark):  # noqa: F811
    schema = pa.schema([("cluster", pa.string()), ("group_id", pa.string()), ("n", pa.int64())])
    lake.create("s", schema, ["cluster"])
    v1 = lake.append("s", pa.table({"cluster": ["a", "b"], "group_id": ["g1", "g2"], "n": [1, 2]}, schema=schema))
    v2 = lake.append("s", pa.table({"cluster": ["a"], "group_id": ["g3"], "n": [3]}, schema=schema))
    lake.append("s", pa.table({"cluster": ["b"], "group_id": ["g4"], "n": [4]}, schema=schema))
    assert rows_of(lake.added_since("s", v1)) == [("a", "g3", 3), ("b", "g4", 4)]
    assert rows_of(lake.added_since("s", v2)) == [("b", "g4", 4)]
    assert rows_of(lake.added_since("s", lake.version("s"))) == []
    assert lake.files_added_since("s", lake.version("s")) == {}
    everything = [("a", "g1", 1), ("a", "g3", 3), ("b", "g2", 2), ("b", "g4", 4)]
    assert rows_of(lake.added_since("s", None)) == everything
    assert rows_of(lake.added_since("s", -1)) == everything
    with pytest.raises(LakeError, match="not at 99"):
        lake.added_since("s", 99)


# Cluster names as a user may spell them: the two writers escape such partition folder
# names differently, and Spark's parsing of delta-rs's decodes "ü" as two characters.
ODD_CLUSTERS = ["prod-eu ü", "a b/c%d=e:f", "x#y?z[1]{2}*", "plain"]


def test_partition_values_come_from_the_log_whichever_engine_wrote_the_folder(lake, spark):  # noqa: F811
    schema = pa.schema([("cluster", pa.string()), ("partition", pa.int32()), ("n", pa.int64())])
    lake.create("s", schema, ["cluster", "partition"])
    v0 = lake.append("s", pa.table({"cluster": ODD_CLUSTERS, "partition": pa.array([0, 1, 2, 3], pa.int32()),
                                    "n": [1, 2, 3, 4]}, schema=schema))
    # delta-spark writes the next rows: its own folder names, the same values.
    lake.write_df("s", spark.createDataFrame([(c, 7, 10 + i) for i, c in enumerate(ODD_CLUSTERS)],
                                             "cluster string, partition int, n long"))
    every = sorted([(c, i, i + 1) for i, c in enumerate(ODD_CLUSTERS)]
                   + [(c, 7, 10 + i) for i, c in enumerate(ODD_CLUSTERS)])
    assert rows_of(lake.read("s")) == every
    assert rows_of(lake.added_since("s", None)) == every
    assert rows_of(lake.added_since("s", v0)) == sorted((c, 7, 10 + i) for i, c in enumerate(ODD_CLUSTERS))
    assert rows_of(lake.read("s", clusters=["prod-eu ü"])) == [("prod-eu ü", 0, 1), ("prod-eu ü", 7, 10)]
    assert rows_of(lake.read("s", v0).where("partition = 1")) == [("a b/c%d=e:f", 1, 2)]
    # A rewrite: the files it removed still read with their own partition values.
    lake.overwrite_where("s", pa.table({"cluster": ["plain"], "partition": pa.array([9], pa.int32()), "n": [99]},
                                       schema=schema), "cluster = 'plain'")
    added, removed = lake.file_changes("s", lake.version("s") - 1)
    assert rows_of(lake.rows_of_files("s", added)) == [("plain", 9, 99)]
    assert rows_of(lake.rows_of_files("s", removed)) == [("plain", 3, 4), ("plain", 7, 13)]


def test_replace_rows_is_one_commit_and_leaves_other_keys_alone(lake, spark):  # noqa: F811
    first = spark.createDataFrame(
        [("c1", "g1", 1), ("c1", "g1", 2), ("c1", "g2", 3), ("c2", "g1", 4), ("c2", "g3", 5)], ROWS)
    v0 = lake.replace_rows("t", first, first.select("cluster", "group_id"), ["cluster", "group_id"],
                           partition_by=["cluster"], positions=Positions("gold", {"gold:in": 7}))
    assert lake.partition_by("t") == ["cluster"]
    assert rows_of(lake.read("t")) == rows_of(first)
    assert lake.positions("t", "gold") == {"gold:in": 7}
    assert lake.commit_rows("t", v0) == 5

    # Replace (c1, g1) by one row and delete (c2, g3) (a key without new rows); c1/g2 and c2/g1 stay.
    new = spark.createDataFrame([("c1", "g1", 10)], ROWS)
    keys = spark.createDataFrame([("c1", "g1"), ("c2", "g3")], KEYS)
    v1 = lake.replace_rows("t", new, keys, ["cluster", "group_id"], positions=Positions("gold", {"gold:in": 8, "gold:other": 3}))
    assert v1 == v0 + 1  # one new version: the delete and the insert are atomic
    assert rows_of(lake.read("t")) == [("c1", "g1", 10), ("c1", "g2", 3), ("c2", "g1", 4)]
    assert lake.positions("t", "gold") == {"gold:in": 8, "gold:other": 3}
    actions = commit_actions(lake, "t", v1)
    assert any("remove" in a for a in actions) and any("add" in a for a in actions)
    assert {a["txn"]["appId"] for a in actions if "txn" in a} == {"gold"}  # the run, in delta-spark's txn
    # The previous version is intact (time travel sees the old rows).
    assert rows_of(lake.read("t", version=v0)) == rows_of(first)
    # Any Delta reader agrees.
    got = DeltaTable(lake.uri("t")).to_pyarrow_table().to_pylist()
    assert sorted((r["cluster"], r["group_id"], r["n"]) for r in got) == [("c1", "g1", 10), ("c1", "g2", 3), ("c2", "g1", 4)]


def test_replace_rows_reads_only_partitions_the_keys_name(lake, spark):  # noqa: F811
    df = spark.createDataFrame([("c1", "g1", 1), ("c2", "g1", 2)], ROWS)
    lake.replace_rows("t", df, df.select("cluster", "group_id"), ["cluster", "group_id"], partition_by=["cluster"])
    c2_files = {a["path"] for a in pa.table(lake.table("t").get_add_actions(flatten=True)).to_pylist() if a["partition.cluster"] == "c2"}
    v = lake.replace_rows("t", spark.createDataFrame([("c1", "g1", 9)], ROWS),
                          spark.createDataFrame([("c1", "g1")], KEYS), ["cluster", "group_id"])
    removed = {a["remove"]["path"] for a in commit_actions(lake, "t", v) if "remove" in a}
    assert removed and not removed & c2_files
    assert rows_of(lake.read("t")) == [("c1", "g1", 9), ("c2", "g1", 2)]


def test_replace_rows_with_untrusted_keys(lake, spark):  # noqa: F811
    data = [("prod", g, i) for i, g in enumerate(HOSTILE)] + [("odd' cluster/%x", g, 100 + i) for i, g in enumerate(HOSTILE)]
    df = spark.createDataFrame(data, ROWS)
    lake.replace_rows("t", df, df.select("cluster", "group_id"), ["cluster", "group_id"], partition_by=["cluster"])
    assert rows_of(lake.read("t")) == sorted(data)
    # Replace two hostile groups in the odd cluster only; the same ids in "prod" must stay.
    targets = [("odd' cluster/%x", "x' OR '1'='1"), ("odd' cluster/%x", "line\nbreak")]
    new = spark.createDataFrame([(c, g, -1) for c, g in targets], ROWS)
    lake.replace_rows("t", new, spark.createDataFrame(targets, KEYS), ["cluster", "group_id"])
    expected = sorted([r for r in data if (r[0], r[1]) not in targets] + [(c, g, -1) for c, g in targets])
    assert rows_of(lake.read("t")) == expected


def test_replace_rows_with_nothing_to_do_does_not_commit(lake, spark):  # noqa: F811
    df = spark.createDataFrame([("c1", "g1", 1)], ROWS)
    v = lake.replace_rows("t", df, df.select("cluster", "group_id"), ["cluster", "group_id"], partition_by=["cluster"])
    empty_rows = spark.createDataFrame([], ROWS)
    assert lake.replace_rows("t", empty_rows, spark.createDataFrame([("c1", "nope")], KEYS), ["cluster", "group_id"]) == v
    # Positions alone are still recorded (a run that found nothing to change).
    v2 = lake.replace_rows("t", empty_rows, spark.createDataFrame([], KEYS), ["cluster", "group_id"], positions=Positions("gold", {"gold:x": 1}))
    assert v2 == v + 1 and lake.positions("t", "gold") == {"gold:x": 1}
    assert rows_of(lake.read("t")) == [("c1", "g1", 1)]


def test_replace_rows_rejects_missing_key_columns(lake, spark):  # noqa: F811
    df = spark.createDataFrame([("c1", "g1", 1)], ROWS)
    with pytest.raises(LakeError, match="group_id"):
        lake.replace_rows("t", df, spark.createDataFrame([("c1",)], "cluster string"), ["cluster", "group_id"])


def test_partition_max_and_file_changes_come_from_the_log(lake):
    schema = pa.schema([("cluster", pa.string()), ("partition", pa.int32()), ("offset", pa.int64())])
    lake.create("b", schema, ["cluster", "partition"])
    v1 = lake.append("b", pa.table({"cluster": ["a", "a", "b"], "partition": pa.array([0, 1, 0], pa.int32()),
                                    "offset": [5, 9, 2]}, schema=schema))
    lake.append("b", pa.table({"cluster": ["a"], "partition": pa.array([0], pa.int32()), "offset": [7]}, schema=schema))
    assert lake.partition_max("b", "offset") == {("a", 0): 7, ("a", 1): 9, ("b", 0): 2}
    assert lake.partition_max("b", "offset", v1) == {("a", 0): 5, ("a", 1): 9, ("b", 0): 2}
    added, removed = lake.file_changes("b", v1)
    assert len(added) == 1 and removed == {}
    lake.optimize("b")  # a rewrite: files go, so the table was not only appended to
    assert lake.file_changes("b", v1)[1]


def _bronze_like(lake: Lake, name: str) -> pa.Schema:
    schema = pa.schema([("cluster", pa.string()), ("partition", pa.int32()), ("offset", pa.int64())])
    lake.create(name, schema, ["cluster", "partition"])
    return schema


def _rows(schema, cluster: str, offsets) -> pa.Table:
    offsets = list(offsets)
    return pa.table({"cluster": [cluster] * len(offsets), "partition": pa.array([0] * len(offsets), pa.int32()),
                     "offset": offsets}, schema=schema)


def test_optimize_then_vacuum_keep_the_rows_and_the_basic_protocol(lake, spark):  # noqa: F811
    schema = _bronze_like(lake, "b")
    for i in range(6):
        lake.append("b", _rows(schema, "a", range(i * 10, i * 10 + 10)), positions=Positions("w", {"i": i}))
    before = sorted(lake.read_arrow("b").column("offset").to_pylist())
    files_before = lake.table("b").file_uris()
    metrics = lake.optimize("b")
    assert metrics["numFilesRemoved"] == len(files_before) and metrics["numFilesAdded"] == 1
    assert lake.positions("b", "w") == {"i": 5}  # the compaction's commit keeps every txn
    # Below the table's retention (7 days) delta-spark refuses, saying why.
    with pytest.raises(Exception, match="(?i)retention"):
        lake.vacuum("b", retain_hours=0)
    assert lake.vacuum("b") == []  # the compacted files are younger than 7 days
    # As a user shortens a table's retention: then VACUUM deletes the superseded files.
    spark.sql("ALTER TABLE delta.`" + lake.spark_uri("b") + "` SET TBLPROPERTIES "
              "('delta.deletedFileRetentionDuration' = 'interval 0 hours')")
    assert sorted(lake.vacuum("b", retain_hours=0, dry_run=True)) == sorted(files_before)
    assert all(os.path.exists(f) for f in files_before)  # a dry run deletes nothing
    assert sorted(lake.vacuum("b", retain_hours=0)) == sorted(files_before)
    assert not any(os.path.exists(f) for f in files_before)
    assert sorted(lake.read_arrow("b").column("offset").to_pylist()) == before
    assert rows_of(lake.read("b").select("offset")) == [(o,) for o in before]
    dt = DeltaTable(lake.uri("b"))
    p = dt.protocol()
    assert (p.min_reader_version, p.min_writer_version) == (1, 2)
    assert not p.reader_features and not p.writer_features


def test_a_compaction_of_rows_already_seen_is_no_change_to_the_incremental_readers(lake):
    schema = _bronze_like(lake, "b")
    for i in range(3):
        lake.append("b", _rows(schema, "a" if i else "b", [i]))
    seen = lake.version("b")
    lake.optimize("b")
    assert lake.version("b") == seen + 1
    assert lake.file_changes("b", seen) == ({}, {})
    assert lake.changed_partition_values("b", seen, "cluster") == set()
    assert rows_of(lake.added_since("b", seen)) == []
    # What comes after it is seen as new, and only that.
    lake.append("b", _rows(schema, "c", [7]))
    added, removed = lake.file_changes("b", seen)
    assert len(added) == 1 and removed == {}
    assert rows_of(lake.added_since("b", seen).select("cluster", "offset")) == [("c", 7)]
    assert lake.added_partition_values("b", seen, "cluster") == {"c"}
