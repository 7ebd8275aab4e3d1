"""The compiled cores (native/, Rust, built by `make setup` through scripts/setup-native.sh
into pipelines/segments/_native): `decode`'s JSON lines, silver's offset-commit columns and
the assignors' hot paths.

`lib` is the loaded library, or None: where it was not built (no Rust toolchain), or with
REBALANCE_AUDIT_NO_NATIVE=1 (to rule it out when something looks wrong). Every caller then
takes its pure-Python path, which gives the same results, slower."""
from __future__ import annotations

import importlib
import os
from typing import Any

lib: Any = None
if os.environ.get("REBALANCE_AUDIT_NO_NATIVE", "") in ("", "0"):
    try:
        lib = importlib.import_module("pipelines.segments._native")
    except ImportError:
        pass
