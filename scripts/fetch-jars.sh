#!/usr/bin/env bash
# Fetches the runtime JARs a small pom declares (scripts/maven/*.pom.xml) with Maven from
# Maven Central into a folder of the set-up cache, once: a stamp names the pom's content,
# so editing a version fetches again. Maven's local repository is kept under the cache
# too, so nothing lands in ~/.m2.
#
#   scripts/fetch-jars.sh POM DEST NAME REQUIRED_JAR_GLOB...
#
# The fetch goes to DEST.tmp and is swapped in whole only when every REQUIRED_JAR_GLOB
# (relative to the folder) matches: an interrupted or partial fetch never leaves a folder
# that looks complete.
set -euo pipefail
POM=$1 DEST=$2 NAME=$3
shift 3
CACHE=${REBALANCE_AUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rebalance-audit}
STAMP="$DEST/.fetched-$(sha1sum "$POM" | cut -c1-12)"
[ -f "$STAMP" ] && exit 0

command -v mvn >/dev/null 2>&1 || {
    echo "setup: Maven (mvn) is not installed; it fetches $NAME from Maven Central" >&2
    exit 1
}
echo "setup: fetching $NAME with Maven into $DEST" >&2
rm -rf "$DEST.tmp"
mvn -q -B -f "$POM" -Dmaven.repo.local="$CACHE/maven" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$DEST.tmp" >&2
for pattern in "$@"; do
    compgen -G "$DEST.tmp/$pattern" >/dev/null || { echo "setup: $NAME: no $pattern fetched" >&2; exit 1; }
done
rm -rf "$DEST"; mv "$DEST.tmp" "$DEST"
touch "$STAMP"
