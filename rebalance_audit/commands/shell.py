"""`rebalance-audit shell`: an interactive Spark shell on the lake, the way Spark users query.

Starts PySpark's own `pyspark` shell (or, with `--sql`, the `spark-sql` CLI of a full Spark
distribution in $SPARK_HOME: the pip `pyspark` package does not ship its Hive
Thrift-server classes) with delta-spark configured from the set-up cache's JARs, and every
table of the lake registered as a temporary view by its name (at its version when the
shell started). Then, as anywhere in Spark:

    spark.sql("SELECT group_id, count(*) FROM offset_commits GROUP BY group_id").show()
    spark.sql("SELECT count(*) FROM delta.`/abs/lake/offset_commits` VERSION AS OF 3").show()
    spark.sql("DESCRIBE HISTORY delta.`/abs/lake/offset_commits`").show()

`--print` prints the command instead of starting it (for another Spark, or a script).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

from rebalance_audit.cli import UsageError, add_common_options


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "shell",
        help="start pyspark (or spark-sql) with Delta configured and every lake table as a view",
        description="Start an interactive pyspark shell (--sql: spark-sql from $SPARK_HOME) with delta-spark "
                    "configured and every table of the lake registered as a view by its name.",
    )
    add_common_options(p)
    p.add_argument("--sql", action="store_true", help="spark-sql instead of pyspark (needs a Spark distribution in $SPARK_HOME)")
    p.add_argument("--print", action="store_true", dest="print_only", help="print the command line instead of starting it")
    p.set_defaults(func=run)


def spark_conf(master: str) -> list[str]:
    """spark-submit options that give a shell the lake's Delta set-up."""
    from pipelines.spark import delta_jars

    settings = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    }
    args = ["--master", master, "--jars", ",".join(delta_jars())]
    for key, value in settings.items():
        args += ["--conf", f"{key}={value}"]
    return args


def _sql_identifier_path(path: str) -> str:
    # delta.`path`: a backtick inside the path is doubled (Spark's quoting rule).
    return "delta.`" + path.replace("`", "``") + "`"


def init_files(tables: dict[str, str], folder: Path) -> tuple[Path, Path]:
    """(a SQL file for spark-sql -i, a Python start-up file for pyspark) registering each
    table (name → location) as a temporary view. Names are lake table names (lower-case
    letters, digits, _); locations are quoted, never spliced raw."""
    sql = folder / "views.sql"
    sql.write_text("".join(
        f"CREATE OR REPLACE TEMPORARY VIEW {name} AS SELECT * FROM {_sql_identifier_path(path)};\n"
        for name, path in tables.items()))
    py = folder / "views.py"
    py.write_text(
        "# rebalance-audit shell: every lake table as a temporary view by its name\n"
        f"_tables = {json.dumps(tables)}\n"
        "for _name, _path in _tables.items():\n"
        "    spark.read.format('delta').load(_path).createOrReplaceTempView(_name)\n"
        "print('rebalance-audit: views ' + ', '.join(_tables) + '  (spark.sql(\"SELECT ...\").show())')\n"
        "del _name, _path\n")
    return sql, py


def run(args: argparse.Namespace) -> int:
    import pyspark

    from pipelines.lake import Lake
    from pipelines.lake.sparkio import spark_path

    if "://" not in args.lake and not os.path.isdir(args.lake):
        raise UsageError(f"no lake at {args.lake} (run `rebalance-audit ingest ...` first, or pass --lake)")
    lake = Lake(args.lake)
    tables = {name: spark_path(lake.uri(name)) for name in lake.tables()}
    folder = Path(tempfile.mkdtemp(prefix="rebalance-audit-shell-"))
    sql_file, py_file = init_files(tables, folder)
    env = dict(os.environ)
    if args.sql:
        home = os.environ.get("SPARK_HOME", "")
        cli = Path(home) / "bin" / "spark-sql"
        if not home or not cli.is_file():
            raise UsageError("spark-sql needs a Spark 4.1 distribution: set SPARK_HOME to one (the pip pyspark "
                             "package has no SQL CLI); or use `rebalance-audit shell` (pyspark) or `rebalance-audit sql`")
        command = [str(cli), *spark_conf(args.spark_master), "-i", str(sql_file)]
    else:
        command = [str(Path(pyspark.__file__).parent / "bin" / "pyspark"), *spark_conf(args.spark_master)]
        env["PYTHONSTARTUP"] = str(py_file)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if args.print_only:
        prefix = "" if args.sql else f"PYTHONSTARTUP={shlex.quote(str(py_file))} "
        print(prefix + shlex.join(command))
        return 0
    os.execvpe(command[0], command, env)
    return 0  # not reached: the shell replaced this process
