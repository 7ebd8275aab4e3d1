"""Ending a process that used native thread pools (Arrow's, delta-rs's, librdkafka's)."""
from __future__ import annotations

import os
import sys


def exit_now(code: int) -> None:
    """End the process without interpreter teardown, once all output is flushed.

    Tearing the interpreter down after Arrow or librdkafka work can race their native
    thread pools and abort the process with SIGABRT ("terminate called without an active
    exception"; measured: about 1 run in 20 of `python -m pipelines.lake.compare` on a
    loaded machine), turning a command that succeeded into a failure for whatever started
    it. Only for processes without atexit work (no Spark, no broker)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
