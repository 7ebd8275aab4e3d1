"""Two historical models (not Kafka code): the ZooKeeper-era rule and a central hand-off protocol.

`zk-ceil` - the partition-ownership rule of the early (0.8-era, ZooKeeper-coordinated) consumer as the
design write-ups state it: per topic, with the subscribers sorted by id and the partitions in order,
consumer i takes partitions i*N ... (i+1)*N-1 where N = ceil(P / C). Because every consumer takes a
full N, the last consumers can get fewer or nothing (P=10, C=4: 3, 3, 3, 1; P=4, C=3: 2, 2, 0).

`central-handoff` - a central coordinator that knows everybody's current ownership and moves
partitions close-then-start: it computes a balanced target that keeps every member's current
partitions up to its quota (ceil(P/C) for the first P % C members in id order, floor for the others,
per the group-wide count), hands everything else to the least-loaded subscribed members, and only
the partitions that change owner between live members pause (closed by the old owner, then started
by the new one); the rest keep running. `handoff_plan()` returns both the target and the pause set.
"""
from __future__ import annotations

from .common import member_iteration_order
from .javahash import java_str_key
from .model import Problem, TopicPartition


def assign_zk_ceil(problem: Problem) -> dict[str, list[TopicPartition]]:
    order = member_iteration_order(problem)
    out: dict[str, list[TopicPartition]] = {mid: [] for mid in order}
    by_topic: dict[str, list[str]] = {}
    for mid in order:
        for t in dict.fromkeys(problem.member(mid).topics):
            if problem.topics.get(t):
                by_topic.setdefault(t, []).append(mid)
    for t in sorted(by_topic, key=java_str_key):
        consumers = sorted(by_topic[t], key=java_str_key)
        n_parts = problem.topics[t]
        n = -(-n_parts // len(consumers))  # ceil
        for i, mid in enumerate(consumers):
            out[mid].extend((t, p) for p in range(i * n, min((i + 1) * n, n_parts)))
    return out


def _current_owners(problem: Problem) -> dict[TopicPartition, str]:
    owners: dict[TopicPartition, str] = {}
    for m in problem.members:
        held = m.owned or [(t, p) for t, ps in (m.target or []) for p in ps]
        for tp in held:
            owners.setdefault(tp, m.member_id)  # a double claim: the first member keeps it
    return owners


def handoff_plan(problem: Problem) -> tuple[dict[str, list[TopicPartition]], set[TopicPartition]]:
    """(target assignment, partitions that pause because they change owner between live members)."""
    members = sorted((m.member_id for m in problem.members), key=java_str_key)
    subs = {m.member_id: {t for t in m.topics if problem.topics.get(t)} for m in problem.members}
    topics = sorted({t for s in subs.values() for t in s}, key=java_str_key)
    partitions = [(t, p) for t in topics for p in range(problem.topics[t])]
    total = len(partitions)
    base, extra = divmod(total, len(members)) if members else (0, 0)
    quota = {mid: base + (1 if i < extra else 0) for i, mid in enumerate(members)}
    owners = _current_owners(problem)
    out: dict[str, list[TopicPartition]] = {mid: [] for mid in members}
    free = []
    for tp in partitions:
        o = owners.get(tp)
        if o in out and tp[0] in subs[o] and len(out[o]) < quota[o]:
            out[o].append(tp)
        else:
            free.append(tp)
    for tp in free:
        cands = [mid for mid in members if tp[0] in subs[mid]]
        under = [mid for mid in cands if len(out[mid]) < quota[mid]]
        pick = min(under or cands, key=lambda mid: (len(out[mid]) - quota[mid], java_str_key(mid)))
        out[pick].append(tp)
    paused = set()
    for mid, parts in out.items():
        for tp in parts:
            o = owners.get(tp)
            if o is not None and o != mid and o in out:
                paused.add(tp)
    order = member_iteration_order(problem)
    return {mid: out[mid] for mid in order}, paused


def assign_central_handoff(problem: Problem) -> dict[str, list[TopicPartition]]:
    return handoff_plan(problem)[0]
