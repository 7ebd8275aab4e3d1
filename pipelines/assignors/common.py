"""Helpers shared by the assignor implementations."""
from __future__ import annotations

from .javahash import java_str_key, string_hashmap_order
from .model import MemberSpec, Problem


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


def member_sort_key(m: MemberSpec):
    """`AbstractPartitionAssignor.MemberInfo.compareTo`: static members first by instance id, then member id."""
    if m.instance_id is not None:
        return (0, java_str_key(m.instance_id))
    return (1, java_str_key(m.member_id))


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
