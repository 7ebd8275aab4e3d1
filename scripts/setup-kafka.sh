#!/usr/bin/env bash
# Fetches the pinned Apache Kafka 4.x release the tests and the demo run (brokers in KRaft
# mode, plus Kafka's own tools as test oracles) with Maven, from scripts/maven/kafka.pom.xml,
# into the set-up cache, idempotently, and prints the folder holding its JARs.
#
#   scripts/setup-kafka.sh            # fetch if needed, print the libs folder
#
# The JARs come from Maven Central only (no tarball): kafka_2.13, kafka-tools, connect-runtime
# and their runtime dependencies, and log4j2 with its SLF4J 1.x binding (Kafka's POM leaves its logging
# out). Maven's local repository is kept under the cache too, so nothing lands in ~/.m2.
# The folder is also written to $CACHE/kafka/LIBS for Python (pipelines/testbed/kafka_home.py).
set -euo pipefail
cd "$(dirname "$0")/.."

POM=scripts/maven/kafka.pom.xml
VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
CACHE=${REBALANCE_AUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rebalance-audit}
LIBS="$CACHE/kafka/$VERSION/libs"
# The stamp names the pom's content: editing a version fetches again.
STAMP="$LIBS/.fetched-$(sha1sum "$POM" | cut -c1-12)"

if [ ! -f "$STAMP" ]; then
    command -v mvn >/dev/null 2>&1 || {
        echo "setup-kafka: Maven (mvn) is not installed; it fetches Kafka $VERSION from Maven Central" >&2
        exit 1
    }
    echo "setup-kafka: fetching Apache Kafka $VERSION with Maven into $LIBS" >&2
    rm -rf "$LIBS.tmp"
    mvn -q -B -f "$POM" -Dmaven.repo.local="$CACHE/maven" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$LIBS.tmp" >&2
    ls "$LIBS.tmp"/kafka_2.13-"$VERSION".jar "$LIBS.tmp"/kafka-tools-"$VERSION".jar \
        "$LIBS.tmp"/connect-runtime-"$VERSION".jar \
        "$LIBS.tmp"/log4j-slf4j-impl-*.jar >/dev/null
    # Swap in whole: a fetch interrupted half-way never leaves a partial libs folder behind.
    rm -rf "$LIBS"; mv "$LIBS.tmp" "$LIBS"
    touch "$STAMP"
fi

printf '%s\n' "$LIBS" >"$CACHE/kafka/LIBS"
printf '%s\n' "$LIBS"
