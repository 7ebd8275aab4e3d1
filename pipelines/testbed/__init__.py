"""Testbed: a real Kafka 0.9.0.1 broker on loopback and scripted consumer-group scenarios.

Engine code shared by the live tests and the demo (no pytest here):

* ``broker.KafkaBroker``: ZooKeeper + broker processes, their data and log dirs.
* ``scenario``: real librdkafka consumers, one OS process each, driven by a script of
  steps, each writing its ground truth as JSON lines.
* ``offsets_topic.read_offsets_topic``: every raw record of ``__consumer_offsets``.
"""
from .broker import CLIENT_PROPERTIES, BrokerError, KafkaBroker, offsets_partition_for
from .kafka_home import TestbedUnavailable, find_java, find_kafka_home
from .offsets_topic import OffsetsTopicRecord, read_offsets_topic

__all__ = [
    "CLIENT_PROPERTIES", "BrokerError", "KafkaBroker", "TestbedUnavailable",
    "find_java", "find_kafka_home", "offsets_partition_for", "OffsetsTopicRecord", "read_offsets_topic",
]
