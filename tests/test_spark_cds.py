"""The Spark driver maps its classes from the class-data archive the set-up made
(pipelines/spark_cds.py): the classes of a session's start come from the archive, not from
the JARs, and without the archive they come from the JARs (so the check can fail)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import spark_cds

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]
SESSION = """
import sys
from pipelines.spark import get_spark
spark = get_spark("local[1]", conf={"spark.driver.extraJavaOptions": "-Xlog:class+load=info:file=" + sys.argv[1]})
spark.range(3).count()
spark.stop()
"""


def _sources(tmp_path: Path, **env: str) -> dict[str, str]:
    log = tmp_path / f"classes-{len(list(tmp_path.iterdir()))}.log"
    subprocess.run([sys.executable, "-c", SESSION, str(log)], cwd=REPO, env={**os.environ, **env}, check=True,
                   capture_output=True, timeout=300)
    out = {}
    for line in log.read_text().splitlines():
        name, _, source = line.partition(" source: ")
        out[name.rsplit(" ", 1)[-1]] = source
    return out


def test_the_driver_maps_sparks_classes_from_the_archive(tmp_path):
    path = spark_cds.build()  # made by the set-up: found, not made again
    assert path is not None and path.is_file()
    shared = _sources(tmp_path)
    assert shared["org.apache.spark.SparkContext"] == "shared objects file (top)"
    plain = _sources(tmp_path, **{spark_cds.NO_CDS_ENV: "1"})
    assert plain["org.apache.spark.SparkContext"].endswith(".jar")
