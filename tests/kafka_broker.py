"""pytest fixture: one real Kafka 0.9.0.1 broker (with ZooKeeper) for the test session.

Use it from any test module:

    from tests.kafka_broker import kafka_broker  # noqa: F401  (pytest fixture)

    @pytest.mark.broker
    def test_something(kafka_broker):
        conf = kafka_broker.client_config(**{"group.id": "my-test-group"})
        ...

``kafka_broker`` is a started ``pipelines.testbed.KafkaBroker``: ``bootstrap_servers``,
``client_config()`` (with the librdkafka settings a 0.9 broker needs), ``data_dir``
(the ``__consumer_offsets-N`` folders), ``server_log``, ``ensure_topic()``.

The broker is shared by every module that imports the fixture and stopped once at
the end of the session (each importing module gets its own pytest fixture
definition; the reference count below keeps them on one broker). Use a group id
and topic names of your own so tests do not see each other's groups. Its working
folder stays under pytest's basetemp (the last few runs are kept) for post-mortems.

Skipped only when Java is missing; if Kafka itself is not installed the fixture runs
scripts/setup-kafka.sh (npm) first, and fails if that fails.
"""
from __future__ import annotations

import threading
from typing import Iterator

import pytest

from pipelines.testbed import KafkaBroker, TestbedUnavailable, find_java

_lock = threading.Lock()
_shared: KafkaBroker | None = None
_users = 0


def _acquire(tmp_path_factory: pytest.TempPathFactory) -> KafkaBroker:
    global _shared, _users
    with _lock:
        if _shared is None:
            broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker"), install=True)
            broker.start()
            _shared = broker
        _users += 1
        return _shared


def _release() -> None:
    global _shared, _users
    with _lock:
        _users -= 1
        if _users == 0 and _shared is not None:
            broker, _shared = _shared, None
            broker.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    try:
        find_java()
    except TestbedUnavailable as exc:
        pytest.skip(f"no real Kafka broker: {exc}")
    broker = _acquire(tmp_path_factory)
    try:
        yield broker
    finally:
        _release()
