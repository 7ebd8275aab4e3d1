#!/usr/bin/env bash
# Fetches the delta-spark JARs (scripts/maven/delta.pom.xml) into the set-up cache,
# idempotently, and prints the folder holding them. Every SparkSession of rebalance-audit
# loads them from there as local files (spark.jars, pipelines/spark.py): Spark's own
# dependency resolution (spark.jars.packages, ivy) ignores the machine's Maven settings and
# would download at run time. The folder is also written to $CACHE/delta/JARS.
set -euo pipefail
cd "$(dirname "$0")/.."

POM=scripts/maven/delta.pom.xml
VERSION=$(sed -n 's:.*<delta.version>\(.*\)</delta.version>.*:\1:p' "$POM")
CACHE=${REBALANCE_AUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rebalance-audit}
JARS="$CACHE/delta/$VERSION/jars"

./scripts/fetch-jars.sh "$POM" "$JARS" "delta-spark $VERSION" \
    "delta-spark_4.1_2.13-$VERSION.jar" "delta-storage-$VERSION.jar"
printf '%s\n' "$JARS" >"$CACHE/delta/JARS"
printf '%s\n' "$JARS"
