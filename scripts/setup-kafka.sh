#!/usr/bin/env bash
# Fetches the pinned Apache Kafka 4.x release the tests and the demo run (brokers in KRaft
# mode, plus Kafka's own tools as test oracles) with Maven, from scripts/maven/kafka.pom.xml,
# into the set-up cache, idempotently, and prints the folder holding its JARs.
#
#   scripts/setup-kafka.sh            # fetch if needed, print the libs folder
#
# The JARs come from Maven Central only (no tarball): kafka_2.13, kafka-tools, connect-runtime
# and their runtime dependencies, and log4j2 with its SLF4J 1.x binding (Kafka's POM leaves its logging
# out), with scripts/fetch-jars.sh.
# The folder is also written to $CACHE/kafka/LIBS for Python (testbed/kafka_home.py).
set -euo pipefail
cd "$(dirname "$0")/.."

POM=scripts/maven/kafka.pom.xml
VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
CACHE=${REBALANCE_AUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rebalance-audit}
LIBS="$CACHE/kafka/$VERSION/libs"
./scripts/fetch-jars.sh "$POM" "$LIBS" "Apache Kafka $VERSION" \
    "kafka_2.13-$VERSION.jar" "kafka-tools-$VERSION.jar" "connect-runtime-$VERSION.jar" "log4j-slf4j-impl-*.jar"
printf '%s\n' "$LIBS" >"$CACHE/kafka/LIBS"
printf '%s\n' "$LIBS"
