#!/usr/bin/env bash
# Installs Debian's libfaketime for the testbed's skewed-clock brokers
# (KafkaCluster(clock_skew_s=...), tests/test_coordinator_failover.py), idempotently: nothing
# happens when libfaketime.so.1 is already there. The `faketime` package brings the library
# (package libfaketime, /usr/lib/<multiarch>/faketime/libfaketime.so.1) and its wrapper.
# Called from scripts/setup.sh; safe to run on its own (needs root or sudo for apt-get).
# Prints the library's path.
set -euo pipefail

find_lib() {
    local dir
    for dir in /usr/lib/*-linux-gnu/faketime /usr/lib/faketime /usr/local/lib/faketime; do
        if [ -f "$dir/libfaketime.so.1" ]; then
            echo "$dir/libfaketime.so.1"
            return 0
        fi
    done
    return 1
}

if find_lib; then
    exit 0
fi

"$(dirname "$0")/apt-install.sh" setup-faketime faketime
find_lib || { echo "setup-faketime: libfaketime.so.1 did not install" >&2; exit 1; }
