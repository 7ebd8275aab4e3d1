"""Server-side `range` (org.apache.kafka.coordinator.group.assignor.RangeAssignor, Kafka 3.9, KIP-848).

A pure function of members and topics (the 3.9 rewrite, KAFKA-16944, dropped the stickiness of
3.7/3.8): per subscribed, existing topic the subscribers are sorted (instance id first, then member
id) and take contiguous ranges, the first `P % C` one extra. Racks are not used.
"""
from __future__ import annotations

from .common import member_iteration_order, member_sort_key
from .model import Problem, TopicPartition


def assign_server_range(problem: Problem) -> dict[str, list[TopicPartition]]:
    order = member_iteration_order(problem)
    members = [problem.member(mid) for mid in order]
    out: dict[str, list[TopicPartition]] = {mid: [] for mid in order}
    subscribers: dict[str, list] = {}
    for m in members:
        for t in dict.fromkeys(m.topics):
            if problem.topics.get(t) is not None:
                subscribers.setdefault(t, []).append(m)
    for t, subs in subscribers.items():
        n = problem.topics[t]
        subs = sorted(subs, key=member_sort_key)
        c = len(subs)
        base, extra = divmod(n, c)
        start = 0
        for i, m in enumerate(subs):
            size = base + (1 if i < extra else 0)
            out[m.member_id].extend((t, p) for p in range(start, start + size))
            start += size
    return out
