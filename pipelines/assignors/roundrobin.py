"""Client `roundrobin` (org.apache.kafka.clients.consumer.RoundRobinAssignor, Kafka 3.9).

All partitions of all subscribed topics, topics in lexicographic order, are dealt one by one to a
circular list of members sorted like `range` (static first by instance id, then member id); members
not subscribed to a partition's topic are skipped. No racks, no stickiness.
"""
from __future__ import annotations

from .common import existing_partition_counts, member_iteration_order, member_sort_key
from .javahash import java_str_key
from .model import Problem, TopicPartition


def assign_roundrobin(problem: Problem) -> dict[str, list[TopicPartition]]:
    order = member_iteration_order(problem)
    members = sorted((problem.member(mid) for mid in order), key=member_sort_key)
    out: dict[str, list[TopicPartition]] = {mid: [] for mid in order}
    all_topics = sorted({t for m in members for t in m.topics}, key=java_str_key)
    counts = existing_partition_counts(problem, all_topics)
    subs = [set(m.topics) for m in members]
    ids = [m.member_id for m in members]
    k = len(members)
    pos = 0
    for t in all_topics:
        n = counts.get(t)
        if not n:
            continue
        for p in range(n):
            # A subscriber exists (the topic came from some subscription), so this terminates.
            while t not in subs[pos]:
                pos = (pos + 1) % k
            out[ids[pos]].append((t, p))
            pos = (pos + 1) % k
    return out
