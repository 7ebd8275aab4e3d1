"""Live ingestion: `__consumer_offsets` over the wire (librdkafka) → bronze, exactly once.

* Every partition is read with `assign()` (no group membership, no offset commits: reading
  leaves no trace on the cluster) and `isolation.level=read_committed`. librdkafka never
  delivers control records, and with read_committed it drops aborted transactional
  records: what it skips reads as missing offsets.
* Missing offsets, two or more in a row, are read back before the rows are committed, with
  a read_uncommitted consumer: what it delivers there belongs to aborted transactions (the
  range lies below the last stable offset, so every transaction in it has ended) and is
  stored with `aborted` true, so that silver drops it and gold does not take the range for
  compaction. What neither reader gets is transaction markers or records compaction
  removed. A single missing offset is a marker (each transaction ends with one), and is
  not read back: on a busy transactional partition that would read it all twice. A
  partition read from its beginning counts from its log start offset, so aborted records
  before its first committed one are read back too.
* Exactly once: the position of each partition (the next offset to read) is stored as a
  position `kafka:<cluster>:<partition>` (writer `kafka:<cluster>`, pipelines/lake/positions.py)
  committed with the rows read
  up to it. A run resumes from those positions; a crash anywhere either committed rows and
  positions together or neither. Rows are also keyed by (cluster, partition, offset), so
  even a position lost some other way cannot duplicate a row.
* Quarantine rows (consumer errors tied to a partition/offset) are committed before the
  records commit that moves the position past them, and keyed by that position.
* The position is the offset after the last record delivered, or the offset librdkafka
  reports at end of partition when that is further: with transactions a partition's last
  offsets can be control records (COMMIT/ABORT markers) or aborted records, never
  delivered, and only the end-of-partition offset moves past them. Under read_committed
  that end is the last stable offset: nothing past an open transaction is read or stored
  until the transaction ends.
* A run reads each partition up to the end it has while the run reads it: a partition is
  done once it reported end of partition, or once it was read up to the end (last stable
  offset) it had when the run started. It stays done when more records arrive, so the run
  ends on a cluster whose groups keep committing (waiting for every partition to be at its
  end at the same instant would not, with commits landing on all partitions all the time).
* Each run also samples the log-end offsets of the partitions the groups commit on into
  `partition_end_offsets`, and the ids and names of topics it has not seen into
  `topic_metadata` (KIP-848 records name topics by id; from Kafka 4.1 nothing in
  `__consumer_offsets` maps ids to names).
* librdkafka properties pass through untouched (SASL, SSL, ...); their values never
  appear in output, errors or tables.
* librdkafka's own log lines (a refused connection, retried every 50 ms) go to the Python
  logger `CLIENT_LOG`, quiet unless the application configures logging (the CLI's
  `--debug`, Dagster's): what went wrong reaches the user as the command's one error line.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping

from pipelines.ingest.bronze import (
    BufferedWriter,
    Summary,
    check_cluster,
    now_utc,
    offsets_writer,
    quarantine_row,
    quarantine_writer,
)
from pipelines.ingest import identity
from pipelines.ingest.schemas import PARTITION_END_OFFSETS
from pipelines.lake import Positions

TOPIC = "__consumer_offsets"
DEFAULT_TIMEOUT = 30.0
DEFAULT_COMMIT_EVERY = 50_000

# Ours, always: the exactly-once design depends on them.
FORCED = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "enable.partition.eof": "true",
    "isolation.level": "read_committed",
}
# Defaults a user may override.
DEFAULTS = {
    "group.id": "rebalance-audit-ingest",  # required by librdkafka; never joined (assign only)
    "client.id": "rebalance-audit-ingest",
    "auto.offset.reset": "earliest",
}

_TS_TYPES = {0: None, 1: "CreateTime", 2: "LogAppendTime"}

# Every librdkafka client of ingestion (consumer, admin) logs here. The NullHandler keeps
# Python's last-resort handler from printing its lines to stderr when nothing is configured.
CLIENT_LOG = logging.getLogger("pipelines.ingest.librdkafka")
CLIENT_LOG.addHandler(logging.NullHandler())


class IngestError(RuntimeError):
    """Live ingestion cannot proceed (unreachable cluster, bad configuration, ...)."""


def read_properties(path: str) -> dict[str, str]:
    """A Java-style .properties file (key=value or key: value, # and ! comments)."""
    props: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            seps = [i for i in (line.find("="), line.find(":")) if i > 0]
            if not seps:
                raise ValueError(f"{path}:{n}: not a key=value line")
            i = min(seps)
            props[line[:i].strip()] = line[i + 1:].strip()
    return props


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """`-X key=value` arguments → dict."""
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"-X expects key=value, got {item.split('=')[0]!r}")
        props[key.strip()] = value
    return props


def _mask(text: str, secrets: Iterable[str]) -> str:
    for s in sorted({s for s in secrets if s and len(s) >= 3}, key=len, reverse=True):
        text = text.replace(s, "***")
    return text


def writer(cluster: str) -> str:
    """The writer of a cluster's Kafka read positions in bronze (pipelines/lake/positions.py)."""
    return f"kafka:{cluster}"


def app_id(cluster: str, partition: int) -> str:
    return f"kafka:{cluster}:{partition}"


def _consumer_config(config: Mapping[str, object]) -> dict:
    conf = {**DEFAULTS, **{k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in config.items()}}
    for key, value in FORCED.items():
        if key in config and str(config[key]).lower() != value:
            raise IngestError(f"{key} is fixed to {value} for exactly-once ingestion; remove it from the properties")
        conf[key] = value
    if not conf.get("bootstrap.servers") and not conf.get("metadata.broker.list"):
        raise IngestError("no bootstrap servers: pass --bootstrap-servers or -X bootstrap.servers=HOST:PORT")
    return conf


class _Consumer:
    """The librdkafka consumer, with its errors kept free of property values."""

    def __init__(self, config: Mapping[str, object], timeout: float, isolation: str = "read_committed"):
        from confluent_kafka import Consumer

        self.secrets = [str(v) for k, v in config.items() if k not in ("bootstrap.servers",)]
        self.fatal: str | None = None
        self.all_down = False
        # broker address → (its name, its latest connection error), latest last: named when
        # a run stalls, so the error says which broker is in trouble, not only that one is.
        self.broker_errors: dict[str, tuple[str, str]] = {}
        conf = _consumer_config(config)
        conf["isolation.level"] = isolation
        conf["error_cb"] = self._on_error
        conf["logger"] = CLIENT_LOG
        self.timeout = timeout
        try:
            self.c = Consumer(conf)
        except Exception as exc:  # KafkaException or ValueError on a bad property
            raise IngestError(f"invalid Kafka client configuration: {_mask(str(exc), self.secrets)}") from None
        self.bootstrap = str(conf.get("bootstrap.servers") or conf.get("metadata.broker.list"))

    def _on_error(self, err) -> None:
        from confluent_kafka import KafkaError

        if err.fatal():
            self.fatal = _mask(err.str(), self.secrets)
        elif err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.all_down = True
        elif err.code() == KafkaError._TRANSPORT:
            # librdkafka words these "host:port/id: what happened", or "host:port/bootstrap"
            # for a connection made before the broker's id was known: one entry per address.
            broker, sep, what = _mask(err.str(), self.secrets).partition(": ")
            address, slash, node = broker.partition("/")
            if sep and slash:
                self.broker_errors.pop(address, None)
                self.broker_errors[address] = f"{address} (node {node})" if node.isdigit() else address, what
        elif err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
            self.fatal = _mask(err.str(), self.secrets)

    def partitions(self, topic: str) -> list[int]:
        from confluent_kafka import KafkaException

        try:
            md = self.c.list_topics(topic, timeout=self.timeout)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else exc
            raise IngestError(
                f"cannot reach Kafka at {self.bootstrap} within {self.timeout:g}s: {_mask(str(err), self.secrets)}"
            ) from None
        if self.fatal:
            raise IngestError(f"Kafka client error: {self.fatal}")
        t = md.topics.get(topic)
        if t is None or (t.error is not None and not t.partitions):
            why = _mask(str(t.error), self.secrets) if t is not None and t.error else "not found"
            raise IngestError(f"topic {topic} on {self.bootstrap}: {why}")
        return sorted(t.partitions)

    def stall_detail(self, stuck: Iterable[int]) -> str:
        """Which brokers lead the partitions a run waits for, and the brokers' latest
        connection errors: what an SRE needs to know where to look."""
        from confluent_kafka import KafkaException

        parts = []
        try:
            md = self.c.list_topics(TOPIC, timeout=2.0)
        except KafkaException:
            md = None
        if md is not None and TOPIC in md.topics:
            by_leader: dict[str, list[int]] = {}
            for p in sorted(stuck):
                meta = md.topics[TOPIC].partitions.get(p)
                leader = None if meta is None else md.brokers.get(meta.leader)
                name = f"{leader.host}:{leader.port} (node {leader.id})" if leader is not None else "no leader"
                by_leader.setdefault(name, []).append(p)
            parts.append("; ".join(f"partitions {ps[:10]} led by {name}" for name, ps in sorted(by_leader.items())))
        if self.broker_errors:
            latest = list(self.broker_errors.values())[-5:]
            parts.append("latest broker errors: " + "; ".join(f"{name}: {what}" for name, what in reversed(latest)))
        return "".join(f" ({p})" for p in parts)

    def close(self) -> None:
        try:
            self.c.close()
        except Exception:  # noqa: BLE001 - closing a consumer whose broker vanished
            pass


def _row(msg, cluster: str, ingested_at) -> dict:
    ts_type, ts = msg.timestamp()
    headers = msg.headers()
    return {
        "cluster": cluster,
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": ts if ts_type else None,
        "timestamp_type": _TS_TYPES.get(ts_type),
        "key": msg.key(),
        "value": msg.value(),
        "headers": [{"key": k, "value": v} for k, v in headers] if headers else [],
        "leader_epoch": msg.leader_epoch(),
        "source": "kafka",
        "ingested_at": ingested_at,
    }


def _commit_keys(keys: Iterable[bytes]) -> set[tuple[str, int]]:
    """(topic, partition) of the OffsetCommit keys (record types 0/1)."""
    from pipelines.codec import decode_key

    found: set[tuple[str, int]] = set()
    for key in keys:
        if not key or len(key) < 2 or key[1] > 1 or key[0] != 0:
            continue  # not type 0/1 (cheap pre-check on the big-endian int16 type)
        try:
            rtype, data = decode_key(key)
        except Exception:  # noqa: BLE001 - undecodable keys are silver's to quarantine
            continue
        if rtype in (0, 1) and data.get("topic") is not None and data.get("partition") is not None:
            found.add((str(data["topic"]), int(data["partition"])))
    return found


def _list_offsets(consumer: _Consumer, partitions: list[int], timeout: float, sentinel: int) -> dict[int, int]:
    """Each partition's offset for a ListOffsets sentinel given as the timestamp (one request
    per leader; librdkafka's ListOffsets carries the consumer's isolation level): LATEST
    (-1) is the end a read_committed reader sees now, its last stable offset; EARLIEST (-2)
    the log start offset, where a reader from the beginning starts. Partitions whose offset
    cannot be had now are left out."""
    from confluent_kafka import KafkaException, TopicPartition

    if not partitions:
        return {}
    try:
        found = consumer.c.offsets_for_times([TopicPartition(TOPIC, p, sentinel) for p in partitions],
                                             timeout=min(timeout, 10.0))
    except KafkaException:
        return {}
    return {tp.partition: tp.offset for tp in found if tp.error is None and tp.offset >= 0}


class _SkippedReader:
    """Reads back the ranges the read_committed reader skipped, with read_uncommitted.

    One consumer per run, made at the first range: most clusters never need it."""

    def __init__(self, config: Mapping[str, object], timeout: float):
        self.config = config
        self.timeout = timeout
        self.consumer: _Consumer | None = None

    def read(self, skipped: Mapping[int, list[tuple[int, int]]], cluster: str, ingested_at) -> list[dict]:
        """The rows of the records inside `skipped` (partition → [from, to) ranges, in order)."""
        from confluent_kafka import KafkaError, TopicPartition

        if self.consumer is None:
            self.consumer = _Consumer(self.config, self.timeout, isolation="read_uncommitted")
        c = self.consumer
        # Read each partition from its first range's start past its last range's end: one
        # pass, keeping what falls inside a range.
        until = {p: ranges[-1][1] for p, ranges in skipped.items() if ranges}
        c.c.assign([TopicPartition(TOPIC, p, skipped[p][0][0]) for p in until])
        rows: list[dict] = []
        last_progress = time.monotonic()
        try:
            while until:
                if c.fatal:
                    raise IngestError(f"Kafka client error: {c.fatal}")
                if time.monotonic() - last_progress > self.timeout:
                    stuck = sorted(until)
                    raise IngestError(
                        f"no data from Kafka at {c.bootstrap} for {self.timeout:g}s reading back the offsets "
                        f"read_committed skipped in partitions {stuck[:10]}" + c.stall_detail(stuck))
                for msg in c.c.consume(num_messages=1000, timeout=0.2):
                    last_progress = time.monotonic()
                    p, off, err = msg.partition(), msg.offset(), msg.error()
                    if p not in until:
                        continue
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            del until[p]  # the range's end is below the end: nothing more to find
                        elif err.fatal() or off is not None and off >= 0:
                            raise IngestError(f"reading back partition {p} at {off}: {_mask(err.str(), c.secrets)}")
                        continue
                    assert off is not None  # a record always has one
                    if off >= until[p]:
                        del until[p]
                    elif any(lo <= off < hi for lo, hi in skipped[p]):
                        rows.append({**_row(msg, cluster, ingested_at), "transactional": True, "aborted": True})
        finally:
            c.c.unassign()
        return rows

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()


def ingest_kafka(
    lake,
    config: Mapping[str, object],
    cluster: str | None = None,
    max_records: int | None = None,
    max_seconds: float | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    commit_every: int = DEFAULT_COMMIT_EVERY,
    sample_end_offsets: bool = True,
    progress: Callable[[Summary], None] | None = None,
) -> Summary:
    """Read `__consumer_offsets` from where the last run stopped, up to the current end
    (or `max_records` / `max_seconds`), into bronze; then sample end offsets.

    `cluster` None: the name this Kafka cluster (its cluster id and `__consumer_offsets`
    topic id, as the brokers answer) was loaded under before, else "default"; a given name
    that disagrees with what the lake knows is used and warned about (pipelines/ingest/identity.py).
    The name used and the warnings are in `summary.extra` ("cluster", "identity_warnings")."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, TopicPartition

    if cluster is not None:
        check_cluster(cluster)
    if commit_every < 1:
        raise ValueError("commit_every must be at least 1")
    started = time.monotonic()
    summary = Summary()
    records = offsets_writer(lake, summary, chunk_rows=1 << 62)  # flushed here, with positions
    quarantine = quarantine_writer(lake, summary)
    consumer = _Consumer(config, timeout)
    skipped_reader = _SkippedReader(config, timeout)
    try:
        partitions = consumer.partitions(TOPIC)
        # Reachable: who it is decides the name, and the name the positions to resume from.
        found = _live_identity(config, consumer, summary, timeout)
        cluster = identity.settle_name(lake, cluster, found, summary)
        stored = lake.positions(records.table.name, writer(cluster))
        start = {p: stored.get(app_id(cluster, p)) for p in partitions}
        consumer.c.assign(
            [TopicPartition(TOPIC, p, start[p] if start[p] is not None else OFFSET_BEGINNING) for p in partitions]
        )
        # Partitions without an end here are done at end of partition only.
        targets = _list_offsets(consumer, partitions, timeout, OFFSET_END)
        # Where the partitions read from their beginning start: what read_committed skips
        # before their first record is a skipped run like any other (none known: not read back).
        log_start = _list_offsets(consumer, [p for p in partitions if start[p] is None], timeout, OFFSET_BEGINNING)
        positions: dict[int, int] = {}   # partition → next offset, not yet committed
        # Done: read to an end it had during this run (see the module docstring); never undone.
        done: set[int] = {p for p in partitions if start[p] is not None and p in targets and start[p] >= targets[p]}
        commit_topics: set[tuple[str, int]] = set()
        # partition → [from, to) ranges of two or more offsets the reader skipped, not yet committed.
        skipped: dict[int, list[tuple[int, int]]] = {}
        summary.extra["aborted_records"] = 0
        pending = 0
        last_progress = time.monotonic()
        ingested_at = now_utc()

        def skip_to(p: int, off: int) -> None:
            """The reader got to `off` on `p`: note what it skipped since the last offset."""
            expected = positions.get(p, start[p] if start.get(p) is not None else log_start.get(p))
            if expected is not None and off - expected >= 2:
                skipped.setdefault(p, []).append((expected, off))

        def commit() -> None:
            nonlocal pending, positions, skipped
            if skipped:
                # In the same commit as the rows and positions around them: a crash never
                # leaves a range stored as skipped that was not read back.
                aborted = skipped_reader.read(skipped, cluster, ingested_at)
                for row in aborted:
                    records.add(row)
                summary.extra["aborted_records"] += len(aborted)
                skipped = {}
            quarantine.flush()
            moved = {app_id(cluster, p): o for p, o in positions.items() if start.get(p) != o}
            inserted = records.flush(positions=Positions(writer(cluster), moved, partial=True) if moved else None, metadata={"rebalance_audit.ingest": "kafka"})
            if inserted.num_rows:
                commit_topics.update(_commit_keys(inserted.column("key").to_pylist()))
            start.update(positions)
            positions = {}
            pending = 0

        while True:
            if max_records is not None and summary.seen >= max_records:
                break
            if max_seconds is not None and time.monotonic() - started >= max_seconds:
                break
            if len(done) == len(partitions):
                break
            if consumer.fatal:
                raise IngestError(f"Kafka client error: {consumer.fatal}")
            if time.monotonic() - last_progress > timeout:
                stuck = sorted(set(partitions) - done)
                raise IngestError(
                    f"no data from Kafka at {consumer.bootstrap} for {timeout:g}s and partitions "
                    f"{stuck[:10]} not read to their end"
                    + (" (all brokers down)" if consumer.all_down else "") + consumer.stall_detail(stuck)
                )
            want = 1000 if max_records is None else max(1, min(1000, max_records - summary.seen))
            for msg in consumer.c.consume(num_messages=want, timeout=0.2):
                last_progress = time.monotonic()
                err = msg.error()
                p, off = msg.partition(), msg.offset()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and p is not None:
                        done.add(p)
                        if off is not None and off >= 0:
                            # EOF offset = next offset; with read_committed it can lie past
                            # trailing transaction markers and aborted records.
                            if start.get(p) is None or off > start[p]:
                                skip_to(p, off)
                                positions[p] = max(positions.get(p, -1), off)
                        continue
                    if p is None or p < 0 or off is None or off < 0:
                        if err.fatal():
                            raise IngestError(f"Kafka client error: {_mask(err.str(), consumer.secrets)}")
                        continue  # connection-level: librdkafka retries; the stall timer bounds it
                    summary.quarantined_seen += 1
                    quarantine.add(
                        quarantine_row(
                            cluster, "kafka", f"{p}@{off}", _mask(err.str(), consumer.secrets),
                            target_table="offsets_records", partition=p, offset=off,
                        )
                    )
                    positions[p] = off + 1
                    continue
                assert p is not None and off is not None  # a record always has both
                summary.seen += 1
                pending += 1
                skip_to(p, off)
                records.add(_row(msg, cluster, ingested_at))
                positions[p] = off + 1
                if p in targets and positions[p] >= targets[p]:
                    done.add(p)
            if pending >= commit_every:
                commit()
                if progress:
                    progress(summary)
        commit()
        summary.extra["partitions"] = len(partitions)
        summary.extra["caught_up"] = len(done) == len(partitions)
        summary.extra["positions"] = {p: start.get(p) for p in partitions}
        if sample_end_offsets:
            # Stop fetching first: a pending long-poll fetch holds the broker connection and
            # would delay every watermark request behind it by fetch.wait.max.ms.
            consumer.c.unassign()
            _sample_end_offsets(lake, consumer, cluster, commit_topics, summary, timeout)
        _sample_topic_ids(lake, config, cluster, summary, timeout, consumer.secrets)
        _report_open_transactions(config, partitions, summary, timeout)
        identity.register(lake, cluster, found)
    finally:
        skipped_reader.close()
        consumer.close()
    return summary


def _live_identity(config: Mapping[str, object], consumer: _Consumer, summary: Summary,
                   timeout: float) -> dict[identity.Identity, str]:
    """The cluster id the brokers answer DescribeCluster with and `__consumer_offsets`'
    topic id: the same values as the log dirs' meta.properties and partition.metadata,
    so live and offline loads of one cluster are recognized as one. A broker that will not
    say (an old version, an ACL) costs the check, not the ingestion: it is reported."""
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    from pipelines.ingest.topic_metadata import NO_ID, kafka_uuid_text

    admin = AdminClient(_admin_config(config))
    source = f"live {consumer.bootstrap}"
    found: dict[identity.Identity, str] = {}
    try:
        cluster_id = admin.describe_cluster(request_timeout=min(timeout, 10.0)).result().cluster_id
        if cluster_id:
            found[identity.Identity("kafka_cluster_id", cluster_id)] = source
        described = admin.describe_topics(TopicCollection([TOPIC]), request_timeout=min(timeout, 10.0))[TOPIC].result()
        topic_id = kafka_uuid_text(described.topic_id)
        if topic_id != NO_ID:
            found[identity.Identity("offsets_topic_id", topic_id)] = source
    except KafkaException as exc:
        summary.extra["identity_failed"] = _mask(str(exc.args[0] if exc.args else exc), consumer.secrets)
    return found


def _admin_config(config: Mapping[str, object]) -> dict:
    """The user's properties (security, ...) without the consumer-only ones ingestion adds;
    librdkafka's own lines go to `CLIENT_LOG`."""
    admin_config = {k: v for k, v in config.items() if k not in FORCED and k not in DEFAULTS}
    admin_config["logger"] = CLIENT_LOG
    return admin_config


def _report_open_transactions(config: Mapping[str, object], partitions: list[int], summary: Summary,
                              timeout: float) -> None:
    """Partitions whose last stable offset is held below their log end by an open
    transaction, now: `summary.extra["held_by_open_transactions"]` = {partition: (last
    stable offset, log end)}. A read_committed reader stops there until the transaction
    commits or aborts; one that never does (a hanging transaction) would otherwise hold
    ingestion back silently, run after run."""
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient(_admin_config(config))
    ends: dict[IsolationLevel, dict[int, int]] = {}
    try:
        for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
            futures = admin.list_offsets({TopicPartition(TOPIC, p): OffsetSpec.latest() for p in partitions},
                                         isolation_level=level, request_timeout=min(timeout, 10.0))
            ends[level] = {tp.partition: f.result().offset for tp, f in futures.items()}
    except KafkaException as exc:
        summary.extra["open_transactions_failed"] = str(exc.args[0] if exc.args else exc)
        return
    stable, end = ends[IsolationLevel.READ_COMMITTED], ends[IsolationLevel.READ_UNCOMMITTED]
    summary.extra["held_by_open_transactions"] = {
        p: (stable[p], end[p]) for p in sorted(stable) if p in end and end[p] > stable[p]}


def _sample_topic_ids(lake, config: Mapping[str, object], cluster: str, summary: Summary, timeout: float,
                      secrets: list[str]) -> None:
    """Topic ids and names (bronze `topic_metadata`): KIP-848 records name topics by id only.
    A failure here loses no record and is reported; the next run samples again."""
    from confluent_kafka import KafkaException

    from pipelines.ingest.topic_metadata import sample_topic_ids

    try:
        summary.extra["topic_ids_sampled"] = sample_topic_ids(lake, _admin_config(config), cluster, timeout)
    except KafkaException as exc:
        summary.extra["topic_ids_failed"] = _mask(str(exc.args[0] if exc.args else exc), secrets)


def _sample_end_offsets(lake, consumer: _Consumer, cluster: str, found: set[tuple[str, int]], summary: Summary, timeout: float) -> None:
    """Log-end offsets of the partitions groups commit on: those in this run's commit
    keys plus those sampled before (a group that did not commit this run still has lag)."""
    import pyarrow.dataset as ds
    from confluent_kafka import KafkaException, TopicPartition

    targets = set(found)
    if lake.exists(PARTITION_END_OFFSETS.name):
        seen = lake.read_arrow(PARTITION_END_OFFSETS.name, columns=["topic", "partition"], filter=ds.field("cluster") == cluster)
        targets.update(zip(seen.column("topic").to_pylist(), seen.column("partition").to_pylist()))
    writer = BufferedWriter(lake, PARTITION_END_OFFSETS, Summary())
    deadline = time.monotonic() + timeout
    failed = 0
    for topic, partition in sorted(targets):
        left = deadline - time.monotonic()
        if left <= 0:
            failed += 1
            continue
        try:
            low, high = consumer.c.get_watermark_offsets(TopicPartition(topic, partition), timeout=min(left, 10.0), cached=False)
        except KafkaException:
            failed += 1  # a deleted topic, or the partition's leader unreachable right now
            continue
        writer.add({"cluster": cluster, "topic": topic, "partition": partition, "start_offset": low, "end_offset": high, "sampled_at": now_utc()})
    sampled = len(writer)
    writer.flush()
    summary.extra["end_offsets_sampled"] = sampled
    summary.extra["end_offsets_failed"] = failed
