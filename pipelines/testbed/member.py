"""One consumer-group member: a real librdkafka consumer in its own OS process.

Started by ``scenario.py`` as ``python -m pipelines.testbed.member CONFIG_JSON``. It
subscribes, processes (records) every message it gets, commits (librdkafka's
auto-commit, or synchronous manual commits at an interval and on revocation) and
writes its ground truth to a JSON-lines file, one object per event, flushed at once
so that a SIGKILL loses nothing already written:

* ``start``     pid, config
* ``assign`` / ``revoke`` / ``lost``   member_id, partitions ``[[topic, partition], ...]``
* ``processed`` member_id, topic, partition, offset, key
* ``commit``    member_id, source (``callback``: librdkafka's commit result, auto or
  manual; ``sync``: what a manual synchronous commit returned), error, offsets ``[[topic, partition, offset, error], ...]`` (offset = the
  next offset to consume, as committed)
* ``commit_request`` member_id, reason (``interval`` / ``revoke`` / ``close``) for manual commits
* ``error``     a consumer error
* ``closing`` / ``closed``   a clean shutdown (close() sends LeaveGroup)

Every event has ``ts`` (wall clock, ms since the epoch) and ``member`` (the name).
A line ``close`` on stdin, or stdin closing (the driver died), shuts it down cleanly.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any


class _Truth:
    def __init__(self, path: str, name: str):
        self._file = open(path, "a", encoding="utf-8")
        self._name = name
        self._lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> None:
        line = json.dumps({"ts": int(time.time() * 1000), "member": self._name, "event": event, **fields})
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()


def _partitions(tps) -> list[list[Any]]:
    return [[tp.topic, tp.partition] for tp in tps]


def run(cfg: dict[str, Any]) -> int:
    from confluent_kafka import Consumer, KafkaError, KafkaException

    # ^C in a terminal reaches the whole foreground process group; the driver handles it
    # and closes the members cleanly (stdin), so a member must not die of it half-way.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    truth = _Truth(cfg["truth_path"], cfg["name"])
    manual = cfg.get("commit", "auto") == "manual"
    stop = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        stop.set()  # "close", or EOF because the driver went away

    threading.Thread(target=watch_stdin, daemon=True).start()

    consumer: Consumer

    def member_id() -> str | None:
        try:
            return consumer.memberid()
        except (RuntimeError, KafkaException):
            return None

    def on_commit(err, offsets) -> None:
        truth.write("commit", member_id=member_id(), source="callback",
                    error=None if err is None else str(err),
                    offsets=[[tp.topic, tp.partition, tp.offset, None if tp.error is None else str(tp.error)]
                             for tp in (offsets or [])])

    def commit_now(reason: str) -> None:
        truth.write("commit_request", member_id=member_id(), reason=reason)
        try:
            result = consumer.commit(asynchronous=False)
            truth.write("commit", member_id=member_id(), source="sync", error=None,
                        offsets=[[tp.topic, tp.partition, tp.offset, None if tp.error is None else str(tp.error)]
                                 for tp in (result or [])])
        except KafkaException as exc:
            # _NO_OFFSET: nothing consumed since the last commit. Recorded, not hidden.
            truth.write("commit_failed", member_id=member_id(), reason=reason, error=str(exc.args[0]))

    def on_assign(c, partitions) -> None:
        truth.write("assign", member_id=member_id(), partitions=_partitions(partitions))

    def on_revoke(c, partitions) -> None:
        truth.write("revoke", member_id=member_id(), partitions=_partitions(partitions))
        if manual and cfg.get("commit_on_revoke", True) and partitions:
            commit_now("revoke")

    def on_lost(c, partitions) -> None:
        truth.write("lost", member_id=member_id(), partitions=_partitions(partitions))

    import logging

    from .broker import librdkafka_log

    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s")
    props = dict(cfg["client_properties"])
    props.update({
        "logger": librdkafka_log,
        "group.id": cfg["group_id"],
        "client.id": cfg.get("client_id") or cfg["name"],
        "enable.auto.commit": not manual,
        "auto.offset.reset": "earliest",
        "on_commit": on_commit,
    })
    consumer = Consumer(props)
    truth.write("start", pid=os.getpid(), config={k: v for k, v in cfg.items() if k != "client_properties"},
                client_properties={k: v for k, v in props.items() if k not in ("on_commit", "logger")})
    consumer.subscribe(cfg["topics"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    interval = float(cfg.get("commit_interval_s", 1.0))
    delay = float(cfg.get("processing_delay_ms", 0)) / 1000.0
    next_commit = time.monotonic() + interval
    dirty = False
    while not stop.is_set():
        msg = consumer.poll(0.2)
        if msg is not None:
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    truth.write("error", member_id=member_id(), error=str(err), fatal=err.fatal())
                    if err.fatal():
                        break
            else:
                key = msg.key()
                truth.write("processed", member_id=member_id(), topic=msg.topic(), partition=msg.partition(),
                            offset=msg.offset(), key=None if key is None else key.decode("utf-8", "replace"))
                dirty = True
                if delay:
                    time.sleep(delay)
        if manual and dirty and time.monotonic() >= next_commit:
            commit_now("interval")
            dirty = False
            next_commit = time.monotonic() + interval
    truth.write("closing", member_id=member_id())
    if manual and dirty:
        commit_now("close")
    consumer.close()  # revokes (on_revoke), auto-commits if enabled, sends LeaveGroup
    truth.write("closed")
    truth.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m pipelines.testbed.member CONFIG_JSON", file=sys.stderr)
        return 2
    return run(json.loads(argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
