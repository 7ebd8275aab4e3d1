"""Per-generation metrics of an assignment (what the what-if replay reports per generation).

Owner identity follows the vectors' rule: `instance:<group.instance.id>` for static members,
`member:<member_id>` otherwise, so a restarted static member keeping its partitions is not a move.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping

from .model import Problem, TopicPartition


@dataclass(frozen=True)
class GenerationMetrics:
    num_members: int
    assigned_partitions: int
    moved: int
    """Partitions owned by X before and by Y != X now."""
    moved_from_surviving_owner: int
    revoked: int
    """Partitions members had to give up before this generation: eager = everything they owned,
    cooperative = only what they own and no longer get."""
    newly_assigned: int
    max_per_member: int
    min_per_member: int
    balance: int
    """max - min partitions per member, members without partitions counting 0."""
    idle_members: int

    def as_dict(self) -> dict:
        return asdict(self)


def owner_key(member_id: str, instance_id: str | None) -> str:
    return f"instance:{instance_id}" if instance_id is not None else f"member:{member_id}"


def generation_metrics(problem: Problem, assignment: Mapping[str, list[TopicPartition]],
                       previous: Mapping[str, list[TopicPartition]] | None = None,
                       previous_instances: Mapping[str, str | None] | None = None,
                       cooperative: bool = False) -> GenerationMetrics:
    """Metrics of `assignment` (for `problem`'s members) against the previous generation.

    `previous` is the previous generation's assignment (member id -> partitions) and
    `previous_instances` those members' group.instance.ids (None/absent = dynamic).
    """
    previous = previous or {}
    previous_instances = previous_instances or {}
    inst = {m.member_id: m.instance_id for m in problem.members}
    before: dict[TopicPartition, str] = {}
    for mid, parts in previous.items():
        k = owner_key(mid, previous_instances.get(mid))
        for tp in parts:
            before[tp] = k
    now: dict[TopicPartition, str] = {}
    sizes = []
    for m in problem.members:
        parts = assignment.get(m.member_id, [])
        sizes.append(len(parts))
        k = owner_key(m.member_id, m.instance_id)
        for tp in parts:
            now[tp] = k
    surviving = {owner_key(mid, i) for mid, i in inst.items()}
    moved = sum(1 for tp, k in now.items() if tp in before and before[tp] != k)
    moved_surv = sum(1 for tp, k in now.items() if tp in before and before[tp] != k and before[tp] in surviving)
    newly = sum(1 for tp in now if tp not in before)
    if cooperative:
        revoked = sum(1 for tp, k in before.items() if k in surviving and now.get(tp) != k)
    else:
        revoked = sum(1 for tp, k in before.items() if k in surviving)
    return GenerationMetrics(
        num_members=len(problem.members),
        assigned_partitions=sum(sizes),
        moved=moved,
        moved_from_surviving_owner=moved_surv,
        revoked=revoked,
        newly_assigned=newly,
        max_per_member=max(sizes, default=0),
        min_per_member=min(sizes, default=0),
        balance=(max(sizes) - min(sizes)) if sizes else 0,
        idle_members=sum(1 for s in sizes if s == 0),
    )
