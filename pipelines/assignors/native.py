"""The assignors' compiled cores (native/src/assignors.rs, uniform.rs, sticky.rs), or None where absent.

They live in the project's one Rust library, pipelines/segments/_native (built by
scripts/setup-native.sh; the decode core shares it). Without a Rust toolchain, with a library
built before these functions existed, or with REBALANCE_AUDIT_NO_NATIVE=1, every caller runs
its pure-Python path, which gives the same result (tests/test_assignors_vectors.py holds the two
paths equal). The cores also answer None for input they do not handle; callers then fall back.
Callers look the functions up on this module at call time, so tests can switch them off.
"""
from __future__ import annotations

from typing import Any, Callable

from pipelines import native

_lib: Any = native.lib

java_string_hashes: Callable[[list[str]], list[int] | None] | None = getattr(_lib, "java_string_hashes", None)
"""`String.hashCode()` of each string; None if one holds a lone surrogate."""

java_string_hashmap_order: Callable[[list[str], int], list[str] | None] | None = getattr(
    _lib, "java_string_hashmap_order", None)
"""`(keys, capacity) -> keys in HashMap<String, ?> iteration order`; None if one holds a lone surrogate."""

server_range_assign: Callable[..., dict | None] | None = getattr(_lib, "server_range_assign", None)
"""`(member_ids, instance_ids, member_topics, topics) -> {member_id: [(topic, p), ...]} | None`:
the whole server-side range assignment (range_server.py)."""

sticky_user_data: Callable[[bytes], tuple[list, int | None] | None] | None = getattr(_lib, "sticky_user_data", None)
"""The well-formed case of `StickyAssignor` user data (sticky.py `decode_sticky_user_data`)."""

uniform_assign: Callable[..., dict | None] | None = getattr(_lib, "uniform_assign", None)
"""`(member_ids, subscriptions, targets, counts, topic_hashes, homogeneous) -> {member_id: [(topic, p)]} | None`:
Kafka 3.9 `UniformAssignor` (uniform.py `assign_uniform_39`); None where 3.9 throws."""

sticky_general_assign: Callable[..., dict | None] | None = getattr(_lib, "sticky_general_assign", None)
"""The client sticky general builder without rack-aware assignment (sticky.py `_General`)."""
