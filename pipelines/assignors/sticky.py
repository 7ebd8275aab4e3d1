"""Client `sticky` and `cooperative-sticky` (Kafka 3.9 `AbstractStickyAssignor` and subclasses).

Ownership input:
* `sticky` (eager): previous assignment and generation from the member's user data
  (`STICKY_ASSIGNOR_USER_DATA_V1`, falling back to V0 without generation);
* `cooperative-sticky`: `Subscription.ownedPartitions` + `generationId` (protocol v2+), else the
  generation in the user data (`COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0`).

Claims on the same partition are resolved by generation (higher wins, equal = nobody keeps it). With
identical subscriptions the constrained builder runs (quota-based, decided in the `HashMap` order of
the members, hence `member_iteration_order` matters); otherwise the general builder (least-loaded
first, then iterative balancing with prevAssignment hints and ping-pong avoidance). Both are
KIP-881 rack-aware. `cooperative-sticky` then withholds every partition that changes owner between
live members: the owner revokes it now and it is assigned in the follow-up rebalance.

The Java `assert`s of the general builder are not enabled in production clients, so they are not
checked here either.
"""
from __future__ import annotations

import bisect
import struct
from itertools import chain, filterfalse, repeat
from math import ceil
from operator import itemgetter
from typing import Any, Mapping

from pipelines.codec.consumer_protocol import read_user_data_prefix, write_user_data
from pipelines.codec.errors import CodecError

from . import native
from .common import PartitionMovements, member_iteration_order, partition_rack_sets, use_rack_aware
from .javahash import (
    java_str_key,
    string_hashes,
    string_hashmap_order,
    to_int32,
)
from .model import AssignorError, MemberSpec, Problem, TopicPartition

DEFAULT_GENERATION = -1


# ---------------------------------------------------------------------------------------------
# Member data (user data decoding)


def decode_sticky_user_data(data: bytes | None) -> tuple[list[TopicPartition], int | None]:
    """`StickyAssignor.memberData`: (previous assignment, generation or None).

    As Java: V1 `{previous_assignment, generation}` first, then V0 `{previous_assignment}`,
    each read from the start with any bytes after it ignored; neither fits (a null array or
    string, too few bytes) → no previous assignment at DEFAULT_GENERATION. The layouts are
    the codec's (pipelines/codec/schemas.py); the compiled core reads the well-formed case
    (the generic reader cost a quarter of a sticky assign() call) and leaves anything unusual
    to the codec, so both agree by construction (tests/test_assignors_models.py)."""
    if not data:
        return [], None
    core = native.sticky_user_data
    fast = core(data) if core is not None else None
    if fast is not None:
        return fast
    return _decode_sticky_user_data_codec(data)


def _decode_sticky_user_data_codec(data: bytes) -> tuple[list[TopicPartition], int | None]:
    for fmt in ("sticky-v1", "sticky-v0"):
        try:
            d = read_user_data_prefix(data, fmt)
        except CodecError:
            continue
        return [(t["topic"], p) for t in d["previous_assignment"] for p in t["partitions"]], d.get("generation")
    return [], DEFAULT_GENERATION


def encode_sticky_user_data(partitions: list[TopicPartition], generation: int) -> bytes:
    """`STICKY_ASSIGNOR_USER_DATA_V1` for a member's assignment (topics grouped in first-seen order)."""
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    return write_user_data("sticky-v1", {"previous_assignment": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                                         "generation": generation})


MemberData = tuple[list[TopicPartition], "int | None"]


def _member_data_sticky(m: MemberSpec) -> MemberData:
    return decode_sticky_user_data(m.user_data)


def _member_data_cooperative(m: MemberSpec) -> MemberData:
    # The owned list itself, not a copy: member data is only read (the builders copy what they keep).
    if m.generation is not None:
        return m.owned, m.generation
    if m.user_data is None:
        return m.owned, None
    if len(m.user_data) >= 4:
        return m.owned, struct.unpack(">i", m.user_data[:4])[0]
    return m.owned, DEFAULT_GENERATION


# ---------------------------------------------------------------------------------------------


class _RackInfo:
    def __init__(self, problem: Problem, counts: dict[str, int], order: list[str]):
        consumers_by_rack: dict[str, list[str]] = {}
        for mid in order:
            r = problem.member(mid).rack
            if r:
                consumers_by_rack.setdefault(r, []).append(mid)
        partition_racks: dict[TopicPartition, frozenset[str]] = {}
        if consumers_by_rack:
            for t, n in counts.items():
                partition_racks.update(zip(zip(repeat(t), range(n)), partition_rack_sets(problem, t, n)))
        all_racks: set[str] = set().union(*set(partition_racks.values()))
        if use_rack_aware(set(consumers_by_rack), all_racks, partition_racks.values()):
            self.consumer_racks = {c: r for r, cs in consumers_by_rack.items() for c in cs}
            self.partition_racks = partition_racks
        else:
            self.consumer_racks = {}
            self.partition_racks = {}
        # Computed from the local partition racks: partitions get sorted by it whenever any consumer
        # has a rack, even if rack-aware assignment is off (a stable sort, usually a no-op).
        per_rack_set: dict[frozenset[str], int] = {}  # partitions share a few replica rack sets
        for racks in partition_racks.values():
            if racks not in per_rack_set:
                per_rack_set[racks] = sum(len(consumers_by_rack.get(r, ())) for r in racks)
        self.num_consumers = {tp: per_rack_set[racks] for tp, racks in partition_racks.items()}

    def mismatch(self, consumer: str, tp: TopicPartition) -> bool:
        rack = self.consumer_racks.get(consumer)
        if rack is None:
            return False
        racks = self.partition_racks.get(tp)
        return racks is None or rack not in racks

    def sort_by_rack_consumers(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        if not self.num_consumers:
            return parts
        nc = self.num_consumers
        return sorted(parts, key=lambda tp: nc.get(tp, 0))

    def next_rack_consumer(self, tp: TopicPartition, consumers: list[str], first: int) -> int:
        racks = self.partition_racks.get(tp)
        if not racks:
            return -1
        n = len(consumers)
        for i in range(n):
            idx = (first + i) % n
            r = self.consumer_racks.get(consumers[idx])
            if r is not None and r in racks:
                return idx
        return -1


def _all_subscriptions_equal(subs: dict[str, MemberSpec], all_topics: set[str], member_data: dict[str, MemberData]):
    """Returns (equal, consumer -> owned list, partitions with multiple previous owners, maxGeneration,
    partition -> owner of the owned lists or None).

    Claims are resolved by generation partition by partition in Java; when no partition is
    claimed twice (a stable group: the usual case) that walk keeps every claim, so the lists are
    taken whole and only a duplicate sends the call through the exact walk. The partition -> owner
    map built to find duplicates is returned then (the general builder starts from it)."""
    equal = _same_subscriptions(subs)
    max_gen = max([DEFAULT_GENERATION, *(gen for _, gen in member_data.values() if gen is not None)])
    owned = {c: _in_topics(member_data[c][0], all_topics) for c in subs}
    owner_of: dict[TopicPartition, str] = {}
    for c, parts in owned.items():
        owner_of.update(zip(parts, repeat(c)))
    if len(owner_of) == sum(map(len, owned.values())):
        return equal, owned, set(), max_gen, owner_of
    owned, multi = _resolve_claims(subs, all_topics, member_data)
    return equal, owned, multi, max_gen, None


def _same_subscriptions(subs: dict[str, MemberSpec]) -> bool:
    """Every member subscribes the same topic set (the first non-empty one seen)."""
    subscribed: set[str] = set()
    for m in subs.values():
        if not subscribed:
            subscribed = set(m.topics)
        elif not (len(m.topics) == len(subscribed) and subscribed.issuperset(m.topics)):
            return False
    return True


def _in_topics(partitions: list[TopicPartition], topics: set[str]) -> list[TopicPartition]:
    """A new list of the partitions whose topic is in `topics`."""
    if topics.issuperset(map(_TOPIC, partitions)):
        return list(partitions)
    return [tp for tp in partitions if tp[0] in topics]


_TOPIC = itemgetter(0)


def _resolve_claims(subs: dict[str, MemberSpec], all_topics: set[str], member_data: dict[str, MemberData]):
    """Java's walk: a partition claimed again goes to the higher generation; equal generations
    (the other one's from its Subscription, as in Java) make it a multi-owner partition."""
    owner_of: dict[TopicPartition, str] = {}
    owned: dict[str, list[TopicPartition]] = {}
    multi: set[TopicPartition] = set()
    for consumer in subs:
        partitions, gen = member_data[consumer]
        gen = DEFAULT_GENERATION if gen is None else gen
        mine: list[TopicPartition] = []
        owned[consumer] = mine
        for tp in partitions:
            if tp[0] not in all_topics:
                continue
            other = owner_of.get(tp)
            if other is None:
                mine.append(tp)
                owner_of[tp] = consumer
                continue
            other_gen = subs[other].generation
            other_gen = DEFAULT_GENERATION if other_gen is None else other_gen
            if gen == other_gen:
                multi.add(tp)
                _remove_first(owned[other], tp)
                owner_of[tp] = consumer
            elif gen > other_gen:
                mine.append(tp)
                _remove_first(owned[other], tp)
                owner_of[tp] = consumer
    return owned, multi


def _remove_first(lst: list, item) -> bool:
    try:
        lst.remove(item)
        return True
    except ValueError:
        return False


def _tp_key(tp: TopicPartition):
    return (java_str_key(tp[0]), tp[1])


class _Constrained:
    def __init__(self, counts, rack: _RackInfo, owned: dict[str, list[TopicPartition]], owned_order: list[str],
                 multi: set[TopicPartition]):
        self.counts = counts
        self.rack = rack
        self.owned = owned
        self.owned_order = owned_order
        self.multi = multi
        # partition -> consumer that owned it but does not keep it (over quota or rack mismatch)
        self.revoked: dict[TopicPartition, str] = {}
        self.under: list[str] = []
        self.exact: list[str] = []
        total = sum(counts.values())
        n = len(owned)
        self.min_q = total // n
        self.max_q = ceil(total / n)
        self.expected = total % n
        self.current = 0
        self.assignment: dict[str, list[TopicPartition]] = {c: [] for c in owned_order}
        self.assigned: set[TopicPartition] = set()
        self.transferring: dict[TopicPartition, str] = {}
        # Owned partitions sort by (partition, topic); plain tuples compare like Java for ASCII names.
        self.partition_first_key = (itemgetter(1, 0) if "".join(counts).isascii()
                                    else lambda tp: (tp[1], java_str_key(tp[0])))

    def build(self):
        self._assign_owned()
        topics = sorted(self.counts, key=java_str_key)
        unassigned = [(t, p) for t in topics for p in range(self.counts[t]) if (t, p) not in self.assigned]
        self.under.sort(key=java_str_key)
        self.exact.sort(key=java_str_key)
        unassigned = self.rack.sort_by_rack_consumers(unassigned)
        unassigned = self._rack_round_robin(unassigned)
        self._round_robin(unassigned)
        self._verify()
        return self.assignment

    def _assign_owned(self):
        min_q, max_q = self.min_q, self.max_q
        for c in self.owned_order:
            if self.rack.consumer_racks:
                mine = []
                for tp in self.owned[c]:
                    if self.rack.mismatch(c, tp):
                        self.revoked[tp] = c
                    else:
                        mine.append(tp)
            else:
                mine = list(self.owned[c])
            mine.sort(key=self.partition_first_key)
            for tp in self.multi:
                _remove_first(mine, tp)
            target = self.assignment[c]
            if len(mine) < min_q:
                target.extend(mine)
                self.assigned.update(mine)
                self.under.append(c)
            elif len(mine) >= max_q and self.current < self.expected:
                self.current += 1
                if self.current == self.expected:
                    self.exact.clear()
                target.extend(mine[:max_q])
                self.assigned.update(mine[:max_q])
                for tp in mine[max_q:]:
                    self.revoked[tp] = c
            else:
                target.extend(mine[:min_q])
                self.assigned.update(mine[:min_q])
                for tp in mine[min_q:]:
                    self.revoked[tp] = c
                if self.current < self.expected:
                    self.exact.append(c)

    def _assign_new(self, tp, c) -> int:
        lst = self.assignment[c]
        lst.append(tp)
        prev_owner = self.revoked.get(tp)
        if (prev_owner is not None and prev_owner != c) or tp in self.multi:
            self.transferring[tp] = c
        return len(lst)

    def _rack_round_robin(self, unassigned):
        rack = self.rack
        if not rack.consumer_racks:
            return unassigned
        under, exact = self.under, self.exact
        next_idx = 0
        left = []
        for tp in unassigned:
            consumer = None
            ni = rack.next_rack_consumer(tp, under, next_idx)
            if ni >= 0:
                consumer = under[ni]
                cnt = len(self.assignment[consumer]) + 1
                if cnt >= self.min_q:
                    under.remove(consumer)
                    if cnt < self.max_q and self.current < self.expected:
                        exact.append(consumer)
                else:
                    ni += 1
                next_idx = 0 if not under else ni % len(under)
            elif exact:
                fi = rack.next_rack_consumer(tp, exact, 0)
                if fi >= 0:
                    consumer = exact[fi]
                    if len(self.assignment[consumer]) + 1 == self.max_q:
                        del exact[fi]
                        self.current += 1
                        if self.current == self.expected:
                            exact.clear()
            if consumer is not None:
                self._assign_new(tp, consumer)
            else:
                left.append(tp)
        return left

    def _round_robin(self, unassigned):
        under, exact = self.under, self.exact
        it = 0  # position of the LinkedList iterator over `under`
        for tp in unassigned:
            from_iter = True
            if it < len(under):
                consumer = under[it]
                it += 1
            elif not under and not exact:
                raise AssignorError("IllegalStateException: No more unfilled consumers to be assigned.")
            elif not under:
                consumer = exact.pop(0)
                from_iter = False
            else:
                consumer = under[0]
                it = 1
            count = self._assign_new(tp, consumer)
            if count == self.min_q:
                if not from_iter:
                    raise AssignorError("IllegalStateException: iterator remove() without next() in assignRoundRobin")
                it -= 1
                del under[it]
                exact.append(consumer)
            elif count == self.max_q:
                self.current += 1

    def _verify(self):
        if self.under:
            if self.current != self.expected:
                raise AssignorError("IllegalStateException: We haven't reached the expected number of members with "
                                    "more than the minQuota partitions, but no more partitions to be assigned")
            for c in self.under:
                if len(self.assignment[c]) != self.min_q:
                    raise AssignorError(f"IllegalStateException: Consumer: [{c}] doesn't reach minQuota partitions, "
                                        "and no more partitions to be assigned")


_MEMBER_OF_KEY = itemgetter(2)


class _SortedMembers:
    """`TreeSet<String>` ordered by (current assignment size, member id)."""

    def __init__(self, sizes: dict[str, list]):
        self.sizes = sizes
        self.keys: list[tuple] = []
        self._id_keys = {c: java_str_key(c) for c in sizes}  # String.compareTo keys, once per member

    def _key(self, c):
        return (len(self.sizes[c]), self._id_keys[c], c)

    def fill(self, members) -> None:
        """`add` of each of `members` (distinct) to an empty set."""
        self.keys = sorted(map(self._key, members))

    def add(self, c):
        k = self._key(c)
        i = bisect.bisect_left(self.keys, k)
        if i == len(self.keys) or self.keys[i] != k:
            self.keys.insert(i, k)

    def remove(self, c):
        lst = self.sizes.get(c)
        if lst is None:
            return
        k = self._key(c)
        i = bisect.bisect_left(self.keys, k)
        if i < len(self.keys) and self.keys[i] == k:
            del self.keys[i]

    def __iter__(self):
        """Members in order. Iterates the live list: callers stop iterating once they modify it."""
        return map(_MEMBER_OF_KEY, self.keys)

    def first(self):
        return self.keys[0][2]

    def last(self):
        return self.keys[-1][2]


class _General:
    def __init__(self, counts, rack: _RackInfo, current: dict[str, list[TopicPartition]],
                 current_order: list[str], subs: dict[str, MemberSpec], member_data: dict[str, MemberData],
                 max_gen: int, tp_hash, owners: dict[TopicPartition, str] | None = None):
        self.counts = counts
        self.rack = rack
        self.subs = subs
        self.member_data = member_data
        self.max_gen = max_gen
        self.total = sum(counts.values())
        self.current = {c: current[c] for c in current_order}
        self.topic_consumers: dict[str, list[str]] = {t: [] for t in counts}
        self.consumer_topics: dict[str, list[str]] = {}
        for c, m in subs.items():
            lst = [t for t in m.topics if t in counts]
            self.consumer_topics[c] = lst
            for t in lst:
                self.topic_consumers[t].append(c)
            self.current.setdefault(c, [])
        self.consumer_topic_sets = {c: set(ts) for c, ts in self.consumer_topics.items()}
        # getMaxAssignmentSize: partitions of all subscribed existing topics.
        self.max_size = {c: sum(map(counts.__getitem__, ts)) for c, ts in self.consumer_topics.items()}
        # partition -> consumer of `current` (its iteration order is never used)
        self.pc: dict[TopicPartition, str] = owners if owners is not None else {}
        if owners is None:
            for c, owned in self.current.items():
                self.pc.update(zip(owned, repeat(c)))
        topics = sorted(self.topic_consumers, key=lambda t: (len(self.topic_consumers[t]), java_str_key(t)))
        self.sorted_all = list(chain.from_iterable(zip(repeat(t), range(counts[t])) for t in topics))
        self.sorted = _SortedMembers(self.current)
        self.revocation_required = False
        self.moves = PartitionMovements(tp_hash)
        self._balanced_cache = None

    def build(self):
        prev: dict[TopicPartition, tuple[str, int]] = {}
        for c in self.subs:  # prepopulateCurrentAssignments
            parts, gen = self.member_data[c]
            if gen is not None and gen < self.max_gen:
                self._update_prev(prev, parts, c, gen)
            elif gen is None and self.max_gen > DEFAULT_GENERATION:
                self._update_prev(prev, parts, c, DEFAULT_GENERATION)
        assigned = self._assign_owned()
        unassigned = list(filterfalse(set(assigned).__contains__, self.sorted_all))
        self.sorted.fill(self.current)
        self._balance(prev, unassigned)
        return self.current

    @staticmethod
    def _update_prev(prev, parts, consumer, gen):
        for tp in parts:
            old = prev.get(tp)
            if old is None or gen > old[1]:
                prev[tp] = (consumer, gen)

    def _assign_owned(self):
        assigned = []
        rack_aware = bool(self.rack.consumer_racks)
        for c, lst in self.current.items():
            if not rack_aware and self.consumer_topic_sets[c].issuperset(map(_TOPIC, lst)):
                assigned += lst  # every partition is of a subscribed existing topic: all kept
                continue
            m = self.subs[c]
            keep = []
            for tp in lst:
                if tp[0] not in self.topic_consumers:
                    self.pc.pop(tp, None)
                elif tp[0] not in m.topics or self.rack.mismatch(c, tp):
                    self.revocation_required = True  # stays in pc on purpose (as in Java)
                else:
                    keep.append(tp)
                    assigned.append(tp)
            lst[:] = keep
        return assigned


    def _maybe_assign(self, parts, rack, remove):
        left = []
        for tp in parts:
            if not self.topic_consumers[tp[0]]:
                left.append(tp)
                continue
            c = self._least_loaded_taker(tp, rack)
            if c is not None:
                self.sorted.remove(c)
                self.current[c].append(tp)
                self.pc[tp] = c
                self.sorted.add(c)
            if not (c is not None and remove):
                left.append(tp)
        return left

    def _least_loaded_taker(self, tp: TopicPartition, rack: _RackInfo | None) -> str | None:
        t = tp[0]
        sets = self.consumer_topic_sets
        for c in self.sorted:
            if t in sets[c] and (rack is None or not rack.mismatch(c, tp)):
                return c
        return None

    def _can_consumer(self, c):
        lst = self.current[c]
        if len(lst) < self.max_size[c]:
            return True
        return any(len(self.topic_consumers[tp[0]]) >= 2 for tp in lst)

    def _balance(self, prev, unassigned):
        initializing = len(self.current[self.sorted.last()]) == 0 if self.sorted.keys else True
        to_assign = unassigned
        if self.rack.consumer_racks:
            to_assign = self._maybe_assign(list(unassigned), self.rack, True)
        self._maybe_assign(to_assign, None, False)
        fixed_topics = {t for t, cs in self.topic_consumers.items() if len(cs) < 2}
        if fixed_topics:
            self.sorted_all = [tp for tp in self.sorted_all if tp[0] not in fixed_topics]
            unassigned = [tp for tp in unassigned if tp[0] not in fixed_topics]
        fixed: dict[str, list[TopicPartition]] = {}
        for c in list(self.consumer_topics):
            if not self._can_consumer(c):
                self.sorted.remove(c)
                fixed[c] = self.current.pop(c)
        pre = {c: list(lst) for c, lst in self.current.items()}
        pre_pc = dict(self.pc)
        if not self.revocation_required:
            self._perform(unassigned, prev)
        performed = self._perform(self.sorted_all, prev)
        if not initializing and performed and _score(self.current) >= _score(pre):
            self.current = {c: list(lst) for c, lst in pre.items()}
            self.pc = pre_pc
        for c, lst in fixed.items():
            self.current[c] = lst

    def _is_balanced(self):
        if self._balanced_cache is not None:
            return self._balanced_cache
        res = self._compute_balanced()
        self._balanced_cache = res
        return res

    def _compute_balanced(self) -> bool:
        """`isBalanced`. Java walks every partition of every subscribed topic per consumer; whether
        some owner of a topic holds more than `count + 1` only needs the topic's largest owner,
        computed once per topic and call (a C-level max) instead of once per consumer and partition.
        (The consumer's own partitions can be included: its size is `count`, never a violation.)"""
        keys = self.sorted.keys
        if not keys:
            raise AssignorError("NoSuchElementException in AbstractStickyAssignor.isBalanced")
        cur = self.current
        if len(cur[keys[0][2]]) >= len(cur[keys[-1][2]]) - 1:
            return True
        sizes = {c: len(lst) for c, lst in cur.items()}
        largest: dict[str, int | None] = {}
        for key in keys:
            c = key[2]
            count = sizes[c]
            if count == self.max_size[c]:
                continue
            for t in self.consumer_topics[c]:
                if t not in largest:
                    largest[t] = self._largest_owner(t, sizes)
                m = largest[t]
                if m is None:
                    if not self._topic_balanced_exact(c, count, t):
                        return False
                elif count + 1 < m:
                    return False
        return True

    def _largest_owner(self, t: str, sizes: Mapping[Any, int]) -> int | None:
        """Largest assignment among the owners of `t`'s partitions; None if one has no owner in the balance."""
        owners = map(self.pc.get, zip(repeat(t), range(self.counts[t])))
        try:
            return max(map(sizes.__getitem__, owners))
        except KeyError:
            return None

    def _topic_balanced_exact(self, c: str, count: int, t: str) -> bool:
        """Java's per-partition walk, for a topic with an unowned partition: the NPE where Java meets it."""
        for p in range(self.counts[t]):
            other = self.pc.get((t, p))
            if other == c:
                continue
            other_list = self.current.get(other)  # type: ignore[arg-type]
            if other_list is None:
                raise AssignorError("NullPointerException in AbstractStickyAssignor.isBalanced")
            if count + 1 < len(other_list):
                return False
        return True

    def _perform(self, parts, prev) -> bool:
        performed = False
        rack = self.rack
        while True:
            modified = False
            for tp in parts:
                if self._is_balanced():
                    break
                consumer = self.pc.get(tp)
                # Every partition balanced here is assigned (topics nobody can take were left out).
                assert consumer is not None
                size = len(self.current[consumer])
                prev_owner = prev.get(tp)
                if prev_owner is not None:
                    prev_list = self.current.get(prev_owner[0])
                    if prev_list is None:
                        raise AssignorError("NullPointerException in AbstractStickyAssignor.performReassignments "
                                            f"(previous owner {prev_owner[0]} not participating)")
                    if size > len(prev_list) + 1:
                        self._reassign_to(tp, prev_owner[0])
                        performed = modified = True
                        continue
                c_rack = rack.consumer_racks.get(consumer)
                p_racks = rack.partition_racks.get(tp)
                found = False
                if c_rack is not None and p_racks and c_rack in p_racks:
                    for other in self.topic_consumers[tp[0]]:
                        o_rack = rack.consumer_racks.get(other)
                        if o_rack is None or o_rack not in p_racks:
                            continue
                        if size > len(self.current[other]) + 1:
                            self._reassign(tp)
                            performed = modified = found = True
                            break
                if not found and self._has_lighter_subscriber(tp[0], size):
                    self._reassign(tp)
                    performed = modified = True
            if not modified:
                return performed

    def _has_lighter_subscriber(self, t: str, size: int) -> bool:
        """Some consumer of `t` holds fewer than `size - 1` partitions.

        Java walks the subscribers for the first one; only the least loaded one matters, found by a
        C-level min. A subscriber outside the balance (not in `current`) fails Java's walk where it
        is met, so then the walk itself runs."""
        cur = self.current
        try:
            return size > min(map(len, map(cur.__getitem__, self.topic_consumers[t]))) + 1
        except KeyError:
            return any(size > len(cur[other]) + 1 for other in self.topic_consumers[t])

    def _reassign(self, tp):
        t = tp[0]
        new = None
        for c in self.sorted:
            if t in self.consumer_topic_sets[c]:
                new = c
                break
        if new is None:
            raise AssignorError(f"AssertionError: no consumer to take {tp}")
        self._reassign_to(tp, new)

    def _reassign_to(self, tp, new):
        old = self.pc.get(tp)
        self._process(self._actual_to_move(tp, old, new), new)

    def _actual_to_move(self, tp, old, new):
        by_topic = self.moves.by_topic.get(tp[0])
        if by_topic is None:
            return tp
        rec = self.moves.by_partition.get(tp)
        if rec is not None:
            old = rec[0]
        s = by_topic.get((new, old))
        if s is None:
            return tp
        return s.first()

    def _process(self, tp, new):
        self._balanced_cache = None
        old = self.pc.get(tp)
        self.sorted.remove(old)
        self.sorted.remove(new)
        if tp in self.moves.by_partition:
            existing = self.moves.remove(tp)
            if existing[0] != new:
                self.moves.add(tp, (existing[0], new))
        else:
            self.moves.add(tp, (old, new))
        _remove_first(self.current[old], tp)
        self.current[new].append(tp)
        self.pc[tp] = new
        self.sorted.add(new)
        self.sorted.add(old)


def _score(assignment: dict[str, list]) -> int:
    sizes = sorted(len(v) for v in assignment.values())
    n = len(sizes)
    return sum(s * (2 * i - n + 1) for i, s in enumerate(sizes))


def _assign(problem: Problem, cooperative: bool) -> dict[str, list[TopicPartition]]:
    order = member_iteration_order(problem)
    by_id = problem.member_map
    subs = {mid: by_id[mid] for mid in order}
    # Subscribed topics that exist with partitions, in first-subscribed order.
    existing = problem.topics
    subscribed = dict.fromkeys(chain.from_iterable(m.topics for m in subs.values()))
    counts = {t: existing[t] for t in subscribed if existing.get(t)}
    read = _member_data_cooperative if cooperative else _member_data_sticky
    member_data = {mid: read(m) for mid, m in subs.items()}  # decoded once, used by both passes
    rack = _RackInfo(problem, counts, order)
    equal, owned, multi, max_gen, owners = _all_subscriptions_equal(subs, set(counts), member_data)
    # consumerToOwnedPartitions is a HashMap<String, ...> filled in subscription order.
    owned_order = string_hashmap_order(order)
    if equal:
        builder = _Constrained(counts, rack, owned, owned_order, multi)
        result = builder.build()
        transferring = builder.transferring
    else:
        topic_hash = dict(zip(counts, string_hashes(list(counts))))  # String.hashCode once per topic, not per move

        def tp_hash(tp: TopicPartition) -> int:  # TopicPartition.hashCode
            return to_int32(31 * (31 + tp[1]) + topic_hash[tp[0]])
        result = None
        if not rack.consumer_racks and native.sticky_general_assign is not None:
            result = _general_native(counts, owned, owned_order, subs, member_data, max_gen, topic_hash)
        if result is None:
            result = _General(counts, rack, owned, owned_order, subs, member_data, max_gen, tp_hash, owners).build()
        transferring = None
    if cooperative:
        if transferring is None:
            transferring = _compute_transferring(subs, result)
        for tp, c in transferring.items():
            _remove_first(result[c], tp)
    return result


def _general_native(counts: dict[str, int], owned: dict[str, list[TopicPartition]], owned_order: list[str],
                    subs: dict[str, MemberSpec], member_data: dict[str, MemberData], max_gen: int,
                    topic_hash: dict[str, int]) -> dict[str, list[TopicPartition]] | None:
    """`_General(...).build()` by the compiled core (native/src/sticky.rs) for a group without
    rack-aware assignment: the builder's work is per partition and move, a few times Java's in
    Python. None where the core declines (Java would throw, or unusual input): Python then runs."""
    core = native.sticky_general_assign
    assert core is not None
    index = {c: i for i, c in enumerate(owned_order)}
    return core(owned_order, [owned[c] for c in owned_order], [index[c] for c in subs],
                [subs[c].topics for c in owned_order], [member_data[c] for c in owned_order], max_gen,
                list(counts.items()), [topic_hash[t] for t in counts])


def _compute_transferring(subs, result):
    """Partitions newly assigned to one member that another one owned: those move in the next round."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for c, assigned in result.items():
        owned = subs[c].owned
        if assigned == owned:
            continue  # kept exactly what it owned: nothing added, nothing revoked
        added.update(zip(filterfalse(set(owned).__contains__, assigned), repeat(c)))
        revoked.update(filterfalse(set(assigned).__contains__, owned))
    return {tp: c for tp, c in added.items() if tp in revoked}


def assign_sticky(problem: Problem) -> dict[str, list[TopicPartition]]:
    return _assign(problem, cooperative=False)


def assign_cooperative_sticky(problem: Problem) -> dict[str, list[TopicPartition]]:
    return _assign(problem, cooperative=True)
