"""The unchanged pipeline on a real Spark standalone cluster gives the same tables as local mode.

Each pipeline runs in a subprocess of its own (`rebalance-audit run`), since a process
holds one SparkContext: one against `spark://127.0.0.1:<port>` (a master and a worker
started from pyspark's own launcher), one against `local[2]`. Every table of both lakes is
then compared row for row, except the columns that record *when* a row was ingested.
The quality checks run on the cluster only (the local run's would repeat them), so
`quality_results` is checked, not compared.

The input is the KIP-848 recording alone (a consumer-protocol group beside one classic
member): a lake whose first data is a KIP-848 group must pass every check and find the
crashed member's duplicate windows, on a cluster as in local mode.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.lake import Lake
from pipelines.lake.compare import table_rows
from pipelines.spark import SMALL_LAKE_CONF
from testbed.spark_standalone import StandaloneCluster
from tests.conftest import RECORDINGS

SCENARIO = RECORDINGS / "kip848_consumer_protocol"
# When a row was ingested (an identity first seen), and where Spark happened to put files, differ
# between runs by nature.
VOLATILE = {"ingested_at", "first_seen_at", "source_file"}
CLI = [sys.executable, "-c", "import sys; from rebalance_audit.cli import main; sys.exit(main())"]


def _run_pipeline(lake_dir: Path, master: str, *extra: str, env: dict[str, str] | None = None) -> None:
    cmd = CLI + [
        "run", "--lake", str(lake_dir), "--spark-master", master,
        "--segments", str(SCENARIO / "offsets_segments"), "--logs", str(SCENARIO / "server.log"), *extra,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1500,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.skipif(not SCENARIO.is_dir(), reason="recordings not available")
def test_standalone_cluster_gives_the_same_tables_as_local_mode(tmp_path):
    local_lake, cluster_lake = tmp_path / "local", tmp_path / "cluster"
    # On a cluster the pipeline forces no Spark setting: the operator's spark-defaults.conf
    # stands. Sized, as an operator would, for a lake of a few thousand rows: the settings
    # of the small-lake profile (pipelines/spark.py: they change how fast, never what) on
    # the driver and the executors, but four shuffle partitions, so that rows really move
    # between the executor's tasks.
    jvm = SMALL_LAKE_CONF["spark.driver.extraJavaOptions"]
    conf = {**SMALL_LAKE_CONF, "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4",
            "spark.databricks.delta.snapshotPartitions": "4", "spark.executor.extraJavaOptions": jvm}
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{k}  {v}\n" for k, v in conf.items()))
    with StandaloneCluster(cores=2, memory="1g", workdir=tmp_path / "spark") as cluster:
        _run_pipeline(cluster_lake, cluster.master_url, env={"SPARK_CONF_DIR": str(conf_dir)})
        # The executors really ran on the worker: its work folder holds this application.
        assert any((tmp_path / "spark" / "work").iterdir())
    _run_pipeline(local_lake, "local[2]", "--skip-checks")

    a, b = Lake(local_lake), Lake(cluster_lake)
    checks = b.read_arrow("quality_results").to_pylist()
    failed = [r for r in checks if not r["success"]]
    assert checks and not failed, failed
    windows = b.read_arrow("duplicate_windows").to_pylist()
    assert {w["cause"] for w in windows if w["group_id"] == "g-848"} >= {"crash"}, windows
    assert sorted(a.tables()) == sorted(set(b.tables()) - {"quality_results"})
    compared = 0
    for name in a.tables():
        ca, cb = table_rows(a, name, VOLATILE), table_rows(b, name, VOLATILE)
        assert ca == cb, name
        compared += bool(ca)
    # bronze, silver and gold tables with rows were compared, not just empty ones
    assert compared >= 8


# A driver of its own (one SparkContext per process) that pins a result the way gold does,
# SIGKILLs every executor of the application, waits for the master's replacement, then reads
# the pinned result. "local" checkpoints it as gold did before (in the executor's block
# manager), the oracle that the loss is real.
PIN_THEN_LOSE_THE_EXECUTOR = r"""
import contextlib, os, sys, time
from pathlib import Path
from pyspark.sql import SparkSession, functions as F
from pipelines.gold import pin
from pipelines.spark import reliable_checkpoints

master, lake, workdir, how = sys.argv[1:5]
spark = SparkSession.builder.master(master).appName("pin-" + how).getOrCreate()
jsc = spark.sparkContext._jsc.sc()

def executors():
    pids = set()
    for proc in Path("/proc").iterdir():
        try:
            if os.readlink(proc / "cwd").startswith(workdir) and b"CoarseGrainedExecutorBackend" in (proc / "cmdline").read_bytes():
                pids.add(int(proc.name))
        except (OSError, ValueError):
            pass
    return pids

with reliable_checkpoints(spark, lake) if how == "reliable" else contextlib.nullcontext():
    df = spark.range(0, 200_000, numPartitions=4).withColumn("k", F.col("id") % 7)
    pinned = pin(df) if how == "reliable" else df.localCheckpoint(eager=True)
    lost = executors()
    assert lost, "no executor found"
    for pid in lost:
        os.kill(pid, 9)
    deadline = time.monotonic() + 120
    while not (executors() - lost) or jsc.getExecutorMemoryStatus().size() < 2:
        assert time.monotonic() < deadline, "no new executor"
        time.sleep(0.5)
    print("ROWS", pinned.groupBy("k").count().agg(F.sum("count")).first()[0], flush=True)
    if how == "reliable":
        print("FILES", sum(1 for _ in Path(lake, "_checkpoints").rglob("part-*")), flush=True)
print("LEFT", sum(1 for _ in Path(lake, "_checkpoints").rglob("part-*")) if Path(lake, "_checkpoints").exists() else 0)
"""


def test_results_gold_pins_outlive_the_executor_that_computed_them(tmp_path):
    with StandaloneCluster(cores=1, memory="1g", workdir=tmp_path / "spark") as cluster:
        runs = {}
        for how in ("local", "reliable"):
            runs[how] = subprocess.run(
                [sys.executable, "-c", PIN_THEN_LOSE_THE_EXECUTOR, cluster.master_url, str(tmp_path / how),
                 str(tmp_path / "spark" / "work"), how],
                capture_output=True, text=True, timeout=600, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    # Checkpointed in the lost executor, the result is gone with it.
    assert runs["local"].returncode != 0 and "ROWS" not in runs["local"].stdout
    assert "checkpoint" in runs["local"].stderr.lower(), runs["local"].stderr[-3000:]
    # Checkpointed under the lake, every row is read back by the new executor; the folder
    # is removed when the job is done.
    assert runs["reliable"].returncode == 0, runs["reliable"].stderr[-3000:]
    lines = dict(line.split() for line in runs["reliable"].stdout.splitlines())
    assert lines["ROWS"] == "200000" and int(lines["FILES"]) >= 4 and lines["LEFT"] == "0"
