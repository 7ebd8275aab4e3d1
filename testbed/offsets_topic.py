"""Read every record of ``__consumer_offsets`` back from a live broker, raw.

A plain librdkafka consumer with ``assign()`` on all partitions from the beginning
(no group membership, no commits, so reading leaves no trace in the topic) reads up
to the high watermark each partition had when reading began.

``isolation`` is librdkafka's ``isolation.level``: ``read_committed`` (the default, what a
user's consumer sees: records of aborted transactions left out) or ``read_uncommitted``.
Control records (transaction markers) are never delivered by librdkafka: they show as gaps
in the offsets. Key and value are the exact bytes the coordinator wrote; a tombstone has
``value`` None.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping, cast

from .broker import OFFSETS_TOPIC, librdkafka_log


@dataclass(frozen=True)
class OffsetsTopicRecord:
    partition: int
    offset: int
    timestamp: int | None        # ms since the epoch; None when the message has none
    timestamp_type: str | None   # "create" / "log_append" / None
    key: bytes | None
    value: bytes | None          # None = tombstone


_TS_TYPES = {1: "create", 2: "log_append"}


def read_offsets_topic(bootstrap_servers: str, *, client_properties: Mapping[str, object] | None = None,
                       timeout: float = 30.0, topic: str = OFFSETS_TOPIC,
                       isolation: str = "read_committed") -> list[OffsetsTopicRecord]:
    """All records of ``topic`` (default ``__consumer_offsets``), by partition then offset.

    ``client_properties`` are extra librdkafka properties. Raises TimeoutError if the partitions cannot be read to their high
    watermark within ``timeout`` seconds, and RuntimeError on a consumer error.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    props = {
        **dict(client_properties or {}),
        "isolation.level": isolation,
        "bootstrap.servers": bootstrap_servers,
        # librdkafka requires a group id even for assign(); with no subscribe() and no
        # commits it never joins or writes anything under it.
        "group.id": "rebalance-audit-offsets-reader",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        # End of partition, not the high watermark, says a partition is read: with
        # transactions the last offsets can be control records, never delivered.
        "enable.partition.eof": True,
        "logger": librdkafka_log,
    }
    deadline = time.monotonic() + timeout
    consumer = Consumer(props)
    try:
        md = consumer.list_topics(timeout=timeout)
        if topic not in md.topics or md.topics[topic].error is not None:
            raise RuntimeError(f"topic {topic} is not available: "
                               f"{md.topics[topic].error if topic in md.topics else 'missing'}")
        partitions = sorted(md.topics[topic].partitions)
        ends: dict[int, int] = {}
        for p in partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=max(1.0, deadline - time.monotonic()))
            if high > low:
                ends[p] = high
        records: list[OffsetsTopicRecord] = []
        if not ends:
            return records
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        remaining = dict(ends)
        while remaining:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: partitions {sorted(remaining)} not read to "
                                   f"their end within {timeout:.0f} s")
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        remaining.pop(cast(int, msg.partition()), None)  # an EOF names its partition
                        continue
                    raise RuntimeError(f"reading {topic}: {err}")
                p, off = msg.partition(), msg.offset()
                assert p is not None and off is not None  # set on every delivered message
                ts_type, ts = msg.timestamp()
                records.append(OffsetsTopicRecord(
                    partition=p, offset=off,
                    timestamp=ts if ts_type in _TS_TYPES and ts >= 0 else None,
                    timestamp_type=_TS_TYPES.get(ts_type),
                    key=msg.key(), value=msg.value()))
        records.sort(key=lambda r: (r.partition, r.offset))
        return records
    finally:
        consumer.close()
