"""Server-side `range` (org.apache.kafka.coordinator.group.assignor.RangeAssignor, Kafka 3.9, KIP-848).

A pure function of members and topics (the 3.9 rewrite, KAFKA-16944, dropped the stickiness of
3.7/3.8): per subscribed, existing topic the subscribers are sorted (instance id first, then member
id) and take contiguous ranges, the first `P % C` one extra. Racks are not used.
"""
from __future__ import annotations

from itertools import repeat

from .common import member_iteration_order, member_sort_key
from .model import Problem, TopicPartition


def assign_server_range(problem: Problem) -> dict[str, list[TopicPartition]]:
    order = member_iteration_order(problem)
    members = [problem.member(mid) for mid in order]
    out: dict[str, list[TopicPartition]] = {mid: [] for mid in order}
    topics = problem.topics
    # Topics in the order the coordinator meets them (members in map order, each one's
    # subscriptions); each topic's subscribers in MemberInfo order. One sort of every member
    # serves all topics: a subset of a sorted list is sorted (the keys are unique).
    subscribers: dict[str, list[str]] = {t: [] for m in members for t in m.topics if topics.get(t) is not None}
    for m in sorted(members, key=member_sort_key):
        for t in dict.fromkeys(m.topics):
            if t in subscribers:
                subscribers[t].append(m.member_id)
    for t, subs in subscribers.items():
        base, extra = divmod(topics[t], len(subs))
        start = 0
        for i, mid in enumerate(subs):
            end = start + base + (i < extra)
            out[mid].extend(zip(repeat(t), range(start, end)))
            start = end
    return out
