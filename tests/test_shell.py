"""`rebalance-audit shell`: the real pyspark shell starts with delta-spark configured and
every lake table as a view; time travel and DESCRIBE HISTORY work in it as in any Spark."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from pipelines.lake import Lake

CLI = [str(Path(sys.executable).with_name("rebalance-audit"))]


def test_the_pyspark_shell_has_every_table_as_a_view(tmp_path):
    root = tmp_path / "odd `lake` dir"  # a backtick in the path: quoted, not spliced
    lake = Lake(root)
    schema = pa.schema([("cluster", pa.string()), ("group_id", pa.string())])
    lake.create("offset_commits", schema, ["cluster"])
    lake.append("offset_commits", pa.table({"cluster": ["c"], "group_id": ["g1"]}, schema=schema))
    lake.append("offset_commits", pa.table({"cluster": ["c", "c"], "group_id": ["g2", "x' OR 1=1"]}, schema=schema))
    path = lake.uri("offset_commits").replace("`", "``")
    script = "\n".join([
        "print('VIEW', spark.sql('SELECT count(*) FROM offset_commits').first()[0])",
        f"print('TRAVEL', spark.sql('SELECT count(*) FROM delta.`{path}` VERSION AS OF 1').first()[0])",
        f"print('HISTORY', spark.sql('DESCRIBE HISTORY delta.`{path}`').count())",
        "",
    ])
    # A piped stdin is not a terminal: -i keeps Python interactive, so the start-up files run.
    env = {**os.environ, "PYSPARK_DRIVER_PYTHON_OPTS": "-i"}
    done = subprocess.run([*CLI, "shell", "--lake", str(root), "--spark-master", "local[1]"], input=script,
                          capture_output=True, text=True, env=env, timeout=600)
    out = done.stdout
    assert "rebalance-audit: views offset_commits" in out, done.stderr[-2000:]
    assert "VIEW 3" in out and "TRAVEL 1" in out and "HISTORY 3" in out, (out, done.stderr[-2000:])


def test_print_gives_the_command_and_spark_sql_needs_a_distribution(tmp_path):
    Lake(tmp_path / "lake").create("t", pa.schema([("a", pa.int64())]))
    done = subprocess.run([*CLI, "shell", "--lake", str(tmp_path / "lake"), "--print"], capture_output=True, text=True)
    assert done.returncode == 0
    assert "io.delta.sql.DeltaSparkSessionExtension" in done.stdout and "delta-spark_4.1_2.13" in done.stdout
    env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"}
    done = subprocess.run([*CLI, "shell", "--lake", str(tmp_path / "lake"), "--sql"], capture_output=True, text=True, env=env)
    assert done.returncode == 2 and "SPARK_HOME" in done.stderr
    assert Path(tmp_path / "lake" / "t").is_dir()
