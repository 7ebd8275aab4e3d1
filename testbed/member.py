"""One consumer-group member: a real librdkafka consumer in its own OS process.

Started by ``scenario.py`` as ``python -m testbed.member CONFIG_JSON``. It
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
* ``txn_commit`` / ``txn_abort``   transactional members: the offsets a transaction sent to
  the group (``offsets``) and the records it processed (``processed``: count); after an
  abort the member seeks back to its last committed offsets and processes them again
* ``stall_begin`` / ``stall_end``   the member stopped calling poll() for ``seconds``
* ``error``     a consumer error
* ``closing`` / ``closed``   a clean shutdown (close() sends LeaveGroup)

Every event has ``ts`` (wall clock, ms since the epoch) and ``member`` (the name).
Commands on stdin, one a line: ``close`` (shut down cleanly; stdin closing, as when the
driver dies, does the same) and ``stall SECONDS`` (stop polling that long: past
``max.poll.interval.ms`` librdkafka leaves the group, as a stuck application does).

``commit`` modes: ``auto`` (librdkafka's auto-commit), ``manual`` (synchronous commits at an
interval, on revocation and at close), ``transactional`` (consume-transform-produce: each
batch's output records and its offsets in one transaction, every ``abort_every``-th aborted).
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


def _offsets(tps) -> list[list[Any]]:
    return [[tp.topic, tp.partition, tp.offset, None if tp.error is None else str(tp.error)] for tp in (tps or [])]


class _Commands:
    """What the driver asks on stdin: ``close`` (or EOF), ``stall SECONDS``."""

    def __init__(self):
        self.stop = threading.Event()
        self._stalls: list[float] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["close"]:
                break
            if words[:1] == ["stall"] and len(words) == 2:
                with self._lock:
                    self._stalls.append(float(words[1]))
        self.stop.set()  # "close", or EOF because the driver went away

    def next_stall(self) -> float | None:
        with self._lock:
            return self._stalls.pop(0) if self._stalls else None


class _Transactions:
    """Consume-transform-produce: a batch's output records and the group's offsets commit or
    abort together. After an abort the consumer seeks back to the last committed offsets,
    so the batch is processed again (that is not a duplicate for the group: the aborted
    output and offsets never became visible)."""

    def __init__(self, cfg: dict[str, Any], consumer, truth: _Truth, member_id):
        from confluent_kafka import Producer

        from .broker import librdkafka_log

        self.consumer, self.truth, self.member_id = consumer, truth, member_id
        self.output_topic = cfg["output_topic"]
        self.abort_every = int(cfg.get("abort_every") or 0)
        self.producer = Producer({
            "bootstrap.servers": cfg["client_properties"]["bootstrap.servers"],
            "transactional.id": f"{cfg['group_id']}-{cfg.get('client_id') or cfg['name']}",
            "logger": librdkafka_log,
        })
        self.producer.init_transactions(30)
        self.open = False
        self.count = 0
        self.batch: dict[tuple[str, int], list[int]] = {}

    def process(self, msg) -> None:
        if not self.open:
            self.producer.begin_transaction()
            self.open, self.batch = True, {}
        self.producer.produce(self.output_topic, key=msg.key(), value=msg.value())
        first_last = self.batch.setdefault((msg.topic(), msg.partition()), [msg.offset(), msg.offset()])
        first_last[1] = msg.offset()

    def finish(self, reason: str, force_commit: bool = False) -> None:
        """End the open transaction: commit it, or abort every ``abort_every``-th one."""
        from confluent_kafka import KafkaException, TopicPartition

        if not self.open:
            return
        self.open = False
        self.count += 1
        ranges: list[list[Any]] = [[t, p, first, last] for (t, p), (first, last) in sorted(self.batch.items())]
        offsets = [TopicPartition(t, p, last + 1) for t, p, _, last in ranges]
        abort = not force_commit and self.abort_every and self.count % self.abort_every == 0
        try:
            # The offsets go into the transaction either way, as an application that fails
            # late does: an aborted one leaves its offset commits and an ABORT marker in
            # __consumer_offsets, neither of which may count.
            self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(), 30)
            if not abort:
                self.producer.commit_transaction(30)
                self.truth.write("txn_commit", member_id=self.member_id(), reason=reason,
                                 offsets=_offsets(offsets), ranges=ranges)
                return
        except KafkaException as exc:
            # Fenced by a rebalance (stale generation): the transaction cannot commit.
            self.truth.write("error", member_id=self.member_id(), error=f"transaction commit failed: {exc.args[0]}")
        self.producer.abort_transaction(30)
        self.truth.write("txn_abort", member_id=self.member_id(), reason=reason, ranges=ranges)
        if reason != "revoke":  # after a revocation the partitions are someone else's
            self._rewind([TopicPartition(t, p) for t, p, _, _ in ranges])

    def _rewind(self, partitions) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        for tp in self.consumer.committed(partitions, timeout=30):
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


def run(cfg: dict[str, Any]) -> int:
    import logging

    from confluent_kafka import Consumer, KafkaError, KafkaException

    from .broker import librdkafka_log

    # ^C in a terminal reaches the whole foreground process group; the driver handles it
    # and closes the members cleanly (stdin), so a member must not die of it half-way.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    truth = _Truth(cfg["truth_path"], cfg["name"])
    mode = cfg.get("commit", "auto")
    commands = _Commands()
    consumer: Consumer
    txn: _Transactions | None = None

    def member_id() -> str | None:
        try:
            return consumer.memberid()
        except (RuntimeError, KafkaException):
            return None

    def on_commit(err, offsets) -> None:
        truth.write("commit", member_id=member_id(), source="callback",
                    error=None if err is None else str(err), offsets=_offsets(offsets))

    def commit_now(reason: str) -> None:
        truth.write("commit_request", member_id=member_id(), reason=reason)
        try:
            result = consumer.commit(asynchronous=False)
            truth.write("commit", member_id=member_id(), source="sync", error=None, offsets=_offsets(result))
        except KafkaException as exc:
            # _NO_OFFSET: nothing consumed since the last commit. Recorded, not hidden.
            truth.write("commit_failed", member_id=member_id(), reason=reason, error=str(exc.args[0]))

    def on_assign(c, partitions) -> None:
        truth.write("assign", member_id=member_id(), partitions=_partitions(partitions))

    def on_revoke(c, partitions) -> None:
        truth.write("revoke", member_id=member_id(), partitions=_partitions(partitions))
        if txn is not None and partitions:
            txn.finish("revoke", force_commit=True)
        elif mode == "manual" and cfg.get("commit_on_revoke", True) and partitions:
            commit_now("revoke")

    def on_lost(c, partitions) -> None:
        truth.write("lost", member_id=member_id(), partitions=_partitions(partitions))

    props = dict(cfg["client_properties"])
    props.update({
        "logger": librdkafka_log,
        "group.id": cfg["group_id"],
        "client.id": cfg.get("client_id") or cfg["name"],
        "enable.auto.commit": mode == "auto",
        "auto.offset.reset": "earliest",
        "on_commit": on_commit,
    })
    if mode == "transactional":
        props["isolation.level"] = "read_committed"
    consumer = Consumer(props)
    truth.write("start", pid=os.getpid(), config={k: v for k, v in cfg.items() if k != "client_properties"},
                client_properties={k: v for k, v in props.items() if k not in ("on_commit", "logger")})
    if mode == "transactional":
        txn = _Transactions(cfg, consumer, truth, member_id)
    consumer.subscribe(cfg["topics"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    interval = float(cfg.get("commit_interval_s", 1.0))
    delay = float(cfg.get("processing_delay_ms", 0)) / 1000.0
    next_commit = time.monotonic() + interval
    last_commit = time.monotonic()
    dirty = False
    stall: float | None = None
    while not commands.stop.is_set():
        stall = stall if stall is not None else commands.next_stall()
        # A manual committer stalls half-way between two commits, not right after one: what
        # it processed since its last commit is then what the group consumes again.
        if stall is not None and (mode != "manual" or time.monotonic() - last_commit >= interval / 2):
            # A stuck handler: no poll() for this long. Past max.poll.interval.ms librdkafka
            # leaves the group; the next poll() rejoins.
            truth.write("stall_begin", member_id=member_id(), seconds=stall)
            time.sleep(stall)
            truth.write("stall_end", member_id=member_id())
            stall = None
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
                if txn is not None:
                    txn.process(msg)
                if delay:
                    time.sleep(delay)
        if dirty and time.monotonic() >= next_commit:
            if txn is not None:
                txn.finish("interval")
            elif mode == "manual":
                commit_now("interval")
            dirty = False
            next_commit = last_commit = time.monotonic()
            next_commit += interval
    truth.write("closing", member_id=member_id())
    if txn is not None:
        txn.finish("close", force_commit=True)
    elif mode == "manual" and dirty:
        commit_now("close")
    consumer.close()  # revokes (on_revoke), auto-commits if enabled, sends LeaveGroup
    truth.write("closed")
    truth.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m testbed.member CONFIG_JSON", file=sys.stderr)
        return 2
    return run(json.loads(argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
