#!/usr/bin/env bash
# Fetches the delta-spark JARs (scripts/maven/delta.pom.xml) with Maven into the set-up
# cache, idempotently, and prints the folder holding them. Every SparkSession of
# rebalance-audit loads them from there as local files (spark.jars, pipelines/spark.py):
# Spark's own dependency resolution (spark.jars.packages, ivy) ignores the machine's Maven
# settings and would download at run time. Maven's local repository is kept under the
# cache too, so nothing lands in ~/.m2. The folder is also written to $CACHE/delta/JARS.
set -euo pipefail
cd "$(dirname "$0")/.."

POM=scripts/maven/delta.pom.xml
VERSION=$(sed -n 's:.*<delta.version>\(.*\)</delta.version>.*:\1:p' "$POM")
CACHE=${REBALANCE_AUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rebalance-audit}
JARS="$CACHE/delta/$VERSION/jars"
STAMP="$JARS/.fetched-$(sha1sum "$POM" | cut -c1-12)"

if [ ! -f "$STAMP" ]; then
    command -v mvn >/dev/null 2>&1 || {
        echo "setup-delta: Maven (mvn) is not installed; it fetches delta-spark $VERSION from Maven Central" >&2
        exit 1
    }
    echo "setup-delta: fetching delta-spark $VERSION with Maven into $JARS" >&2
    rm -rf "$JARS.tmp"
    mvn -q -B -f "$POM" -Dmaven.repo.local="$CACHE/maven" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$JARS.tmp" >&2
    ls "$JARS.tmp"/delta-spark_4.1_2.13-"$VERSION".jar "$JARS.tmp"/delta-storage-"$VERSION".jar >/dev/null
    # Swap in whole: an interrupted fetch never leaves a partial folder behind.
    rm -rf "$JARS"; mv "$JARS.tmp" "$JARS"
    touch "$STAMP"
fi

printf '%s\n' "$JARS" >"$CACHE/delta/JARS"
printf '%s\n' "$JARS"
