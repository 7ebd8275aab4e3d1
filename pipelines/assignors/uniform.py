"""Server-side `uniform` (KIP-848 default; org.apache.kafka.coordinator.group.assignor.UniformAssignor).

`uniform` is Kafka 3.9.0 exactly:

* HOMOGENEOUS subscriptions -> `UniformHomogeneousAssignmentBuilder` (3.9): the first `total % M`
  members in `GroupSpec.memberIds()` order get the +1 quota; each member keeps the first `quota`
  partitions of its previous target in the target's own iteration order; unassigned partitions are
  enumerated in `HashSet<Uuid>` order of topic ids (then ascending), followed by the revoked ones.
* HETEROGENEOUS -> `UniformHeterogeneousAssignmentBuilder` (3.9, before the KAFKA-17710 rewrite):
  keep everything still subscribed, hand out the rest least-loaded first, then a sticky-assignor-like
  balancing loop. It contains 3.9's bug: moving a partition a second time in one pass throws
  `PartitionAssignorException: Mismatch in partition movement record ...` - reproduced here as an
  `AssignorError` with the same message, because that is what the 3.9 coordinator does (the group's
  target assignment is then not updated).

`uniform-4.1` applies the KAFKA-18688 homogeneous stability fix (apache/kafka#19677: any member whose
previous assignment already holds min+1 keeps it, the extra slots left over go to the last unfilled
members) and, for heterogeneous groups, the KAFKA-17710 rewrite (per-topic balancing, described in
../shared/reference/kafka-internals.md §5.4). Neither 3.9 nor these variants use racks.
"""
from __future__ import annotations

from functools import cached_property
from itertools import chain, filterfalse, repeat
from typing import Any

from . import native
from .common import PartitionMovements, member_iteration_order
from .javahash import (JavaHashSet, hash_order, hashset_copy_capacity, string_hash, topic_id_partition_hash,
                       uuid_hash)
from .model import AssignorError, MemberSpec, Problem, TopicPartition


class _ServerView:
    """What `GroupSpec` + `SubscribedTopicDescriber` expose to the 3.9 assignors, by topic name."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self.order = member_iteration_order(problem)
        self.members = list(map(problem.member_map.__getitem__, self.order))
        self.uuid_h: dict[str, int] = {}
        for t in problem.topics:
            topic_id = problem.topic_ids.get(t)
            # Without a topic id (problem not from a KIP-848 group) the name's hash stands in; documented.
            self.uuid_h[t] = uuid_hash(*topic_id) if topic_id else string_hash(t)
        # Read-only: the builders never modify a previous target, so no copy.
        self.targets: dict[str, list[tuple[str, list[int]]]] = {m.member_id: m.target or [] for m in self.members}

    def topic_ids(self, m: MemberSpec) -> list[str]:
        """`MemberSubscription.subscribedTopicIds()` iteration (as names), non-existent topics skipped."""
        topics = self.problem.topics
        if m.topic_ids_iteration is not None:
            return [t for t in m.topic_ids_iteration if t in topics]
        # TopicIds view over the member's HashSet<String> of names.
        names = list(dict.fromkeys(m.topics))
        names = hash_order(names, [string_hash(n) for n in names], hashset_copy_capacity(len(names)))
        return [t for t in names if t in topics]

    # The two below are computed on first use: the homogeneous builder needs only the first
    # member's subscription and the heterogeneous one never asks `isPartitionAssigned`.

    @cached_property
    def subs(self) -> dict[str, list[str]]:
        """member id -> `topic_ids(member)`."""
        return {m.member_id: self.topic_ids(m) for m in self.members}

    @cached_property
    def assigned_in_target(self) -> set[TopicPartition]:
        """`GroupSpec.isPartitionAssigned`: partitions in some member's previous target."""
        out: set[TopicPartition] = set()
        for runs in self.targets.values():
            for t, ps in runs:
                out.update(zip(repeat(t), ps))
        return out

    def subscription_type(self) -> str:
        if self.problem.subscription_type:
            return self.problem.subscription_type
        # ModernGroup.subscriptionType: on subscribed topic NAMES, existing or not.
        sets = [frozenset(m.topics) for m in self.members]
        return "HOMOGENEOUS" if all(s == sets[0] for s in sets) else "HETEROGENEOUS"

    def topic_id_set_order(self, topics: list[str]) -> list[str]:
        """Iteration order of `new HashSet<Uuid>(collection)`."""
        return hash_order(topics, [self.uuid_h[t] for t in topics], hashset_copy_capacity(len(topics)))


# ---------------------------------------------------------------------------------------------
# Homogeneous


def _homogeneous(view: _ServerView, stability_fix: bool) -> dict[str, list[TopicPartition]]:
    order = view.order
    subscribed = view.topic_id_set_order(view.topic_ids(view.members[0]))
    if not subscribed:
        return {}
    subscribed_set = set(subscribed)
    counts = view.problem.topics
    unassigned: list[TopicPartition] = []
    total = 0
    is_assigned = view.assigned_in_target.__contains__
    for t in subscribed:
        n = counts[t]
        unassigned += filterfalse(is_assigned, zip(repeat(t), range(n)))
        total += n
    m_count = len(order)
    min_quota, extra = divmod(total, m_count)
    out: dict[str, list[TopicPartition]] = {}
    unfilled: list[list] = []  # [member, remaining quota]
    for mid in order:
        quota = min_quota
        has_extra = False
        if extra > 0:
            quota += 1
            has_extra = True
            if not stability_fix:
                extra -= 1
        kept: list[TopicPartition] = []
        for t, parts in view.targets[mid]:
            if t not in subscribed_set:
                continue
            if len(parts) <= quota:
                quota -= len(parts)
                kept += zip(repeat(t), parts)
            else:  # the first `quota` partitions (in the target's order) stay, the rest are freed
                kept += zip(repeat(t), parts[:quota])
                unassigned += zip(repeat(t), parts[quota:])
                quota = 0
        out[mid] = kept
        if stability_fix:
            if quota > 0 and has_extra:
                quota -= 1  # give the extra slot back for another member to claim
                has_extra = False
            if quota == 0 and has_extra:
                extra -= 1
            if quota > 0 or (extra > 0 and not has_extra):
                unfilled.append([mid, quota])
        elif quota > 0:
            unfilled.append([mid, quota])
    if stability_fix:
        # The last `extra` unfilled members take the extra partitions left over.
        keep = []
        for entry in reversed(unfilled):
            if extra > 0:
                extra -= 1
                entry[1] += 1
            if entry[1] > 0:
                keep.append(entry)
        unfilled = keep[::-1]
    idx = 0
    for mid, q in unfilled:
        take = unassigned[idx:idx + q]
        idx += len(take)
        out[mid].extend(take)
    if idx < len(unassigned):
        raise AssignorError("PartitionAssignorException: Partitions were left unassigned")
    return out


# ---------------------------------------------------------------------------------------------
# Heterogeneous, Kafka 3.9


class _Hetero39:
    """`UniformHeterogeneousAssignmentBuilder` as shipped in 3.9.0."""

    def __init__(self, view: _ServerView):
        self.view = view
        self.counts = view.problem.topics
        uh = view.uuid_h
        self.tip_hash = lambda tp: topic_id_partition_hash(uh[tp[0]], tp[1])
        self.members_per_topic: dict[str, list[str]] = {}

        def topic_hash(t: Any) -> int:  # JavaHashSet passes its items: topic names here
            return uh[t]
        self.in_target: set[str] = set()
        for mid in view.order:
            subs = view.subs[mid]
            if subs:
                self.in_target.add(mid)
            for t in subs:
                self.members_per_topic.setdefault(t, []).append(mid)
        # The HashSet<Uuid> of subscribed topic ids only ever grows, so adding each topic once in
        # first-seen order (members_per_topic's key order) gives the same table.
        subscribed_ids: JavaHashSet = JavaHashSet(topic_hash)
        subscribed_ids.add_all(list(self.members_per_topic), [uh[t] for t in self.members_per_topic])
        self.subscribed = subscribed_ids.ordered()
        self.sub_sets = {mid: set(view.subs[mid]) for mid in view.order}
        self.unassigned = JavaHashSet(self.tip_hash)
        self._all_hashed: tuple[list[TopicPartition], list[int]] | None = None
        self._add_all_partitions()
        # Every later iteration of `unassigned` (before the sticky pass, and on each balancing pass)
        # is of a subset of this table, refilled in the same order with the same capacity: its
        # order is this one filtered, and a stable sort of a subsequence is the sorted list
        # filtered. So it is sorted once here and filtered afterwards.
        self.all_sorted = self._sort_partitions(self.unassigned.ordered())
        self.size = {mid: 0 for mid in view.order}
        self.max_size = {mid: sum(map(self.counts.__getitem__, view.subs[mid])) for mid in view.order}
        self.target: dict[str, dict[str, dict[int, None]]] = {mid: {} for mid in view.order}
        self.owner: dict[TopicPartition, str] = {}
        # TreeSet<String> ordered by (current size, member id), holding members below their max size.
        self.sorted_members: set[str] = {mid for mid in view.order if self.max_size[mid] > 0}
        self.moves = PartitionMovements(self.tip_hash)

    def _add_all_partitions(self) -> None:
        """Every subscribed partition into `unassigned`, in `_all_partitions` order, hashed in bulk
        (`TopicIdPartition.hashCode` = 31 * (31 + topicId.hashCode) + p, consecutive per topic);
        computed once, used for the initial fill and the refill before balancing."""
        if self._all_hashed is None:
            uh, counts, topics = self.view.uuid_h, self.counts, self.subscribed
            items = list(chain.from_iterable(zip(repeat(t), range(counts[t])) for t in topics))
            bases = [31 * (31 + uh[t]) for t in topics]
            hashes = list(chain.from_iterable(range(b, b + counts[t]) for b, t in zip(bases, topics)))
            self._all_hashed = (items, hashes)
        self.unassigned.add_all(*self._all_hashed)

    def _all_partitions(self):
        for t in self.subscribed:
            for p in range(self.counts[t]):
                yield (t, p)

    def _first_sorted(self, candidates):
        return min(candidates, key=lambda m: (self.size[m], m), default=None)

    # AssignmentManager
    def _add(self, tp: TopicPartition, mid: str) -> None:
        self.target[mid].setdefault(tp[0], {})[tp[1]] = None
        self.owner[tp] = mid
        self.sorted_members.discard(mid)
        self.size[mid] += 1
        if self.size[mid] < self.max_size[mid]:
            self.sorted_members.add(mid)
        self.unassigned.discard(tp)

    def _remove(self, tp: TopicPartition, mid: str) -> None:
        parts = self.target[mid].get(tp[0])
        if parts is not None:
            parts.pop(tp[1], None)
            if not parts:
                del self.target[mid][tp[0]]
        if self.owner.get(tp) == mid:
            del self.owner[tp]
        self.sorted_members.discard(mid)
        if self.size[mid] > 0:
            self.size[mid] -= 1
        if self.size[mid] < self.max_size[mid]:
            self.sorted_members.add(mid)

    def _sort_partitions(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        """Stable sort by (-(partitions / members) of the topic, members of the topic, partition);
        the topic part of the key is computed once per topic, not per partition."""
        mpt = self.members_per_topic
        counts = self.counts
        topic_key = {t: (-(counts[t] / len(mpt[t])), len(mpt[t])) for t in mpt}
        return sorted(parts, key=lambda tp: (topic_key[tp[0]], tp[1]))

    def _unassigned_sorted(self) -> list[TopicPartition]:
        """`_sort_partitions(unassigned in HashSet order)`, see `all_sorted`."""
        return self.unassigned.present(self.all_sorted)

    def build(self) -> dict[str, list[TopicPartition]]:
        if not self.subscribed:
            return {}
        view = self.view
        for mid in view.order:  # assignStickyPartitions
            for t, parts in view.targets[mid]:
                if t in self.sub_sets[mid]:
                    for p in parts:
                        self._add((t, p), mid)
        for tp in self._unassigned_sorted():  # unassignedPartitionsAssignment
            cands = [m for m in self.members_per_topic[tp[0]] if self.size[m] < self.max_size[m]]
            m = self._first_sorted(cands)
            if m is not None:
                self._add(tp, m)
        self._balance()
        return {mid: [(t, p) for t, ps in self.target[mid].items() for p in ps]
                for mid in view.order if mid in self.in_target}

    def _can_topic(self, t: str) -> bool:
        return len(self.members_per_topic[t]) >= 2

    def _can_member(self, mid: str) -> bool:
        # A member whose subscribed topics all do not exist has an empty target: it cannot participate.
        if self.size[mid] < self.max_size[mid]:
            return True
        return any(self._can_topic(t) for t in self.target[mid])

    def _balance(self) -> None:
        if self.unassigned:
            raise AssignorError("PartitionAssignorException: Some partitions were left unassigned")
        self._add_all_partitions()
        for t in self.subscribed:
            if not self._can_topic(t):
                for p in range(self.counts[t]):
                    self.unassigned.discard((t, p))
        for mid in self.view.order:
            if not self._can_member(mid):
                self.sorted_members.discard(mid)
        if self.unassigned:
            self._perform_reassignments()

    def _is_balanced(self) -> bool:
        """`isBalanced`: no member below its maximum could take a partition from a member holding
        more than one partition more than it.

        Java walks the members in TreeSet order and every partition they do not own; the answer
        is a boolean with no side effect, so any member order gives it, and per topic only the
        largest owner matters (the member's own partitions and unowned ones never violate): one
        C-level max per topic and call instead of a Python loop per member and partition."""
        if not self.sorted_members:
            raise AssignorError("NoSuchElementException in UniformHeterogeneousAssignmentBuilder.isBalanced")
        sizes: dict[str | None, int] = {}
        sizes.update(self.size)
        member_sizes = [sizes[m] for m in self.sorted_members]
        if min(member_sizes) >= max(member_sizes) - 1:
            return True
        sizes[None] = 0  # an unowned partition
        largest: dict[str, int] = {}
        for mid in self.sorted_members:
            count = sizes[mid]
            if count == self.max_size[mid]:
                continue
            for t in self.view.subs[mid]:
                m = largest.get(t)
                if m is None:
                    owners = map(self.owner.get, zip(repeat(t), range(self.counts[t])))
                    m = largest[t] = max(map(sizes.__getitem__, owners), default=0)
                if count + 1 < m:
                    return False
        return True

    def _perform_reassignments(self) -> None:
        while True:
            modified = False
            occurred = False
            for tp in self._unassigned_sorted():
                if occurred and self._is_balanced():
                    return
                occurred = False
                if len(self.members_per_topic[tp[0]]) <= 1:
                    raise AssignorError(f"PartitionAssignorException: Expected more than one potential member for {tp}")
                owner = self.owner.get(tp)
                if owner is None:
                    raise AssignorError(f"PartitionAssignorException: Expected {tp} to be assigned to a member")
                # Java loops over the topic's members for one with size[owner] > its size + 1:
                # the least loaded one decides (a C-level min instead of a Python loop).
                if self.size[owner] > min(map(self.size.__getitem__, self.members_per_topic[tp[0]])) + 1:
                    self._reassign(tp)
                    modified = occurred = True
            if not modified:
                return

    def _reassign(self, tp: TopicPartition) -> None:
        t = tp[0]
        new_owner = self._first_sorted(m for m in self.sorted_members if t in self.sub_sets[m])
        if new_owner is None:
            raise AssignorError(f"PartitionAssignorException: No suitable new owner was found for the partition {tp}")
        old = self.owner.get(tp)
        to_move = self._actual_partition_to_move(tp, old, new_owner)
        old_member = self.owner.get(to_move)
        # Every partition balanced here is owned: `tp` (its owner was checked) or one moved to `old`.
        assert old_member is not None
        self._move(to_move, old_member, new_owner)
        self._remove(to_move, old_member)
        self._add(to_move, new_owner)

    def _actual_partition_to_move(self, tp, old, new):
        by_topic = self.moves.by_topic.get(tp[0])
        if by_topic is None:
            return tp
        rec = self.moves.by_partition.get(tp)
        if rec is not None:
            if old != rec[1]:
                raise AssignorError(f"PartitionAssignorException: Old owner does not match expected value for partition: {tp}")
            old = rec[0]
        s = by_topic.get((new, old))
        if s is None:
            return tp
        return s.first()

    def _move(self, tp, old, new):
        if tp in self.moves.by_partition:
            existing = self.moves.remove(tp)
            if existing[1] == old:
                # Kafka 3.9.0 UniformHeterogeneousAssignmentBuilder.PartitionMovements.movePartition:
                # the check is inverted w.r.t. the client's assertion, so any second move throws.
                raise AssignorError("PartitionAssignorException: Mismatch in partition movement record with "
                                    "respect to partition ownership during a rebalance")
            if existing[0] != new:
                self.moves.add(tp, (existing[0], new))
        else:
            self.moves.add(tp, (old, new))


# ---------------------------------------------------------------------------------------------
# Heterogeneous, KAFKA-17710 rewrite (4.0+)


def _hetero_rewrite(view: _ServerView) -> dict[str, list[TopicPartition]]:
    order = view.order
    index = {mid: i for i, mid in enumerate(order)}
    counts = view.problem.topics
    topic_subscribers: dict[str, list[int]] = {}
    for mid in order:
        for t in view.subs[mid]:
            topic_subscribers.setdefault(t, []).append(index[mid])
    owner: dict[TopicPartition, int] = {}
    target: list[dict[TopicPartition, None]] = [dict() for _ in order]
    for mid in order:  # maybeRevokePartitions: drop only topics no longer subscribed
        subscribed = set(view.subs[mid])
        i = index[mid]
        for t, ps in view.targets[mid]:
            if t in subscribed:
                for p in ps:
                    if (t, p) not in owner and p < counts[t]:
                        owner[(t, p)] = i
                        target[i][(t, p)] = None
    ids = {t: view.problem.topic_ids.get(t, (0, 0)) for t in topic_subscribers}
    topics = sorted(topic_subscribers, key=lambda t: (-(counts[t] / len(topic_subscribers[t])),
                                                      len(topic_subscribers[t]), ids[t], t))
    for t in topics:  # assignRemainingPartitions
        subs = topic_subscribers[t]
        for p in range(counts[t]):
            if (t, p) in owner:
                continue
            i = min(subs, key=lambda j: (len(target[j]), j))
            owner[(t, p)] = i
            target[i][(t, p)] = None
    balanced_topics = [t for t in topics if len(topic_subscribers[t]) >= 2]
    for _ in range(16):  # balance, MAX_ITERATION_COUNT
        moved = False
        for t in balanced_topics:
            subs = topic_subscribers[t]
            sizes = lambda subs=subs: [len(target[j]) for j in subs]  # noqa: E731
            if max(sizes()) - min(sizes()) <= 1:
                continue
            parts = sorted(((owner[(t, p)], p) for p in range(counts[t])))
            while True:
                most = max(subs, key=lambda j: (len(target[j]), -j))
                least = min(subs, key=lambda j: (len(target[j]), j))
                if len(target[most]) - len(target[least]) <= 1:
                    break
                mine = [p for o, p in parts if o == most]
                if not mine:
                    break
                p = mine[-1]
                parts.remove((most, p))
                parts.append((least, p))
                del target[most][(t, p)]
                target[least][(t, p)] = None
                owner[(t, p)] = least
                moved = True
        if not moved:
            break
    return {mid: list(target[index[mid]]) for mid in order}


# ---------------------------------------------------------------------------------------------


def assign_uniform_39(problem: Problem) -> dict[str, list[TopicPartition]]:
    view = _ServerView(problem)
    if not view.order:
        return {}
    homogeneous = view.subscription_type() == "HOMOGENEOUS"
    if native.uniform_assign is not None:
        # Java takes ~65 µs per medium group; the Python builders below, whose work is per
        # partition and member, take two to three times that, so the compiled core runs them
        # (native/src/uniform.rs). It answers None where 3.9 throws: Python then raises.
        out = _uniform_39_native(view, homogeneous)
        if out is not None:
            return out
    if homogeneous:
        return _homogeneous(view, stability_fix=False)
    return _Hetero39(view).build()


def _uniform_39_native(view: _ServerView, homogeneous: bool) -> dict[str, list[TopicPartition]] | None:
    members = view.members
    # Each member's subscribed topic ids as recorded (the core skips non-existent topics);
    # the homogeneous builder reads only the first member's.
    subscriptions = [m.topic_ids_iteration if m.topic_ids_iteration is not None else view.topic_ids(m)
                     for m in (members[:1] if homogeneous else members)]
    assert native.uniform_assign is not None
    # The core takes each run as a (topic, partitions) tuple; a caller's runs may be lists (the
    # simulator writes them as the records hold them).
    targets = [[tuple(run) for run in m.target] if m.target else [] for m in members]
    return native.uniform_assign([m.member_id for m in members], subscriptions, targets,
                                 view.problem.topics, view.uuid_h, homogeneous)


def assign_uniform_41(problem: Problem) -> dict[str, list[TopicPartition]]:
    view = _ServerView(problem)
    if not view.order:
        return {}
    if view.subscription_type() == "HOMOGENEOUS":
        return _homogeneous(view, stability_fix=True)
    return _hetero_rewrite(view)
