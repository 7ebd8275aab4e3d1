"""The one SparkSession factory of the project.

Every Spark job of rebalance-audit gets its session here, so the settings the lake depends
on are set in one place:

* Delta Lake through delta-spark: its SQL extension and catalog, its JARs from local files
  (`spark.jars`, fetched by scripts/setup-delta.sh; see `delta_jars`), never downloaded
  at run time. A session made here opens `delta.`/path`` in SQL and `format("delta")`.
* Parquet timestamps as TIMESTAMP_MICROS in UTC: delta-rs (bronze ingestion writes the same
  tables, see `pipelines.lake`) and other Delta readers do not read INT96 timestamps.
* `PYSPARK_PYTHON` = this interpreter, so Python workers (mapInArrow, UDFs) run in the same
  virtualenv as the driver, not whatever `python3` is first on PATH.
* Few shuffle partitions in local mode: the default 200 turns every small aggregation into
  200 tiny tasks. On a cluster nothing is forced: Spark's own settings stand (its
  spark-defaults.conf in $SPARK_CONF_DIR, else Spark's defaults).
* Log level WARN, and the driver's log in a file (`spark_log_file`, $REBALANCE_AUDIT_SPARK_LOG;
  "-" keeps Spark's console logging): Spark's chatter would bury the command's own output.
* In local mode, a driver heap sized to the cores and the machine (see `_driver_memory`).
* In local mode, the parallel garbage collector unless one is chosen (see `LOCAL_GC`).
* $REBALANCE_AUDIT_SPARK_PROFILE=small-lake: settings for small lakes in local mode (see
  SMALL_LAKE_CONF) over those defaults; a caller's `conf` (a Dagster resource's) over both.

Spark allows one active SparkSession per process; `getOrCreate` returns the running one,
so the master and config of the first call win.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

DEFAULT_MASTER = "local[*]"
DELTA_JARS_ENV = "REBALANCE_AUDIT_DELTA_JARS"
REPO_ROOT = Path(__file__).resolve().parents[1]
MASTER_ENV = "REBALANCE_AUDIT_SPARK_MASTER"
DRIVER_MEMORY_ENV = "REBALANCE_AUDIT_SPARK_DRIVER_MEMORY"
PROFILE_ENV = "REBALANCE_AUDIT_SPARK_PROFILE"
SPARK_LOG_ENV = "REBALANCE_AUDIT_SPARK_LOG"

# Settings for small lakes (thousands of rows) in local mode, as the demo's and the test
# suite's: a run is then hundreds of tiny Spark jobs and per-job overhead is everything.
# One shuffle partition, no adaptive re-planning and no whole-stage code generation
# (nothing to gain on a few rows, a Janino compile per query to lose), and the JVM's quick
# C1 JIT only with the serial GC (C2's compiler threads and G1's concurrent ones compete
# for the two cores such a machine has). On a large lake they cost throughput: bench/ runs
# without them. Measured on the demo's data, 2 cores at load ~8: materialization 223 s with
# the defaults, 86-134 s with these, every table equal.
# Projections are interpreted too (`factoryMode` NO_CODEGEN): without whole-stage code
# generation Spark still generates and compiles an UnsafeProjection per operator and task,
# and a profile of gold on a recording showed a quarter of the JVM's samples there (most of
# it formatting the generated source to look it up in the compile cache). Measured, gold
# over crash_autocommit rerun in a warm JVM: 78-82 s with code generation, 51-57 s without.
# A larger code cache: a test worker's JVM runs for an hour, and once the default one is full
# the JIT stops ("CodeCache is full. Compiler has been disabled") and everything after runs
# interpreted.
SMALL_LAKE_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=512m",
}
PROFILES = {"": {}, "default": {}, "small-lake": SMALL_LAKE_CONF}


def profile_conf(master: str, profile: str | None = None) -> dict[str, str]:
    """The settings of a named profile (`profile`, else $REBALANCE_AUDIT_SPARK_PROFILE) for
    `master`: "small-lake" is SMALL_LAKE_CONF in local mode, nothing on a cluster."""
    profile = profile if profile is not None else os.environ.get(PROFILE_ENV, "")
    if profile not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}: unknown Spark profile {profile!r} (known: {', '.join(sorted(PROFILES))})")
    return dict(PROFILES[profile]) if master.startswith("local") else {}


def cache_dir() -> Path:
    """The set-up cache (scripts/setup.sh's): $REBALANCE_AUDIT_CACHE, else
    $XDG_CACHE_HOME/rebalance-audit, else ~/.cache/rebalance-audit."""
    return Path(os.environ.get("REBALANCE_AUDIT_CACHE")
                or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rebalance-audit")


def spark_log_file() -> Path | None:
    """Where the driver JVM's log goes: $REBALANCE_AUDIT_SPARK_LOG, else spark.log in the
    set-up cache's logs folder; None when that variable is "-" (Spark's own console logging)."""
    given = os.environ.get(SPARK_LOG_ENV)
    if given == "-":
        return None
    return Path(given) if given else cache_dir() / "logs" / "spark.log"


# Spark's and its libraries' log lines (the JVM's warnings about the host name, native
# Hadoop, truncated plans; Java stack traces of errors the command reports in one line)
# go to a file, appended to by every process: the terminal keeps the command's own output.
_LOG4J2 = """\
# Written by rebalance-audit (pipelines/spark.py): the driver's log goes to a file.
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {file}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss.SSS}} [%pid] %p %c{{1}}: %m%n%ex
"""


def _log_options(settings: dict) -> str | None:
    """The JVM option that sends the driver's log to `spark_log_file()`, or None where the
    user decides: the log file is "-", their driver options name a log4j2 configuration, or
    $SPARK_CONF_DIR holds one (Spark reads it itself)."""
    file = spark_log_file()
    given = settings.get("spark.driver.extraJavaOptions") or ""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if file is None or "log4j2.configurationFile" in given or (
            conf_dir and (Path(conf_dir) / "log4j2.properties").is_file()):
        return None
    file.parent.mkdir(parents=True, exist_ok=True)
    # One configuration per log file, written whole and renamed: processes starting at
    # the same moment never read half of one.
    text = _LOG4J2.format(file=str(file.resolve()).replace("\\", "\\\\"))
    config = file.parent / f"log4j2-{hashlib.sha256(text.encode()).hexdigest()[:12]}.properties"
    if not config.is_file():
        tmp = config.with_name(f"{config.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, config)
    return f"-Dlog4j2.configurationFile={config.resolve().as_uri()}"


# PySpark's own loggers that print every failed query's whole Java stack (as JSON, often
# 10 KB and more) to stderr, ahead of the error the command reports in one line.
_PYSPARK_QUERY_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def _python_logs_to_file() -> None:
    """PySpark's query-error loggers write to the driver's log file instead of stderr."""
    file = spark_log_file()
    if file is None:
        return
    import logging

    from pyspark.logger import PySparkLogger

    for name in _PYSPARK_QUERY_LOGGERS:
        logger = PySparkLogger.getLogger(name)  # a PySparkLogger: its methods take the query's fields
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.addHandler(logging.FileHandler(file, delay=True))
        logger.propagate = False


class DeltaJarsMissing(RuntimeError):
    """The delta-spark JARs are not in the set-up cache; the message says how to get them."""


def delta_jars() -> list[str]:
    """The delta-spark JARs as local paths: the folder in $REBALANCE_AUDIT_DELTA_JARS, else
    the one scripts/setup-delta.sh recorded in the set-up cache, else that script is run
    (it fetches them with Maven, once per machine)."""
    folder = os.environ.get(DELTA_JARS_ENV)
    if not folder:
        record = cache_dir() / "delta" / "JARS"
        if record.is_file() and Path(record.read_text().strip()).is_dir():
            folder = record.read_text().strip()
        elif (REPO_ROOT / "scripts" / "setup-delta.sh").is_file():
            done = subprocess.run([str(REPO_ROOT / "scripts" / "setup-delta.sh")], capture_output=True, text=True)
            if done.returncode != 0:
                raise DeltaJarsMissing(f"scripts/setup-delta.sh failed: {done.stderr.strip().splitlines()[-1:]}")
            folder = done.stdout.strip()
    jars = sorted(str(p) for p in Path(folder).glob("*.jar")) if folder else []
    if not any(Path(j).name.startswith("delta-spark_") for j in jars):
        raise DeltaJarsMissing(f"no delta-spark JARs in {folder or 'the set-up cache'}: run `make setup` "
                               f"(or point ${DELTA_JARS_ENV} at a folder holding delta-spark_4.1_2.13 and its dependencies)")
    return jars


# Heap per local core: what one task's share of execution memory needs on the large
# benchmark (11.8 M commits: a full run peaks at 6.2 GB of memory with 2 cores; bench/README.md).
HEAP_PER_CORE_MB = 2048


def _driver_memory(master: str) -> str | None:
    """Heap of the driver JVM: $REBALANCE_AUDIT_SPARK_DRIVER_MEMORY (e.g. "8g"), else, in local
    mode, where the driver is also the only executor, 2 GB per core it runs tasks on, at most
    a quarter of the machine's memory (1-16 GB). Spark shares execution memory among the
    running tasks, so the need grows with the cores, not with the machine; what does not
    fit spills to local disk (silver's decoded increment is kept there outright). Spark's
    default of 1 GB runs out at ~10 M records and the JVM then dies in the middle of a job.
    On a cluster, Spark's own setting (spark-defaults.conf) stands."""
    if os.environ.get(DRIVER_MEMORY_ENV):
        return os.environ[DRIVER_MEMORY_ENV]
    if not master.startswith("local"):
        return None
    try:
        total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError):
        return None
    return f"{max(1024, min(16384, total_mb // 4, HEAP_PER_CORE_MB * _local_cores(master)))}m"


# In local mode the driver JVM is also the only executor and runs a batch job, where
# throughput is what counts: the parallel collector, not the JVM's default G1, whose
# concurrent threads and write barriers take CPU from the tasks on a machine of few cores.
# Measured on the large benchmark's +1 % increment (2 cores, 4 GB heap, bench/README.md):
# the run 208.6 -> 177.6 s, gold 89.6 -> 61.9 s, the JVM's CPU 266 -> 218 s (G1's
# concurrent threads 11 s of it, the tasks 67 -> 57 s, C2 JIT 99 -> 85 s).
LOCAL_GC = "-XX:+UseParallelGC"
# Where a collector may already be chosen: the driver's options, and the variables every JVM reads.
_JAVA_ENV_OPTIONS = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")
_GC_FLAG = re.compile(r"-XX:[+-]Use\w*GC\b")


def _gc_option(master: str, settings: Mapping[str, Any]) -> str | None:
    """LOCAL_GC for a local driver, unless a collector is chosen already (the driver's options
    or a JVM options variable name one: two would stop the JVM from starting); None on a
    cluster, where Spark's own settings stand."""
    if not master.startswith("local"):
        return None
    given = [settings.get("spark.driver.extraJavaOptions") or "", *(os.environ.get(v, "") for v in _JAVA_ENV_OPTIONS)]
    return None if any(_GC_FLAG.search(g) for g in given) else LOCAL_GC


def _local_cores(master: str) -> int:
    """Cores a local master uses: local → 1, local[N] → N, local[*] → all."""
    if master.startswith("local["):
        inner = master[len("local["):].split(",")[0].rstrip("]")
        if inner.isdigit():
            return max(1, int(inner))
        return os.cpu_count() or 1
    if master == "local":
        return 1
    return os.cpu_count() or 1


def get_spark(master: str | None = None, app_name: str = "rebalance-audit", conf: dict | None = None):
    """Return the process's SparkSession, creating it on first use.

    `master` defaults to $REBALANCE_AUDIT_SPARK_MASTER, else `local[*]`. `conf` entries
    override the defaults below (e.g. {"spark.sql.shuffle.partitions": "64"} on a cluster).
    """
    master = master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER
    # Must be set before the JVM and the first Python worker start.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    local = master.startswith("local")
    settings = {
        # delta-spark, from local JARs (Spark ships them to a cluster's executors itself).
        "spark.jars": ",".join(delta_jars()),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # Delta rebuilds a table's state from its log with 50 tasks by default: on a
        # laptop's lake, 50 tiny tasks per snapshot.
        "spark.databricks.delta.snapshotPartitions": str(2 * _local_cores(master)) if local else None,
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # On a machine whose time zone is not UTC (most laptops), delta-spark 4.4 rebuilds a
        # table's whole state after every commit to check the file list its checksum holds
        # (Snapshot.allFilesInCrcVerificationEnabled): timestamps before 1883 serialize
        # differently off UTC. The lake's tables are partitioned by cluster name, a string.
        # Measured, 10-row appends under TZ=Europe/Berlin: 3 Spark jobs and 0.73 s each
        # with the check, 1 job and 0.26 s without, as under UTC.
        "spark.databricks.delta.allFilesInCrc.verificationMode.forceOnNonUTC.enabled": "false",
        # Read when the JVM starts, so only the process's first session applies it.
        "spark.driver.memory": _driver_memory(master),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(2 * _local_cores(master)) if master.startswith("local") else None,
        "spark.default.parallelism": str(2 * _local_cores(master)) if master.startswith("local") else None,
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # PySpark 4 records the Python call site of every Column function for error messages
        # (a stack capture and about six calls to the JVM each): gold's DataFrames take tens
        # of thousands of such calls to build, a quarter of its time on a small lake
        # (crash_autocommit, warm JVM: 14 against 18-22 s). Errors still say what failed.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # Spark's own bookkeeping of Parquet: skip the summary files nobody reads.
        "spark.hadoop.parquet.summary.metadata.level": "NONE",
        # The lake hands Spark the exact data files of a version (from the Delta log). Past
        # 32 paths Spark lists them with a job of one task per path: worth it against an
        # object store, but on local disk the driver stats them faster than it schedules
        # the tasks (a second per read of an increment's files).
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000" if master.startswith("local") else None,
        # Delta's VACUUM (and its other directory listings) run one task per folder up to
        # this many, 10000 by default: on a local lake that is 10000 empty tasks per listing
        # (a two-minute VACUUM of a six-file table on 2 cores).
        "spark.sql.sources.parallelPartitionDiscovery.parallelism":
            str(2 * _local_cores(master)) if master.startswith("local") else None,
    }
    settings.update(profile_conf(master))
    settings.update(conf or {})
    log_option = _log_options(settings)
    from pipelines.spark_cds import java_options as cds_options

    # The driver maps the class-data archive the set-up made (pipelines/spark_cds.py).
    extra = [o for o in (_gc_option(master, settings), log_option, cds_options()) if o]
    if extra:
        settings["spark.driver.extraJavaOptions"] = " ".join(
            o for o in (settings.get("spark.driver.extraJavaOptions"), *extra) if o)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        if value is not None:
            builder = builder.config(key, value)
    from pyspark import SparkContext

    started = time.time() if SparkContext._active_spark_context is None else None
    if started is not None:
        check_master(master)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # a Java error: pages of stack with the master nowhere in them
        raise SparkMasterError(f"Spark could not start on master {master}: {_java_cause(exc)}") from exc
    spark.sparkContext.setLogLevel("WARN")
    if started is not None:
        _python_logs_to_file()
        global _started
        _started = (started, time.time() - started)
    return spark


_started: tuple[float, float] | None = None


class SparkMasterError(RuntimeError):
    """The Spark master cannot be used; the message is one line naming it."""


# How long a spark:// master may take to accept a connection. Spark itself retries the
# registration three times 20 s apart and then fails with 100+ lines of Java that never say
# which master it tried.
MASTER_CONNECT_TIMEOUT_S = 10.0


def check_master(master: str, timeout: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """A standalone master (`spark://host:port[,host:port]`, any one of them) accepts a TCP
    connection, checked before the JVM starts. Other masters (local, yarn, k8s) are Spark's."""
    if not master.startswith("spark://"):
        return
    import socket

    failures = []
    for address in master[len("spark://"):].split(","):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
            return
        except ValueError:
            failures.append(f"{address}: no port")
        except OSError as exc:
            failures.append(f"{address}: {exc.strerror or type(exc).__name__}")
    raise SparkMasterError(f"Spark master {master} is not reachable ({'; '.join(failures)})")


def _java_cause(exc: BaseException) -> str:
    """The line of a Py4J error that names the Java exception, else the first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if line.startswith(": "):
            return line[2:]
    return lines[0] if lines else type(exc).__name__


def startup() -> tuple[float, float] | None:
    """(epoch seconds, seconds taken) of this process's SparkContext start (the JVM), or None
    if none was started here: a run reports it apart from the step that happened to pay it."""
    return _started


@contextlib.contextmanager
def reliable_checkpoints(spark, base_uri: str) -> Iterator[None]:
    """Where `DataFrame.checkpoint` writes while the block runs, on a cluster: a folder of
    Spark's under `base_uri`/_checkpoints (a lake's root: storage every executor reaches),
    removed afterwards. In local mode nothing: results are checkpointed locally there
    (pipelines.gold.pin)."""
    sc = spark.sparkContext
    if sc.master.startswith("local"):
        yield
        return
    sc.setCheckpointDir(f"{base_uri.rstrip('/')}/_checkpoints")  # Spark adds a folder of its own
    folder = sc.getCheckpointDir()
    try:
        yield
    finally:
        path = sc._jvm.org.apache.hadoop.fs.Path(folder)
        path.getFileSystem(sc._jsc.hadoopConfiguration()).delete(path, True)


# Writes (or other Spark steps) in flight at once (run_concurrently).
CONCURRENT_WRITES = 4


def run_concurrently(spark, steps: Sequence[Callable[[], Any]]) -> list[Any]:
    """Every step, up to CONCURRENT_WRITES at once, each in a thread of its own (Spark runs
    the jobs of several driver threads side by side).

    A write of a small table is mostly the driver's: planning, delta-spark's log and its
    commit, with the executors idle; one at a time, a run of a dozen small tables waits
    through each in turn. Each table is still one commit of its own, so a run killed midway
    leaves some tables written and the others behind, as one at a time did. Every step is
    waited for; then the first failure, in the steps' order, is raised. Returns the steps'
    results, in their order."""
    from pyspark.util import inheritable_thread_target

    with ThreadPoolExecutor(max_workers=CONCURRENT_WRITES, thread_name_prefix="spark-step") as pool:
        # Each thread takes this one's Spark local properties and session tags (pinned
        # thread mode, PySpark's default: every Python thread has a JVM thread of its own).
        # With PYSPARK_PIN_THREAD=false PySpark hands the session back: nothing to inherit.
        inherit = inheritable_thread_target(spark)
        futures = [pool.submit(inherit(step) if inherit is not spark else step) for step in steps]
    return [f.result() for f in futures]


def write_concurrently(spark, write: Callable[[str, Any], None], tables: Mapping[str, Any]) -> None:
    """`write(name, df)` for every table, as `run_concurrently` runs steps."""
    run_concurrently(spark, [functools.partial(write, name, df) for name, df in tables.items()])


def local_frame(spark, rows: Iterable[Sequence[Any]], schema) -> Any:
    """A DataFrame of a few rows the driver holds (`schema`: a StructType or a DDL string),
    planned as a local relation.

    `spark.createDataFrame(list)` makes a Python RDD: every query that reads it runs a
    stage of Python worker tasks to convert the rows again. A gold run broadcast its group
    keys into every table that way and paid about a second per table for it (24 such
    stages in a run's gold step). Built from an Arrow table the rows travel to the JVM once
    and become a LocalRelation: read with no job at all."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    struct = schema if isinstance(schema, StructType) else StructType.fromDDL(schema)
    assert isinstance(struct, StructType), schema
    arrow = to_arrow_schema(struct)
    columns = list(zip(*rows)) or [()] * len(arrow)
    table = pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(columns, arrow)], schema=arrow)
    return spark.createDataFrame(table, schema=struct)
