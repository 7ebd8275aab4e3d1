"""Client `roundrobin` (org.apache.kafka.clients.consumer.RoundRobinAssignor, Kafka 3.9).

All partitions of all subscribed topics, topics in lexicographic order, are dealt one by one to a
circular list of members sorted like `range` (static first by instance id, then member id); members
not subscribed to a partition's topic are skipped. No racks, no stickiness.
"""
from __future__ import annotations

from itertools import chain, repeat

from .common import existing_partition_counts, members_in_order, sort_members
from .javahash import java_str_key
from .model import Problem, TopicPartition


def assign_roundrobin(problem: Problem) -> dict[str, list[TopicPartition]]:
    in_order = members_in_order(problem)
    out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in in_order}
    members = sort_members(in_order)
    all_topics = sorted({t for m in members for t in m.topics}, key=java_str_key)
    counts = existing_partition_counts(problem, all_topics)
    ids = [m.member_id for m in members]
    k = len(members)
    first = members[0].topics if members else []
    if all(m.topics == first for m in members):
        # Everybody subscribes every topic: partition j of the whole sequence goes to member j % K,
        # i.e. each member takes every K-th one (one C-level slice per member).
        partitions = list(chain.from_iterable(zip(repeat(t), range(n)) for t, n in counts.items()))
        for i, mid in enumerate(ids):
            out[mid] = partitions[i::k]
        return out
    subs = [set(m.topics) for m in members]
    pos = 0
    for t, n in counts.items():
        for p in range(n):
            # A subscriber exists (the topic came from some subscription), so this terminates.
            while t not in subs[pos]:
                pos = (pos + 1) % k
            out[ids[pos]].append((t, p))
            pos = (pos + 1) % k
    return out
