#!/usr/bin/env bash
# Sets up everything rebalance-audit needs on a fresh machine, idempotently: a Python 3.11
# virtualenv in .venv with the pinned dependencies, the delta-spark JARs, the Kafka JARs of the testbed, Debian's
# libfaketime for the testbed's skewed-clock brokers, Debian's Chromium for the dashboard tests.
# Safe to re-run; a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
CACHE=${REBALANCE_AUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rebalance-audit}
WHEELS="$CACHE/wheels"
mkdir -p "$WHEELS"

if ! command -v uv >/dev/null 2>&1; then
    "$PY" -m pip install --quiet --user uv
    export PATH="$HOME/.local/bin:$PATH"
fi

# pyspark ships only as a 455 MB source package; building its wheel takes minutes,
# so build it once per machine and reuse it from the cache.
if ! ls "$WHEELS"/pyspark-4.1.4-*.whl >/dev/null 2>&1; then
    echo "setup: building the pyspark 4.1.4 wheel once (cached in $WHEELS)" >&2
    "$PY" -m pip wheel --quiet --no-deps --wheel-dir "$WHEELS" pyspark==4.1.4
fi

[ -x .venv/bin/python ] || uv venv --quiet --python "$PY" .venv
stamp=.venv/.deps-$(cat pyproject.toml scripts/setup.sh | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
    uv pip install --quiet --python .venv/bin/python --index-strategy unsafe-best-match \
        --find-links "$WHEELS" -e '.[dev]'
    # uv writes no .pyc files, and where PYTHONDONTWRITEBYTECODE is set Python never
    # caches them either: every run would compile the sources of pyspark, Dagster and
    # Great Expectations again (about 5 s a process). Compile them once, here.
    .venv/bin/python -m compileall -q -j 0 .venv/lib/python3.11/site-packages >/dev/null
    rm -f .venv/.deps-*; touch "$stamp"
fi

# The delta-spark JARs every SparkSession loads from local files (Maven, scripts/maven/).
./scripts/setup-delta.sh >/dev/null
# A class-data-sharing archive of the Spark driver's classes (pipelines/spark_cds.py): every
# Spark start then takes half the time. Made once per JDK and pyspark (about 35 s).
.venv/bin/python -m pipelines.spark_cds --build >/dev/null
# The Apache Kafka 4.x release the tests and the demo start (Maven, from scripts/maven/).
./scripts/setup-kafka.sh >/dev/null
# The compiled core of `decode` (Rust, native/), rebuilt when its sources change.
./scripts/setup-native.sh
# Debian's libfaketime: the testbed starts chosen brokers with their clock offset
# (KafkaCluster(clock_skew_s=...)); the coordinator failover test skews two of three.
./scripts/setup-faketime.sh >/dev/null
# Debian's Chromium for the dashboard tests (no browser downloads).
if [ -x scripts/setup-browser.sh ]; then ./scripts/setup-browser.sh; fi
