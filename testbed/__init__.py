"""Testbed: a real Apache Kafka 4.x cluster (KRaft) on loopback and scripted consumer-group
scenarios with ground truth.

Engine code shared by the live tests and the demo (no pytest here):

* ``kafka_home``: the pinned Kafka JARs (fetched by scripts/setup-kafka.sh) and
  ``java_command`` to run any Kafka class from them (brokers, Kafka's own tools).
* ``broker.KafkaCluster``: one combined KRaft node, or several, their data and log dirs.
* ``scenario``: real librdkafka consumers, one OS process each, driven by a script of
  steps, each writing its ground truth as JSON lines.
* ``connect.ConnectWorkers``: Kafka Connect distributed workers, a non-consumer group.
* ``offsets_topic.read_offsets_topic``: every raw record of ``__consumer_offsets``.
"""
from .broker import BrokerError, KafkaCluster, KafkaNode
from .kafka_home import TestbedUnavailable, find_java, find_kafka_libs, java_command, kafka_version
from .offsets_topic import OffsetsTopicRecord, read_offsets_topic

__all__ = [
    "BrokerError", "KafkaCluster", "KafkaNode", "TestbedUnavailable", "find_java", "find_kafka_libs",
    "java_command", "kafka_version", "OffsetsTopicRecord", "read_offsets_topic",
]
