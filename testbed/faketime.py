"""A node's wall clock offset by a fixed number of seconds: Debian's libfaketime preloaded into
that node's JVM alone (``KafkaCluster(clock_skew_s={node_id: seconds})``).

What it fakes, and what it leaves alone:

* ``FAKETIME="+8.000"`` (or ``"-8.000"``): a relative offset, so the faked wall clock still
  runs at the real rate. Java's ``System.currentTimeMillis()`` and ``Instant.now()`` go
  through glibc's ``clock_gettime(CLOCK_REALTIME)``, which the preloaded library interposes
  (the vDSO is only reached through glibc's symbol, so the interposition holds on OpenJDK
  17, measured): the records a broker
  appends (batch timestamps, commit and generation timestamps) and its log4j line times
  carry the offset, as on a machine whose clock is wrong.
* ``FAKETIME_DONT_FAKE_MONOTONIC=1``: ``CLOCK_MONOTONIC`` stays real, so ``System.nanoTime()``
  and with it Kafka's timers, session timeouts and KRaft heartbeats run as on any machine
  (libfaketime's README: without it the JVM usually hangs).
* ``FAKETIME_FORCE_MONOTONIC_FIX=0``: libfaketime turns its "monotonic fix" on by itself on
  this glibc, and it shifts the deadline of every ``pthread_cond_timedwait`` by the offset
  although HotSpot's waits are on ``CLOCK_MONOTONIC``: measured on OpenJDK 17 with Debian's
  libfaketime 0.9.10, ``Object.wait(500)`` and ``LockSupport.parkNanos(500 ms)`` returned
  after 0 ms at -8 s and +8 s (with the fix off: 500 ms), and a skewed broker spun, fell
  behind its replicas and ignored SIGTERM for 30 s. With the fix off every timed wait
  measured (sleep, wait, park, select, latch, scheduled executor) took its 500 ms.
* File times a skewed JVM reads back (``stat``) are shifted the same way, as its own clock
  would have written them.

Only the JVM of a skewed node gets the variables: the other nodes, Kafka's tools, the
clients and the watchdogs keep the real clock.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Mapping

from .kafka_home import REPO_ROOT, TestbedUnavailable

SETUP_SCRIPT = REPO_ROOT / "scripts" / "setup-faketime.sh"
_LIB = "libfaketime.so.1"


def find_libfaketime() -> Path:
    """Debian's ``libfaketime.so.1`` (package libfaketime, pulled in by faketime):
    ``REBALANCE_AUDIT_LIBFAKETIME`` if set, else the multiarch folders."""
    explicit = os.environ.get("REBALANCE_AUDIT_LIBFAKETIME")
    if explicit:
        if not Path(explicit).is_file():
            raise TestbedUnavailable(f"REBALANCE_AUDIT_LIBFAKETIME={explicit} is not a file")
        return Path(explicit)
    for folder in sorted(Path("/usr/lib").glob("*-linux-gnu/faketime")) + [Path("/usr/lib/faketime"),
                                                                           Path("/usr/local/lib/faketime")]:
        if (folder / _LIB).is_file():
            return folder / _LIB
    raise TestbedUnavailable(f"libfaketime is not installed (a skewed broker clock needs it): run {SETUP_SCRIPT}")


def faketime_offset(seconds: float) -> str:
    """libfaketime's relative offset for ``seconds`` (milliseconds kept): ``+8.000``, ``-0.250``."""
    if not math.isfinite(seconds):
        raise ValueError(f"a clock skew must be a finite number of seconds, not {seconds!r}")
    return f"{seconds:+.3f}"


def skewed_environment(seconds: float, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a process whose wall clock runs ``seconds`` ahead (negative: behind)
    of the machine's; its monotonic clock stays real."""
    env = dict(os.environ if base is None else base)
    library = str(find_libfaketime())
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{library}:{preload}" if preload else library
    env["FAKETIME"] = faketime_offset(seconds)
    env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    env["FAKETIME_FORCE_MONOTONIC_FIX"] = "0"
    return env
