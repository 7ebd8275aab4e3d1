#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard tests (tests/test_dashboards_*.py) and the
# dashboard benchmark, idempotently: nothing happens when a chromium is already on PATH.
# No browser build is downloaded; the distribution package is the browser.
# Called from scripts/setup.sh; safe to run on its own (needs root or sudo for apt-get).
set -euo pipefail

for exe in chromium chromium-browser; do
    if command -v "$exe" >/dev/null 2>&1; then
        exit 0
    fi
done

SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "setup-browser: chromium is missing and apt-get needs root; install the 'chromium' package" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# A fresh machine's package lists may not know chromium yet: refresh them only then.
if ! apt-cache show chromium >/dev/null 2>&1; then
    $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null 2>&1 || { echo "setup-browser: chromium did not install" >&2; exit 1; }
