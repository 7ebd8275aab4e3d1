#!/usr/bin/env bash
# Installs Debian packages for the set-up: apt-get as root, or through sudo; says which
# package to install when neither is possible. The package lists are refreshed only when
# they do not know the first package yet (a fresh machine). Used by setup-browser.sh and
# setup-faketime.sh, which first check that what they need is missing.
#   scripts/apt-install.sh WHO PACKAGE...     (WHO names the caller in messages)
set -euo pipefail
who=$1
shift

SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "$who: apt-get needs root; install the package(s): $*" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show "$1" >/dev/null 2>&1; then
    $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
