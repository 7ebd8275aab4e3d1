"""Server-side `range` (org.apache.kafka.coordinator.group.assignor.RangeAssignor, Kafka 3.9, KIP-848).

A pure function of members and topics (the 3.9 rewrite, KAFKA-16944, dropped the stickiness of
3.7/3.8): per subscribed, existing topic the subscribers are sorted (instance id first, then member
id) and take contiguous ranges, the first `P % C` one extra. Racks are not used.
"""
from __future__ import annotations

from itertools import repeat
from operator import attrgetter

from . import native
from .common import members_in_order, subscribers_by_topic
from .model import MemberSpec, Problem, TopicPartition


_MEMBER_ID, _INSTANCE_ID, _TOPICS = attrgetter("member_id"), attrgetter("instance_id"), attrgetter("topics")


def assign_server_range(problem: Problem) -> dict[str, list[TopicPartition]]:
    members = members_in_order(problem)
    core = native.server_range_assign
    if core is not None:
        # Java takes ~14 µs per medium group; even the leanest Python loop over (topic, member)
        # slices takes three times that, so the compiled core does all of it.
        out = core(list(map(_MEMBER_ID, members)), list(map(_INSTANCE_ID, members)), list(map(_TOPICS, members)),
                   problem.topics)
        if out is not None:
            return out
    return assign_server_range_python(members, problem.topics)


def assign_server_range_python(members: list[MemberSpec], topics: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """The pure-Python path (no compiled core, or input it does not handle)."""
    out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
    for t, subs in subscribers_by_topic(members, topics).items():
        n = topics[t]
        base, extra = divmod(n, len(subs))
        # The topic's partitions built once (a C loop); each member takes a slice of them.
        partitions = list(zip(repeat(t), range(n)))
        start = 0
        for i, mid in enumerate(subs):
            end = start + base + (i < extra)
            out[mid] += partitions[start:end]
            start = end
    return out
