#!/usr/bin/env bash
# Builds the compiled cores of `rebalance-audit decode` and of the partition assignors
# (native/, Rust + PyO3) into pipelines/segments/_native.abi3.so, once per change of its
# sources. Without a Rust toolchain it says so and leaves both on their pure-Python paths:
# same output, slower.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${REBALANCE_AUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rebalance-audit}
TARGET=pipelines/segments/_native.abi3.so
stamp="$TARGET.$(cat native/Cargo.toml native/Cargo.lock native/src/*.rs | sha1sum | cut -c1-12)"

if [ -f "$TARGET" ] && [ -f "$stamp" ]; then
    exit 0
fi
CARGO=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
if [ ! -x "$CARGO" ]; then
    echo "setup: no Rust toolchain (cargo); decode and the assignors run their pure-Python paths (same output, slower)" >&2
    exit 0
fi
export CARGO_TARGET_DIR="$CACHE/native-target"
# PyO3 asks this interpreter for its configuration; abi3 links no libpython.
PYO3_PYTHON="$PWD/.venv/bin/python" "$CARGO" build --quiet --release --locked \
    --manifest-path native/Cargo.toml
rm -f "$TARGET" "$TARGET".*
cp "$CARGO_TARGET_DIR/release/lib_native.so" "$TARGET"
touch "$stamp"
