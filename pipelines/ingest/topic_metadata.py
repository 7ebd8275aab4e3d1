"""Live ingestion's sample of the cluster's topic ids and names (bronze `topic_metadata`).

KIP-848 records name a group's partitions by topic id. Kafka 3.x wrote the id -> name
mapping into `__consumer_offsets` (record type 4); from 4.1 the coordinator writes none and
tombstones the old ones, so only the cluster's metadata knows the names. Each live run
describes the topics it has not stored yet (ids never change, a recreated topic gets a new
one), so a steady cluster costs one metadata request per run.
"""
from __future__ import annotations

import base64

import pyarrow.dataset as ds

from pipelines.ingest.bronze import BufferedWriter, Summary, now_utc
from pipelines.ingest.schemas import TOPIC_METADATA

# A zero topic id: a broker without topic ids (before 2.8) or a topic it has not named yet.
NO_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID: no id


def kafka_uuid_text(uuid) -> str:
    """A confluent-kafka ``Uuid`` as Kafka prints and stores it: URL-safe base64 without
    padding (``str()`` of the Python object uses the standard alphabet, '+' and '/')."""
    raw = (uuid.get_most_significant_bits().to_bytes(8, "big", signed=True)
           + uuid.get_least_significant_bits().to_bytes(8, "big", signed=True))
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def sample_topic_ids(lake, client_config: dict, cluster: str, timeout: float) -> int:
    """Store the id, name and partition count of every topic not stored yet; returns how
    many were new. Internal topics are skipped: no consumer group is assigned them."""
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config)
    names = sorted(t for t in admin.list_topics(timeout=timeout).topics if not t.startswith("__"))
    known: set[str] = set()
    if lake.exists(TOPIC_METADATA.name):
        stored = lake.read_arrow(TOPIC_METADATA.name, columns=["topic"], filter=ds.field("cluster") == cluster)
        known = set(stored.column("topic").to_pylist())
    wanted = [n for n in names if n not in known]
    if not wanted:
        return 0
    writer = BufferedWriter(lake, TOPIC_METADATA, Summary())
    for name, future in admin.describe_topics(TopicCollection(wanted), request_timeout=timeout).items():
        try:
            described = future.result()
        except KafkaException:
            continue  # deleted since it was listed
        topic_id = kafka_uuid_text(described.topic_id)
        if topic_id == NO_ID:
            continue
        writer.add({"cluster": cluster, "topic_id": topic_id, "topic": name,
                    "num_partitions": len(described.partitions), "sampled_at": now_utc()})
    return writer.flush().num_rows
