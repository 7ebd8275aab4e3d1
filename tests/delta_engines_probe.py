"""Run as a script in a fresh process: open Delta tables with plain delta-spark (a session
with only Delta's JARs, extension and catalog, none of rebalance-audit's settings) and
print, per table, its rows in a canonical form and its `DESCRIBE HISTORY` operations.

    python tests/delta_engines_probe.py PATH... > out.json
"""
from __future__ import annotations

import json
import sys

from tests_canonical import canonical  # noqa: E402  (tests/ is on sys.path as the script's folder)


def main(paths: list[str]) -> None:
    from pyspark.sql import SparkSession

    from pipelines.spark import delta_jars

    # Only Delta's settings, plus two of task counts (Spark's 200 shuffle partitions and
    # Delta's 50 snapshot partitions: thousands of empty tasks over 30 small tables), which
    # change how fast, never what, a session reads.
    spark = (SparkSession.builder.master("local[2]").appName("plain-delta-spark")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.databricks.delta.snapshotPartitions", "2")
             .config("spark.jars", ",".join(delta_jars()))
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from delta.tables import DeltaTable

    out = {}
    for path in paths:
        df = spark.read.format("delta").load(path)
        rows = [canonical(r.asDict(recursive=True)) for r in df.collect()]
        history = DeltaTable.forPath(spark, path).history().orderBy("version").collect()
        out[path] = {"rows": sorted(rows), "history": [[h["version"], h["operation"]] for h in history]}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
