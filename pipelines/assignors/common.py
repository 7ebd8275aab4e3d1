"""Helpers shared by the assignor implementations."""
from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable, Mapping

from .javahash import JavaHashSet, java_str_key, string_hashmap_order
from .model import MemberSpec, Problem, TopicPartition


def member_iteration_order(problem: Problem) -> list[str]:
    """Order of the member map handed to the assignor.

    Uses the recorded order when the problem carries one (`member_iteration_order`); otherwise the
    order of a default-capacity `java.util.HashMap<String, ?>` filled in member list order, which is
    how both the classic leader (`ConsumerCoordinator.onLeaderElected`) and the 3.9 coordinator
    (`TargetAssignmentBuilder`) build it.
    """
    if problem.member_order is not None:
        return list(problem.member_order)
    return string_hashmap_order([m.member_id for m in problem.members])


def members_in_order(problem: Problem) -> list[MemberSpec]:
    """The problem's members in `member_iteration_order`."""
    return list(map(problem.member_map.__getitem__, member_iteration_order(problem)))


def member_sort_key(m: MemberSpec):
    """`AbstractPartitionAssignor.MemberInfo.compareTo`: static members first by instance id, then member id."""
    if m.instance_id is not None:
        return (0, java_str_key(m.instance_id))
    return (1, java_str_key(m.member_id))


def sort_members(members: list[MemberSpec]) -> list[MemberSpec]:
    """`sorted(members, key=member_sort_key)`, without a Python-level key call per member.

    Static members first by instance id, then the others by member id; for ASCII ids Python's
    string order is Java's `String.compareTo`, so the ids themselves are the keys (hot in every
    per-call sort of the range assignors)."""
    if len(members) < 8:
        return sorted(members, key=member_sort_key)  # a few key calls cost less than the setup below
    static = [m for m in members if m.instance_id is not None]
    dynamic = [m for m in members if m.instance_id is None]
    ascii_ids = "".join(m.member_id for m in dynamic).isascii() and "".join(
        m.instance_id for m in static if m.instance_id is not None).isascii()
    if ascii_ids:
        static.sort(key=_INSTANCE_ID)
        dynamic.sort(key=_MEMBER_ID)
        return static + dynamic
    return sorted(members, key=member_sort_key)


_INSTANCE_ID = attrgetter("instance_id")
_MEMBER_ID = attrgetter("member_id")


def subscribers_by_topic(members: list[MemberSpec], topics: Mapping[str, int]) -> dict[str, list[str]]:
    """Topics of `topics` that someone subscribes -> subscriber ids in MemberInfo order (a topic
    listed twice by a member counts once).

    Topics come in the order the members (in map order) list them. One sort of every member
    serves all topics: a subset of a sorted list is sorted (the keys are unique)."""
    ranked = sort_members(members)
    first = members[0].topics if members else []
    if all(m.topics == first for m in members):
        # Identical subscriptions (the common case): every topic has every member.
        ids = [m.member_id for m in ranked]
        return {t: ids for t in first if t in topics}
    subscribers: dict[str, list[str]] = {t: [] for m in members for t in m.topics if t in topics}
    for m in ranked:
        mid = m.member_id
        for t in m.topics:
            lst = subscribers.get(t)
            if lst is not None and (not lst or lst[-1] != mid):
                lst.append(mid)
    return subscribers


def existing_partition_counts(problem: Problem, topics) -> dict[str, int]:
    """Subscribed topics that exist with at least one partition (the client's `partitionsPerTopic`)."""
    out = {}
    for t in topics:
        n = problem.topics.get(t)
        if n:
            out[t] = n
    return out


def partition_rack_sets(problem: Problem, topic: str, n: int) -> list[frozenset[str]]:
    """Replica racks of each partition (empty sets when brokers have no racks)."""
    racks = (problem.partition_racks or {}).get(topic)
    if racks is None:
        return [frozenset()] * n
    if len(racks) < n:
        # Metadata shorter than the partition count: the missing partitions have no rack information.
        return list(racks) + [frozenset()] * (n - len(racks))
    return racks[:n]


def use_rack_aware(consumer_racks: set[str], partition_racks: set[str], racks_per_partition) -> bool:
    """`AbstractPartitionAssignor.useRackAwareAssignment` (preferRackAwareLogic = false, the default)."""
    if not consumer_racks or consumer_racks.isdisjoint(partition_racks):
        return False
    return not all(r == partition_racks for r in racks_per_partition)


class PartitionMovements:
    """Kafka's `PartitionMovements` of the sticky builders (the client `AbstractStickyAssignor`
    and 3.9's `UniformHeterogeneousAssignmentBuilder`): each moved partition's (first owner,
    current owner), and per topic the partitions moved between each pair of owners, in Java
    `HashSet` order: which partition a later move takes back depends on it."""

    def __init__(self, partition_hash: Callable[[Any], int]):  # of a TopicPartition
        self.by_partition: dict[TopicPartition, tuple[str, str]] = {}
        self.by_topic: dict[str, dict[tuple[str, str], JavaHashSet]] = {}
        self._hash = partition_hash

    def remove(self, tp: TopicPartition) -> tuple[str, str]:
        """Forget `tp`'s movement; returns its (first owner, current owner)."""
        pair = self.by_partition.pop(tp)
        by_topic = self.by_topic[tp[0]]
        by_topic[pair].discard(tp)
        if not by_topic[pair]:
            del by_topic[pair]
        if not by_topic:
            del self.by_topic[tp[0]]
        return pair

    def add(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.by_partition[tp] = pair
        by_topic = self.by_topic.setdefault(tp[0], {})
        moved = by_topic.get(pair)
        if moved is None:
            moved = by_topic[pair] = JavaHashSet(self._hash)
        moved.add(tp)
