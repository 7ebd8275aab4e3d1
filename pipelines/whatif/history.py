"""One group's real history as the replay sees it: a sequence of steps (memberships).

A *step* is one persisted assignment the group really went through: a classic generation
(GroupMetadata record) or a KIP-848 target assignment epoch. It holds who was in the group,
what each member subscribed to, how many partitions each topic had, and what each member
really got. The what-if replay hands the same steps to other assignors.

Built from plain rows (one per step × member × partition, the shape `spark_job` sends to the
executors), so the same code runs on a pandas group inside `applyInPandas`, in the CLI and in
the benchmark.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable, Mapping

TopicPartition = tuple[str, int]

# The assignor a group really used, by the name Kafka persisted, mapped to our assignor names.
# Classic groups persist the client-side protocol name; KIP-848 members name a server assignor
# ("uniform" / "range"), the server-side range being our `server-range`.
CLASSIC_PROTOCOLS = {"range", "roundrobin", "sticky", "cooperative-sticky"}
SERVER_ASSIGNORS = {"uniform": "uniform", "range": "server-range"}


@dataclass
class StepMember:
    member_id: str
    instance_id: str | None
    client_id: str | None
    topics: list[str]
    assigned: list[TopicPartition]
    """What the member really got in this step (classic: the generation's assignment; KIP-848: its target)."""


@dataclass
class Step:
    generation: int
    """Classic generation, or KIP-848 assignment epoch."""
    position: int
    """Log offset of the record (orders a generation written twice)."""
    ts_ms: int | None
    members: list[StepMember]
    topics: dict[str, int]
    """Partition count of every topic some member of this step subscribes to."""
    duration_ms: float | None
    duration_source: str
    protocol: str | None
    topic_ids: dict[str, str] = field(default_factory=dict)
    """Topic name → Kafka topic id (base64), where stored (KIP-848): server assignors hash ids."""


@dataclass
class GroupHistory:
    cluster: str
    group_id: str
    incarnation: int
    kind: str
    """"classic" or "consumer" (KIP-848)."""
    real_assignor: str | None
    """Our name of the assignor the group really used (None: unknown / not one we model)."""
    steps: list[Step]
    commit_interval_ms: float | None
    """Mean time between two commits of one partition (duplicate-exposure model)."""
    records_per_partition_s: float | None
    """Mean records per second one partition advanced by (duplicate-exposure model)."""
    notes: list[str] = field(default_factory=list)
    segment: int = 0
    """Protocol segment of the group (`assemble.protocol_segments`): 0, one more at each
    conversion between the classic and the consumer protocol."""
    carried_over: bool = False
    """The first step is the state a protocol conversion carried over (what the members
    owned under the other protocol), not a rebalance: replays start from it."""


def real_assignor_name(kind: str, protocol: str | None) -> str | None:
    if protocol is None:
        return None
    if kind == "consumer":
        return SERVER_ASSIGNORS.get(protocol)
    return protocol if protocol in CLASSIC_PROTOCOLS else None


def _running_counts(observed: Mapping[str, int], fallback: Mapping[str, int], topics: Iterable[str]) -> dict[str, int]:
    out = {}
    for t in topics:
        if t in observed:
            out[t] = observed[t]
        elif t in fallback:
            out[t] = fallback[t]
        else:
            out[t] = 0
    return out


def build_history(rows: list[dict], cluster_topic_counts: Mapping[str, int] | None = None) -> GroupHistory:
    """Rows of one (cluster, group_id, incarnation) → its history.

    Row fields: cluster, group_id, incarnation, kind, generation, position, ts_ms, protocol,
    member_id (null for an empty generation), instance_id, client_id, topics (list), topic,
    partition (null: nothing assigned), duration_ms, duration_source, commit_interval_ms,
    records_per_partition_s, topic_counts (JSON {topic: partitions} where Kafka stored them, else
    null), topic_ids (JSON {topic: id}, KIP-848 only), segment and carried_over (optional:
    a group converted between protocols, `assemble.protocol_segments`).

    Partition counts: where Kafka stored them (KIP-848 PartitionMetadata / topic_ids) they
    are used; otherwise the highest partition the group had assigned up to that step, plus
    one, and for a topic the group never had assigned yet, the cluster-wide highest
    partition seen in any table plus one (`cluster_topic_counts`).
    """
    if not rows:
        raise ValueError("empty group history")
    first = rows[0]
    by_step: dict[tuple[int, int], dict] = {}
    for r in rows:
        key = (int(r["position"]), int(r["generation"]))
        st = by_step.get(key)
        if st is None:
            st = by_step[key] = {"row": r, "members": {}}
        mid = r.get("member_id")
        if mid is None:
            continue
        m = st["members"].get(mid)
        if m is None:
            topics = r.get("topics")
            m = st["members"][mid] = StepMember(
                member_id=mid,
                instance_id=r.get("instance_id"),
                client_id=r.get("client_id"),
                topics=sorted(set(topics)) if topics is not None else [],
                assigned=[],
            )
        if r.get("topic") is not None and r.get("partition") is not None:
            tp = (r["topic"], int(r["partition"]))
            if tp not in m.assigned:
                m.assigned.append(tp)
    kind = first["kind"]
    fallback = dict(cluster_topic_counts or {})
    observed: dict[str, int] = {}
    steps = []
    protocol = None
    notes: list[str] = []
    for (pos, gen), st in sorted(by_step.items()):
        r = st["row"]
        members = sorted(st["members"].values(), key=lambda m: m.member_id)
        for m in members:
            m.assigned.sort()
            for t, p in m.assigned:
                observed[t] = max(observed.get(t, 0), p + 1)
        meta = json.loads(r["topic_counts"]) if r.get("topic_counts") else None
        subscribed = sorted({t for m in members for t in m.topics})
        if meta is not None:
            # Stored metadata is authoritative: a topic it does not list does not exist.
            # (in the stored order: server assignors iterate topics in it)
            counts = {t: int(n) for t, n in meta.items() if t in subscribed}
            counts.update({t: 0 for t in subscribed if t not in counts})
        else:
            counts = _running_counts(observed, fallback, subscribed)
        ids = json.loads(r["topic_ids"]) if r.get("topic_ids") else {}
        for t in subscribed:
            if counts[t] == 0:
                notes.append(f"generation {gen}: no partition count known for topic {t!r} (taken as 0)")
        if r.get("protocol"):
            protocol = r["protocol"]
        steps.append(Step(
            generation=gen, position=pos, ts_ms=r.get("ts_ms"), members=members, topics=counts,
            duration_ms=r.get("duration_ms"), duration_source=r.get("duration_source") or "unknown",
            protocol=r.get("protocol"), topic_ids={t: i for t, i in ids.items() if isinstance(i, str)},
        ))
    return GroupHistory(
        cluster=first["cluster"], group_id=first["group_id"], incarnation=int(first.get("incarnation") or 0),
        kind=kind, real_assignor=real_assignor_name(kind, protocol), steps=steps,
        commit_interval_ms=first.get("commit_interval_ms"), records_per_partition_s=first.get("records_per_partition_s"),
        notes=notes, segment=int(first.get("segment") or 0), carried_over=bool(first.get("carried_over")),
    )
