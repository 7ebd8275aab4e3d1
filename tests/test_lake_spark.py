"""Spark over the lake: delta-spark reads what delta-rs wrote and the other way round,
a Spark write is one commit with its positions, and every table is a SQL view by its name."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from spark_fixture import spark  # noqa: F401

from pipelines.lake import Lake, Positions

pytestmark = pytest.mark.spark

SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("key", pa.binary()),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)


def bronze_like(cluster: str, partition: int, offsets) -> pa.Table:
    offsets = list(offsets)
    return pa.table(
        {
            "cluster": [cluster] * len(offsets),
            "partition": pa.array([partition] * len(offsets), pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "key": [bytes([0, 1, o % 256]) for o in offsets],
            "ts": pa.array([1_700_000_000_000_000 + o for o in offsets], pa.timestamp("us", tz="UTC")),
        }
    )


@pytest.fixture
def lake(tmp_path, spark):  # noqa: F811
    lake = Lake(tmp_path / "lake", spark=spark)
    lake.create("b", SCHEMA, ["cluster", "partition"])
    return lake


def test_empty_table_reads_as_empty_dataframe_with_schema(lake):
    df = lake.read("b")
    assert df.count() == 0
    assert df.columns == SCHEMA.names
    assert dict(df.dtypes) == {"cluster": "string", "partition": "int", "offset": "bigint", "key": "binary", "ts": "timestamp"}


def test_spark_reads_partition_columns_from_delta_rs_files(lake):
    lake.append("b", pa.concat_tables([bronze_like("c1", 0, range(3)), bronze_like("c2", 7, range(10, 12))]))
    df = lake.read("b")
    assert df.columns == SCHEMA.names
    assert dict(df.dtypes)["partition"] == "int"
    got = sorted((r["cluster"], r["partition"], r["offset"], bytes(r["key"])) for r in df.collect())
    assert got == [("c1", 0, o, bytes([0, 1, o])) for o in range(3)] + [("c2", 7, o, bytes([0, 1, o])) for o in (10, 11)]


def test_spark_reads_a_given_version(lake):
    lake.append("b", bronze_like("c1", 0, range(3)))
    lake.append("b", bronze_like("c1", 0, range(3, 5)))
    assert lake.read("b", version=1).count() == 3
    assert lake.read("b").count() == 5


def test_write_df_commits_once_with_its_positions(lake, spark):  # noqa: F811
    from pyspark.sql import functions as F

    lake.append("b", pa.concat_tables([bronze_like("c1", 0, range(4)), bronze_like("c1", 1, range(2))]))
    derived = lake.read("b").groupBy("cluster", "partition").agg(F.count("*").alias("n"), F.max("ts").alias("last_ts"))
    lake.write_df("per_partition", derived, partition_by=["cluster"], positions=Positions("silver:b", {"silver:b": 1}))
    dt = DeltaTable(lake.uri("per_partition"))
    assert dt.version() == 1  # create + one write
    assert lake.positions("per_partition", "silver:b") == {"silver:b": 1}
    assert dt.transaction_version("silver:b") is not None  # the run, in delta-spark's txn
    p = dt.protocol()
    assert (p.min_reader_version, p.min_writer_version) == (1, 2)
    # Any Delta reader sees the rows, partition column included.
    rows = sorted((r["cluster"], r["partition"], r["n"]) for r in dt.to_pyarrow_table().to_pylist())
    assert rows == [("c1", 0, 4), ("c1", 1, 2)]
    back = lake.read("per_partition")
    assert sorted((r["cluster"], r["partition"], r["n"]) for r in back.collect()) == rows
    # Files carry statistics, so readers can skip them by range.
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    assert all(a["num_records"] >= 1 and a["max.n"] >= a["min.n"] for a in actions)


def test_write_df_overwrite_replaces_the_table(lake, spark):  # noqa: F811
    df = spark.createDataFrame([("c1", 1), ("c2", 2)], "cluster string, n long")
    lake.write_df("g", df, partition_by=["cluster"])
    lake.write_df("g", spark.createDataFrame([("c3", 3)], "cluster string, n long"), mode="overwrite")
    assert [tuple(r) for r in lake.read("g").collect()] == [("c3", 3)]
    assert DeltaTable(lake.uri("g")).to_pyarrow_table().num_rows == 1


def test_write_df_evolves_schema(lake, spark):  # noqa: F811
    lake.write_df("e", spark.createDataFrame([(1,)], "a long"))
    lake.write_df("e", spark.createDataFrame([(2, "x")], "a long, note string"))
    assert sorted((r["a"], r["note"]) for r in lake.read("e").collect()) == [(1, None), (2, "x")]


def test_every_table_is_a_sql_view(lake, spark):  # noqa: F811
    lake.append("b", bronze_like("c1", 3, range(5)))
    lake.write_df("g", spark.createDataFrame([("c1", 1)], "cluster string, n long"))
    assert lake.register_views(spark) == ["b", "g"]
    got = spark.sql("SELECT b.cluster, count(*) AS c FROM b JOIN g ON b.cluster = g.cluster GROUP BY b.cluster").collect()
    assert [(r["cluster"], r["c"]) for r in got] == [("c1", 5)]


def test_delta_rs_and_delta_spark_race_on_one_table(lake, spark):  # noqa: F811
    """Both engines append to one table at once (a delta-rs thread, delta-spark here): each
    loser of a race for a version re-reads the log and commits the next one. Every row
    lands once, every version is one commit."""
    import threading

    rounds = 6
    errors: list[BaseException] = []

    def arrow_writer():
        try:
            for i in range(rounds):
                lake.append("b", bronze_like("rs", 0, range(i * 10, i * 10 + 10)))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    thread = threading.Thread(target=arrow_writer)
    thread.start()
    for i in range(rounds):
        df = spark.createDataFrame(bronze_like("spark", 1, range(i * 10, i * 10 + 10)).to_pandas())
        lake.write_df("b", df)
    thread.join()
    assert not errors, errors
    got = sorted((r["cluster"], r["offset"]) for r in lake.read("b").select("cluster", "offset").collect())
    assert got == sorted([("rs", o) for o in range(rounds * 10)] + [("spark", o) for o in range(rounds * 10)])
    history = DeltaTable(lake.uri("b")).history()
    assert len(history) == 1 + 2 * rounds == lake.version("b") + 1


def _data_file(path, offsets) -> str:
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(bronze_like("-", 0, offsets).drop(["cluster", "partition"]), path)
    return str(path)


def test_one_read_gives_each_file_its_partition_values_and_a_filter_keeps_them(tmp_path, spark):  # noqa: F811
    """Files of several partitions (a null value among them) are one Parquet scan, each
    row carrying the values the log gives its file."""
    from pipelines.lake import sparkio

    files = {_data_file(tmp_path / "x" / "part-00000-a.c000.snappy.parquet", [1, 2]): {"cluster": "c1", "partition": 0},
             _data_file(tmp_path / "y" / "part-00000-b.c000.snappy.parquet", [3]): {"cluster": "c2", "partition": None},
             _data_file(tmp_path / "z" / "part-00001-c.c000.snappy.parquet", [4]): {"cluster": "c2", "partition": 5}}
    df = sparkio.read_files(spark, files, SCHEMA, ["cluster", "partition"])
    assert df.columns == SCHEMA.names
    assert sorted(((r["cluster"], r["partition"], r["offset"]) for r in df.collect()), key=lambda r: r[2]) == [
        ("c1", 0, 1), ("c1", 0, 2), ("c2", None, 3), ("c2", 5, 4)]
    assert "Union" not in df._jdf.queryExecution().optimizedPlan().toString()
    assert sorted(r["offset"] for r in df.filter("cluster = 'c2'").collect()) == [3, 4]


def test_files_of_one_name_in_two_partitions_are_read_apart(tmp_path, spark):  # noqa: F811
    """A name the log holds twice (no writer of the lake makes one, another tool could)
    cannot tell its rows' partitions apart: each partition is then read on its own."""
    from pipelines.lake import sparkio

    files = {_data_file(tmp_path / "x" / "part-0.parquet", [1, 2]): {"cluster": "c1", "partition": 0},
             _data_file(tmp_path / "y" / "part-0.parquet", [3]): {"cluster": "c2", "partition": 0},
             _data_file(tmp_path / "z" / "odd name ü.parquet", [4]): {"cluster": "c3", "partition": 1}}
    df = sparkio.read_files(spark, files, SCHEMA, ["cluster", "partition"])
    assert sorted((r["cluster"], r["partition"], r["offset"]) for r in df.collect()) == [
        ("c1", 0, 1), ("c1", 0, 2), ("c2", 0, 3), ("c3", 1, 4)]


_APPEND_JOBS = """
import json, sys
from pipelines.spark import get_spark
spark = get_spark("local[1]", app_name="append-jobs")
df = spark.range(3).selectExpr("cast(id as string) as cluster", "id as x")
tracker, jobs = spark.sparkContext.statusTracker(), []
for _ in range(3):
    before = len(tracker.getJobIdsForGroup(None))
    df.write.format("delta").mode("append").partitionBy("cluster").save(sys.argv[1])
    jobs.append(len(tracker.getJobIdsForGroup(None)) - before)
print(json.dumps(jobs))
"""


def test_an_append_costs_the_same_spark_jobs_whatever_the_machines_time_zone(tmp_path):
    """A machine off UTC (a laptop in Berlin) must not pay delta-spark's state rebuild after
    every commit (pipelines/spark.py): each append runs the Spark jobs it runs under UTC."""
    repo = Path(__file__).resolve().parents[1]
    jobs = {}
    for tz in ("UTC", "Europe/Berlin"):
        done = subprocess.run([sys.executable, "-c", _APPEND_JOBS, str(tmp_path / tz.replace("/", "-"))], cwd=repo,
                              env={**os.environ, "TZ": tz}, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        jobs[tz] = json.loads(done.stdout.strip().splitlines()[-1])
    assert jobs["Europe/Berlin"] == jobs["UTC"], jobs


def test_rows_the_driver_holds_become_a_local_relation_read_without_a_job(spark):  # noqa: F811
    """Group keys and other driver-side rows (group ids from Kafka: any text) come back
    exactly, and reading them starts no Spark job: a Python RDD would run a stage of
    Python workers on every read, in every table a run writes."""
    from pyspark.sql import functions as F
    from spark_fixture import spark_jobs

    from pipelines.spark import local_frame

    rows = [("c1", "g'; DROP TABLE x; --", 3), ("c1", "grupo-ñ \"quoted\"", None), (None, "", 2**40)]
    keys = local_frame(spark, rows, "cluster string, group_id string, n long")
    jobs, got = spark_jobs(spark, "local-frame", keys.collect)
    assert [tuple(r) for r in got] == rows
    assert jobs == []
    empty = local_frame(spark, [], "cluster string, topics array<string>, at timestamp")
    jobs, got = spark_jobs(spark, "local-frame-empty", empty.collect)
    assert got == [] and jobs == []
    assert empty.schema.simpleString() == "struct<cluster:string,topics:array<string>,at:timestamp>"
    # Used as a broadcast side, it selects exactly its groups.
    commits = spark.createDataFrame(pa.table({"cluster": ["c1", "c1", "c2"],
                                              "group_id": ["g'; DROP TABLE x; --", "other", "g'; DROP TABLE x; --"]}))
    picked = commits.join(F.broadcast(keys), ["cluster", "group_id"], "left_semi").collect()
    assert [tuple(r) for r in picked] == [("c1", "g'; DROP TABLE x; --")]
