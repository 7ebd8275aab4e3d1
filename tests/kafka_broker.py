"""pytest fixture: one real Kafka 4.x broker (a KRaft combined node) for the test session.

Use it from any test module:

    from tests.kafka_broker import kafka_broker  # noqa: F401  (pytest fixture)

    @pytest.mark.broker
    def test_something(kafka_broker):
        conf = kafka_broker.client_config(**{"group.id": "my-test-group"})
        ...

``kafka_broker`` is a started one-broker ``testbed.KafkaCluster``:
``bootstrap_servers``, ``client_config()``, ``data_dirs`` (the ``__consumer_offsets-N``
folders), ``server_logs``, ``ensure_topic()``.

The broker is shared by every module that imports the fixture and stopped once at the end
of the session (each importing module gets its own pytest fixture definition; the reference
count below keeps them on one broker). Use a group id and topic names of your own so tests
do not see each other's groups. Its working folder stays under pytest's basetemp (the last
few runs are kept) for post-mortems.

Skipped only when Java is missing; if the Kafka JARs are not fetched yet the fixture runs
scripts/setup-kafka.sh (Maven) first, and fails if that fails.
"""
from __future__ import annotations

import threading
from typing import Iterator

import pytest

from testbed import KafkaCluster, TestbedUnavailable, find_java

_lock = threading.Lock()
_shared: KafkaCluster | None = None
_users = 0


def _acquire(tmp_path_factory: pytest.TempPathFactory) -> KafkaCluster:
    global _shared, _users
    with _lock:
        if _shared is None:
            cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-broker"), install=True)
            cluster.start()
            _shared = cluster
        _users += 1
        return _shared


def _release() -> None:
    global _shared, _users
    with _lock:
        _users -= 1
        if _users == 0 and _shared is not None:
            cluster, _shared = _shared, None
            cluster.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    try:
        find_java()
    except TestbedUnavailable as exc:
        pytest.skip(f"no real Kafka broker: {exc}")
    cluster = _acquire(tmp_path_factory)
    try:
        yield cluster
    finally:
        _release()
