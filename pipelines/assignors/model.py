"""Typed assignment problem: what one rebalance (classic) or one target computation (KIP-848) sees.

`Problem.from_dict` reads the shape of a generation record of the assignor vectors
(`../shared/assignor-vectors/SCHEMA.md`) without its outputs; client-side records (`members[].topics`,
`owned_partitions`, `generation_id`, `user_data_b64`) and server-side ones (`subscribed_topic_names`,
`subscribed_topic_ids_iteration`, `target_assignment_in`, topic ids in `topics`) are both accepted.
Strings come from Kafka (or a user) and are validated, never trusted.
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from .javahash import uuid_from_string


class AssignorError(Exception):
    """The assignor refuses the problem (Kafka would throw), or the problem is malformed."""


TopicPartition = tuple[str, int]
Runs = list  # [[topic, [p, ...]], ...]


@dataclass
class MemberSpec:
    member_id: str
    instance_id: str | None = None
    rack: str | None = None
    topics: list[str] = field(default_factory=list)
    """Subscribed topic names (client: the Subscription list; server: subscribedTopicNames order)."""
    owned: list[TopicPartition] = field(default_factory=list)
    """Client `Subscription.ownedPartitions()` in protocol order (cooperative protocol)."""
    generation: int | None = None
    """Client `Subscription.generationId()`; None = absent (Optional.empty)."""
    user_data: bytes | None = None
    target: list[tuple[str, list[int]]] | None = None
    """Server side: previous target assignment as fed (topic order and per-topic partition order)."""
    topic_ids_iteration: list[str] | None = None
    """Server side: iteration order of the member's subscribed topic ids (as names), if recorded."""


@dataclass
class Problem:
    members: list[MemberSpec]
    topics: dict[str, int]
    """Existing topics (creation order) -> partition count."""
    topic_ids: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Topic name -> Uuid (msb, lsb) where known (server-side hashing)."""
    partition_racks: dict[str, list[frozenset[str]]] | None = None
    member_order: list[str] | None = None
    """Iteration order of the member map handed to the assignor; None = emulate Java HashMap order."""
    subscription_type: str | None = None

    def member(self, member_id: str) -> MemberSpec:
        return self._by_id[member_id]

    @property
    def member_map(self) -> dict[str, MemberSpec]:
        """member_id -> MemberSpec (read-only by convention; lets hot loops index without a call)."""
        return self._by_id

    def __post_init__(self) -> None:
        self._by_id = {m.member_id: m for m in self.members}
        if len(self._by_id) != len(self.members):
            raise AssignorError("duplicate member_id in problem")
        if self.member_order is not None:
            if sorted(self.member_order) != sorted(self._by_id):
                raise AssignorError("member_iteration_order does not list exactly the problem's members")

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Problem":
        return parse_problem(d)


@overload
def _str(v: Any, what: str, nullable: Literal[False] = False) -> str: ...
@overload
def _str(v: Any, what: str, nullable: bool) -> str | None: ...
def _str(v: Any, what: str, nullable: bool = False) -> str | None:
    if v is None and nullable:
        return None
    if not isinstance(v, str):
        raise AssignorError(f"{what} must be a string, got {type(v).__name__}")
    return v


@overload
def _int(v: Any, what: str, nullable: Literal[False] = False) -> int: ...
@overload
def _int(v: Any, what: str, nullable: bool) -> int | None: ...
def _int(v: Any, what: str, nullable: bool = False) -> int | None:
    if v is None and nullable:
        return None
    if not isinstance(v, int) or isinstance(v, bool):
        raise AssignorError(f"{what} must be an integer, got {type(v).__name__}")
    return v


def parse_runs(runs: Any, what: str) -> list[tuple[str, list[int]]]:
    if runs is None:
        return []
    if not isinstance(runs, list):
        raise AssignorError(f"{what} must be a list of [topic, [partitions]] runs")
    out = []
    for run in runs:
        if not (isinstance(run, list) and len(run) == 2 and isinstance(run[1], list)):
            raise AssignorError(f"{what}: bad run {run!r:.80}")
        topic = _str(run[0], f"{what} topic")
        parts = [_int(p, f"{what} partition") for p in run[1]]
        out.append((topic, parts))
    return out


def runs_to_list(runs: list[tuple[str, list[int]]]) -> list[TopicPartition]:
    return [(t, p) for t, ps in runs for p in ps]


def parse_problem(d: dict[str, Any]) -> Problem:
    if not isinstance(d, dict):
        raise AssignorError("problem must be a JSON object")
    raw_topics = d.get("topics")
    if not isinstance(raw_topics, list):
        raise AssignorError("problem.topics must be a list of [name, numPartitions(, topicId)]")
    topics: dict[str, int] = {}
    topic_ids: dict[str, tuple[int, int]] = {}
    for t in raw_topics:
        if not isinstance(t, list) or len(t) < 2:
            raise AssignorError(f"bad topic entry {t!r:.80}")
        name = _str(t[0], "topic name")
        n = _int(t[1], f"partition count of {name}")
        if n < 0:
            raise AssignorError(f"negative partition count for topic {name}")
        if name in topics:
            raise AssignorError(f"topic {name} listed twice")
        topics[name] = n
        if len(t) >= 3 and t[2] is not None:
            try:
                topic_ids[name] = uuid_from_string(_str(t[2], "topic id"))
            except (ValueError, binascii.Error) as exc:
                raise AssignorError(f"bad topic id for {name}: {exc}") from None
    racks = None
    pr = d.get("partition_racks")
    if pr is not None:
        if not isinstance(pr, dict):
            raise AssignorError("partition_racks must be null or {topic: [[racks], ...]}")
        racks = {}
        for name, per_part in pr.items():
            if not isinstance(per_part, list):
                raise AssignorError(f"partition_racks[{name}] must be a list")
            racks[name] = [frozenset(_str(r, "rack") for r in (rs or [])) for rs in per_part]
    raw_members = d.get("members")
    if not isinstance(raw_members, list):
        raise AssignorError("problem.members must be a list")
    members = []
    for m in raw_members:
        if not isinstance(m, dict):
            raise AssignorError("each member must be an object")
        mid = _str(m.get("member_id"), "member_id")
        if "topics" in m:
            subs = m.get("topics")
        else:
            subs = m.get("subscribed_topic_names")
        if not isinstance(subs, list):
            raise AssignorError(f"member {mid}: subscribed topics missing")
        subs = [_str(t, "subscribed topic") for t in subs]
        ud = m.get("user_data_b64")
        user_data = None
        if ud is not None:
            try:
                user_data = base64.b64decode(_str(ud, "user_data_b64"), validate=True)
            except binascii.Error:
                raise AssignorError(f"member {mid}: user_data_b64 is not base64") from None
        target = m.get("target_assignment_in")
        ids_it = m.get("subscribed_topic_ids_iteration")
        members.append(MemberSpec(
            member_id=mid,
            instance_id=_str(m.get("group_instance_id"), "group_instance_id", nullable=True),
            rack=_str(m.get("rack_id"), "rack_id", nullable=True),
            topics=subs,
            owned=runs_to_list(parse_runs(m.get("owned_partitions"), f"member {mid} owned_partitions")),
            generation=_int(m.get("generation_id"), "generation_id", nullable=True),
            user_data=user_data,
            target=parse_runs(target, f"member {mid} target_assignment_in") if target is not None else None,
            topic_ids_iteration=[_str(t, "topic") for t in ids_it] if isinstance(ids_it, list) else None,
        ))
    order = d.get("member_iteration_order")
    if order is not None:
        if not isinstance(order, list):
            raise AssignorError("member_iteration_order must be a list of member ids")
        order = [_str(x, "member id") for x in order]
    st = d.get("subscription_type")
    if st is not None and st not in ("HOMOGENEOUS", "HETEROGENEOUS"):
        raise AssignorError(f"unknown subscription_type {st!r:.40}")
    return Problem(members=members, topics=topics, topic_ids=topic_ids, partition_racks=racks,
                   member_order=order, subscription_type=st)


def to_runs(partitions: list[TopicPartition]) -> Runs:
    """Group a partition list into runs of consecutive same-topic partitions (SCHEMA "runs")."""
    out: Runs = []
    last: list[Any] | None = None  # the current run: [topic, [p, ...]]
    for t, p in partitions:
        if last is not None and last[0] == t:
            last[1].append(p)
        else:
            last = [t, [p]]
            out.append(last)
    return out
