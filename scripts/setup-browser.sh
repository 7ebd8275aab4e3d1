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

"$(dirname "$0")/apt-install.sh" setup-browser chromium fonts-dejavu-core
command -v chromium >/dev/null 2>&1 || { echo "setup-browser: chromium did not install" >&2; exit 1; }
