"""A local Spark driver runs the parallel garbage collector (pipelines.spark.LOCAL_GC), and a
collector the user chose wins: in the driver's options or in a variable every JVM reads,
where adding a second one would stop the JVM from starting."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]
SESSION = """
import json, sys
from pipelines.spark import get_spark
conf = json.loads(sys.argv[1])
spark = get_spark("local[1]", conf=conf)
beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
print(json.dumps(sorted(b.getName() for b in beans)))
spark.stop()
"""


def _collectors(conf: str = "{}", **env: str) -> list[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")}
    # The default profile: the test suite's small-lake one chooses the serial collector itself.
    environ.update({"REBALANCE_AUDIT_SPARK_PROFILE": "default", **env})
    out = subprocess.run([sys.executable, "-c", SESSION, conf], cwd=REPO, env=environ, check=True,
                         capture_output=True, text=True, timeout=300).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_local_driver_runs_the_parallel_collector_unless_one_is_chosen():
    assert _collectors() == ["PS MarkSweep", "PS Scavenge"]
    # The serial collector's beans are "Copy" and "MarkSweepCompact".
    assert _collectors(JAVA_TOOL_OPTIONS="-XX:+UseSerialGC") == ["Copy", "MarkSweepCompact"]
    assert _collectors('{"spark.driver.extraJavaOptions": "-XX:+UseSerialGC"}') == ["Copy", "MarkSweepCompact"]
