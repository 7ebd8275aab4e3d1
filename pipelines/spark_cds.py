"""A class-data-sharing (CDS) archive of the classes a Spark driver of rebalance-audit loads.

Every `run`, `sql`, `shell`, scheduled Dagster run and test worker starts a Spark JVM, and
most of its start is loading and verifying classes: Spark's at the session's start, Delta's
and Scala's at the first Delta operation. The JVM can map classes it dumped once instead
(`-XX:ArchiveClassesAtExit`, then `-XX:SharedArchiveFile`, OpenJDK 17's dynamic CDS).
Measured on 2 cores (a session, then one Delta write and read): 12.2-14.5 s without the
archive, 6.6-6.9 s with it.

The set-up makes the archive (`python -m pipelines.spark_cds --build`, scripts/setup.sh)
by running a small job of the kinds the pipeline runs in a JVM that dumps its classes at
exit; `get_spark` then hands the driver `java_options()`. An archive is only valid for the
JVM and the JARs it was made with (the JVM checks and ignores a stale one), so its file name
carries a fingerprint of the java binary and of Spark's JARs: a new JDK or pyspark makes
`java_options()` find none (no archive, a normal start) until the set-up runs again.
`REBALANCE_AUDIT_NO_CDS=1` turns it off.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NO_CDS_ENV = "REBALANCE_AUDIT_NO_CDS"


def _java() -> Path | None:
    """The java pyspark launches: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _fingerprint() -> str | None:
    """What the archive depends on: the java binary and the JARs on the driver's class path
    (pyspark's, and $SPARK_CONF_DIR, which Spark puts first on it)."""
    import pyspark

    java = _java()
    if java is None:
        return None
    parts = [f"java {java} {java.stat().st_size} {int(java.stat().st_mtime)}",
             f"conf {os.environ.get('SPARK_CONF_DIR', '')}"]
    jars = Path(pyspark.__file__).parent / "jars"
    for jar in sorted(jars.glob("*.jar")):
        st = jar.stat()
        parts.append(f"{jar.name} {st.st_size} {int(st.st_mtime)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path() -> Path | None:
    """Where the archive for this JVM and these JARs is (or would be); None without java."""
    from pipelines.spark import cache_dir

    key = _fingerprint()
    return None if key is None else cache_dir() / "cds" / f"spark-{key}.jsa"


def java_options() -> str | None:
    """The driver's JVM options that map the archive, or None (none made yet, or turned off).
    A mismatch the fingerprint misses only costs the archive: the JVM starts without it,
    silently (its CDS log is off)."""
    if os.environ.get(NO_CDS_ENV, "") not in ("", "0"):
        return None
    path = archive_path()
    if path is None or not path.is_file():
        return None
    return f"-XX:SharedArchiveFile={path} -Xlog:cds=off -Xlog:cds+dynamic=off"


def _workload(dump_to: str) -> None:
    """Runs in the dumping JVM's Python process: a session and the kinds of work the pipeline
    does (Delta write, read, merge, a window, a join, an aggregation, Arrow to the driver)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from pipelines.spark import get_spark

    spark = get_spark("local[2]", app_name="rebalance-audit-cds",
                      conf={"spark.driver.extraJavaOptions": _base_options() + f" -XX:ArchiveClassesAtExit={dump_to}"})
    with tempfile.TemporaryDirectory(prefix="rebalance-audit-cds-") as tmp:
        df = spark.range(200).select(F.col("id"), (F.col("id") % 7).cast("string").alias("g"),
                                     F.current_timestamp().alias("at"))
        path = f"{tmp}/t"
        df.write.format("delta").partitionBy("g").save(path)
        t = spark.read.format("delta").load(path)
        w = Window.partitionBy("g").orderBy("id")
        ranked = t.withColumn("r", F.row_number().over(w)).withColumn("p", F.lag("id").over(w))
        joined = ranked.join(t.groupBy("g").agg(F.max("id").alias("m")), "g")
        joined.where(F.col("r") < 3).toArrow()
        from delta.tables import DeltaTable

        DeltaTable.forPath(spark, path).alias("a").merge(t.alias("b"), "a.id = b.id") \
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        t.localCheckpoint(eager=True).count()
        spark.sql(f"SELECT g, count(*) FROM delta.`{path}` GROUP BY g").collect()
    spark.stop()


def _base_options() -> str:
    """The driver options the pipeline's sessions use, so the archive sees their classes."""
    from pipelines.spark import SMALL_LAKE_CONF

    return SMALL_LAKE_CONF["spark.driver.extraJavaOptions"]


def build() -> Path | None:
    """Make the archive for this JVM and these JARs if it is missing; returns its path (None
    without java). The JVM writes it as it exits, so the job runs in a child process; the
    file is renamed into place whole."""
    path = archive_path()
    if path is None or path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    env = {**os.environ, NO_CDS_ENV: "1"}
    done = subprocess.run([sys.executable, "-m", "pipelines.spark_cds", "--dump", str(tmp)], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"the class-data archive was not made: {done.stderr.strip()[-2000:]}")
    os.replace(tmp, path)
    # Another JDK's or pyspark's archives (or another checkout's: its JARs have other
    # times) are kept a while, then go: 180 MB each.
    month_ago = time.time() - 30 * 86400
    for old in path.parent.glob("spark-*.jsa"):
        if old != path and old.stat().st_mtime < month_ago:
            old.unlink(missing_ok=True)
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--dump"] and len(args) == 2:
        _workload(args[1])
        return 0
    if args == ["--build"]:
        print(build() or "no java: no class-data archive")
        return 0
    print("usage: python -m pipelines.spark_cds --build", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
