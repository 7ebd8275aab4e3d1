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


def _contents(lake: Lake, name: str) -> list:
    table = lake.read_arrow(name)
    keep = [c for c in table.column_names if c not in VOLATILE]
    rows = table.select(keep).to_pylist()
    return sorted((tuple(sorted(r.items())) for r in rows), key=repr)


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
        ca, cb = _contents(a, name), _contents(b, name)
        assert ca == cb, name
        compared += bool(ca)
    # bronze, silver and gold tables with rows were compared, not just empty ones
    assert compared >= 8
