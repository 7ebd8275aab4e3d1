"""Client `range` (org.apache.kafka.clients.consumer.RangeAssignor, Kafka 3.9), incl. KIP-881 racks.

Per topic, subscribed members are sorted (static members first by group.instance.id, then by member
id) and take contiguous ranges; the first `P % C` take one extra. When some consumer rack matches
partition replica racks and not every partition lives on every rack, a rack-matching pre-pass runs
first (co-partitioned topics - same subscribers, same partition count - partition by partition,
other topics by ranges restricted to rack-matching partitions); the rest is assigned normally and
every list is then sorted by (topic, partition).
"""
from __future__ import annotations

from itertools import chain, repeat

from .common import (existing_partition_counts, members_in_order, partition_rack_sets, subscribers_by_topic,
                     use_rack_aware)
from .javahash import java_str_key, string_hashmap_order
from .model import Problem, TopicPartition


class _TopicState:
    __slots__ = ("topic", "consumers", "racks", "needs_rack", "unassigned", "assigned", "base", "extra",
                 "_consumer_racks")

    def __init__(self, topic: str, n: int, consumers: list[str], consumer_racks: dict[str, str], problem: Problem):
        self.topic = topic
        self.consumers = consumers  # in MemberInfo order
        self.unassigned = dict.fromkeys(range(n))  # ordered set of partition numbers
        self.assigned = dict.fromkeys(self.consumers, 0)
        c = len(self.consumers)
        self.base = n // c if c else 0
        self.extra = n % c if c else 0
        all_consumer_racks = {consumer_racks[x] for x in self.consumers if x in consumer_racks}
        self.racks: list[frozenset[str]] | None
        if all_consumer_racks:
            self.racks = partition_rack_sets(problem, topic, n)
        else:
            self.racks = None  # Java: Collections.emptyMap()
        all_partition_racks: set[str] = set()
        for r in self.racks or ():
            all_partition_racks |= r
        self.needs_rack = use_rack_aware(all_consumer_racks, all_partition_racks, self.racks or ())
        self._consumer_racks = {x: consumer_racks.get(x) for x in self.consumers}

    def racks_match(self, consumer: str, p: int) -> bool:
        rack = self._consumer_racks[consumer]
        if rack is None:
            return True
        return self.racks is not None and p < len(self.racks) and rack in self.racks[p]

    def max_assignable(self, consumer: str) -> int:
        return max(0, self.base + (1 if self.extra > 0 else 0) - self.assigned[consumer])

    def on_assigned(self, consumer: str, parts: list[int]) -> None:
        self.assigned[consumer] += len(parts)
        if self.assigned[consumer] > self.base:
            self.extra -= 1
        for p in parts:
            self.unassigned.pop(p, None)


def _assign_ranges(state: _TopicState, may_assign, out: dict[str, list[TopicPartition]]) -> None:
    for consumer in state.consumers:
        if not state.unassigned:
            break
        limit = state.max_assignable(consumer)
        parts = []
        if limit > 0:
            for p in state.unassigned:
                if may_assign is None or may_assign(consumer, p):
                    parts.append(p)
                    if len(parts) >= limit:
                        break
        if not parts:
            continue
        out[consumer].extend((state.topic, p) for p in parts)
        state.on_assigned(consumer, parts)


def _assign_co_partitioned(consumers: list[str], n: int, states: list[_TopicState], out) -> None:
    remaining = list(consumers)
    for p in range(n):
        match = None
        for c in remaining:
            if all(t.racks_match(c, p) and t.max_assignable(c) > 0 for t in states):
                match = c
                break
        if match is None:
            continue
        for t in states:
            out[match].append((t.topic, p))
            t.on_assigned(match, [p])
        if not any(t.max_assignable(match) > 0 for t in states):
            remaining.remove(match)
            if not remaining:
                break


def assign_range(problem: Problem) -> dict[str, list[TopicPartition]]:
    members = members_in_order(problem)
    out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
    subscribed = dict.fromkeys(chain.from_iterable(m.topics for m in members))
    counts = existing_partition_counts(problem, subscribed)
    # partitionsPerTopic is a HashMap<String, ...>: its order only decides the topic order inside
    # each member's list, never which partitions a member gets.
    topic_order = string_hashmap_order(list(counts))
    consumers = subscribers_by_topic(members, counts)
    consumer_racks = {m.member_id: m.rack for m in members if m.rack}
    if consumer_racks:  # KIP-881 only applies when some consumer has a rack
        states = [_TopicState(t, counts[t], consumers[t], consumer_racks, problem) for t in topic_order]
        if any(s.needs_rack for s in states):
            return _assign_rack_aware(states, out)
    for t in topic_order:
        _assign_contiguous(t, counts[t], consumers[t], out)
    return out


def _assign_contiguous(topic: str, n: int, consumers: list[str], out: dict[str, list[TopicPartition]]) -> None:
    """The plain range assignment of one topic (what `_assign_ranges` does when no rack pass ran):
    consumer i takes the next `n // c` partitions, one more while i < n % c."""
    base, extra = divmod(n, len(consumers))
    partitions = list(zip(repeat(topic), range(n)))  # built once (a C loop), handed out in slices
    start = 0
    for i, c in enumerate(consumers):
        end = start + base + (i < extra)
        out[c] += partitions[start:end]
        start = end


def _assign_rack_aware(states: list[_TopicState], out: dict[str, list[TopicPartition]]) -> dict[str, list[TopicPartition]]:
    groups: dict[tuple, list[_TopicState]] = {}
    for s in states:
        groups.setdefault(tuple(s.consumers), []).append(s)
    for consumers, group in groups.items():
        by_n: dict[int, list[_TopicState]] = {}
        for s in group:
            by_n.setdefault(len(s.racks) if s.racks is not None else 0, []).append(s)
        for n, co in by_n.items():
            if len(co) > 1:
                _assign_co_partitioned(list(consumers), n, co, out)
            elif co[0].needs_rack:
                _assign_ranges(co[0], co[0].racks_match, out)
    for s in states:
        _assign_ranges(s, None, out)
    for lst in out.values():
        lst.sort(key=lambda tp: (java_str_key(tp[0]), tp[1]))
    return out
