"""Replay one group's real history under an assignor, generation by generation.

The same steps (members, subscriptions, partition counts) are handed to the assignor with its
protocol's revocation behaviour (see `protocols`). Each replayed round reports:

* moved: partitions whose owner changes (static members are identified by instance id);
* revoked: eager = everything a surviving member owned; otherwise only what it gives up;
* paused: partitions nobody consumes while the round runs. Eager: every partition of the
  group. Cooperative: partitions without a surviving owner at the round's start (a departed
  member's, and in a follow-up round the ones revoked at the end of the first). KIP-848 and
  central hand-off: partitions changing owner (revoke, then hand over) and orphaned ones;
* stop-the-world partition-seconds = paused × the round's duration (the real episode's);
* balance (max − min partitions per member), idle members;
* duplicate exposure (records): revoked × commit interval / 2 × records per partition per
  second: what is consumed twice if the revoking members do not commit on revocation (the
  uncommitted backlog of a partition is on average half a commit interval). Departed
  members' partitions are the same under every assignor and are not counted.

The real history itself (`actual`) is measured the same way with the group's real protocol,
so the two sit side by side.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pipelines.assignors import AssignorError, MemberSpec, Problem, assign_problem
from pipelines.assignors.historical import handoff_plan
from pipelines.assignors.javahash import uuid_from_string
from pipelines.assignors.metrics import generation_metrics, owner_key
from pipelines.assignors.sticky import encode_sticky_user_data

from .history import GroupHistory, Step, StepMember, TopicPartition
from .protocols import CONSUMER, COOPERATIVE, EAGER, HANDOFF, protocol_of

ACTUAL = "actual"
MAX_FOLLOW_UPS = 3  # cooperative-sticky settles in one follow-up; more means something is wrong


@dataclass
class Round:
    assignor: str
    protocol: str
    step: int
    generation: int
    phase: str
    """"rebalance" (first round of a step), "followup" (cooperative second round), "reconcile" (KIP-848)."""
    ts_ms: int | None
    members: int
    partitions: int
    assigned: int
    moved: int
    revoked: int
    paused: int
    duration_ms: float | None
    duration_source: str
    stw_partition_seconds: float | None
    balance: int
    max_per_member: int
    min_per_member: int
    idle_members: int
    dup_exposure_records: float | None
    assignment: dict[str, list[TopicPartition]]
    matches_actual: bool | None = None
    divergence: str | None = None
    error: str | None = None
    complete: bool = True
    """The assignment after this round covers every partition exactly once (False in the middle
    of a cooperative handover, or where the assignor refused)."""


@dataclass
class Replay:
    assignor: str
    protocol: str
    rounds: list[Round]
    divergences: list[dict] = field(default_factory=list)


def _universe(step: Step) -> list[TopicPartition]:
    topics = sorted({t for m in step.members for t in m.topics})
    return [(t, p) for t in topics for p in range(step.topics.get(t, 0))]


def _signature(step: Step):
    return (tuple((m.member_id, tuple(m.topics)) for m in step.members), tuple(sorted(step.topics.items())))


def _problem(step: Step, members: list[MemberSpec]) -> Problem:
    topics = {t: n for t, n in step.topics.items() if n > 0}
    ids = {t: uuid_from_string(i) for t, i in step.topic_ids.items() if t in topics}
    return Problem(members=members, topics=topics, topic_ids=ids)


class _State:
    """What the replayed group owns between rounds (member id → partitions, in assignor order)."""

    def __init__(self) -> None:
        self.owned: dict[str, list[TopicPartition]] = {}
        self.instances: dict[str, str | None] = {}
        self.generation = 0

    def carried(self, m: StepMember) -> list[TopicPartition]:
        """What a member of the new step owns going in: its own partitions, or for a static
        member back with a new member id, its instance's (the coordinator hands them over)."""
        if m.member_id in self.owned:
            return list(self.owned[m.member_id])
        if m.instance_id is not None:
            for mid, inst in self.instances.items():
                if inst == m.instance_id:
                    return list(self.owned.get(mid, []))
        return []

    def owners(self, step: Step) -> dict[TopicPartition, str]:
        """Partition → owner key, for owners that survive into `step` (others' partitions are orphaned)."""
        alive = {owner_key(m.member_id, m.instance_id) for m in step.members}
        out = {}
        for mid, parts in self.owned.items():
            k = owner_key(mid, self.instances.get(mid))
            if k in alive:
                for tp in parts:
                    out[tp] = k
        return out

    def set(self, step: Step, assignment: dict[str, list[TopicPartition]]) -> None:
        self.owned = {m.member_id: list(assignment.get(m.member_id, [])) for m in step.members}
        self.instances = {m.member_id: m.instance_id for m in step.members}
        self.generation += 1


def _measure(hist: GroupHistory, assignor: str, protocol: str, index: int, step: Step, phase: str,
             state: _State, assignment: dict[str, list[TopicPartition]], duration_ms, duration_source,
             paused_override: set | None = None) -> Round:
    members = [MemberSpec(member_id=m.member_id, instance_id=m.instance_id, topics=m.topics) for m in step.members]
    problem = _problem(step, members)
    gm = generation_metrics(problem, assignment, state.owned, state.instances, cooperative=protocol != EAGER)
    universe = _universe(step)
    before = state.owners(step)
    if protocol == EAGER:
        paused = set(universe) | set(before)
    elif protocol == COOPERATIVE:
        paused = {tp for tp in universe if tp not in before}
    else:
        now = {tp: owner_key(m.member_id, m.instance_id) for m in step.members for tp in assignment.get(m.member_id, [])}
        paused = {tp for tp in universe if before.get(tp) is None or before.get(tp) != now.get(tp)}
        if paused_override is not None:
            paused |= paused_override
    stw = None if duration_ms is None else len(paused) * float(duration_ms) / 1000.0
    dup = None
    if hist.commit_interval_ms is not None and hist.records_per_partition_s is not None:
        dup = gm.revoked * (hist.commit_interval_ms / 2000.0) * hist.records_per_partition_s
    given = [tp for parts in assignment.values() for tp in parts]
    complete = len(given) == len(set(given)) and set(given) == set(universe)
    return Round(
        assignor=assignor, protocol=protocol, step=index, generation=step.generation, phase=phase, ts_ms=step.ts_ms,
        members=len(step.members), partitions=len(universe), assigned=gm.assigned_partitions, moved=gm.moved,
        revoked=gm.revoked, paused=len(paused), duration_ms=duration_ms, duration_source=duration_source,
        stw_partition_seconds=stw, balance=gm.balance, max_per_member=gm.max_per_member,
        min_per_member=gm.min_per_member, idle_members=gm.idle_members, dup_exposure_records=dup,
        assignment={m.member_id: list(assignment.get(m.member_id, [])) for m in step.members}, complete=complete,
    )


def _real_protocol(hist: GroupHistory) -> str:
    if hist.kind == "consumer":
        return CONSUMER
    if hist.real_assignor is not None:
        return protocol_of(hist.real_assignor)
    # An unknown classic protocol: measured as eager unless its name says cooperative.
    proto = next((s.protocol for s in hist.steps if s.protocol), "") or ""
    return COOPERATIVE if "cooperative" in proto else EAGER


def _is_rewrite(hist: GroupHistory, i: int) -> bool:
    """A generation written again with the same number (a static member replaced): no rebalance."""
    return i > 0 and hist.steps[i].generation == hist.steps[i - 1].generation and hist.kind == "classic"


def _is_carried_over(hist: GroupHistory, i: int) -> bool:
    """The state a protocol conversion carried over (`GroupHistory.carried_over`): no rebalance."""
    return i == 0 and hist.carried_over


def _is_real_followup(hist: GroupHistory, i: int) -> bool:
    """A real cooperative generation whose membership did not change: the second round of a handover."""
    if not (i > 0 and hist.kind == "classic" and _real_protocol(hist) == COOPERATIVE
            and _signature(hist.steps[i]) == _signature(hist.steps[i - 1])):
        return False
    # Only a generation that left partitions unassigned calls for a follow-up; the same
    # membership after a complete one is a rebalance of its own (e.g. enforceRebalance).
    prev = hist.steps[i - 1]
    given = {tp for m in prev.members for tp in m.assigned}
    return given != set(_universe(prev))


def actual(hist: GroupHistory) -> Replay:
    """What really happened, measured like a replay (protocol = the group's real one)."""
    protocol = _real_protocol(hist)
    state = _State()
    rounds = []
    for i, step in enumerate(hist.steps):
        real = {m.member_id: list(m.assigned) for m in step.members}
        if _is_rewrite(hist, i) or _is_carried_over(hist, i):
            state.set(step, real)
            continue
        phase = "followup" if _is_real_followup(hist, i) else ("reconcile" if protocol == CONSUMER else "rebalance")
        rounds.append(_measure(hist, ACTUAL, protocol, i, step, phase, state, real, step.duration_ms, step.duration_source))
        state.set(step, real)
    return Replay(assignor=ACTUAL, protocol=protocol, rounds=rounds)


def _same(a: dict[str, list[TopicPartition]], b: dict[str, list[TopicPartition]]) -> bool:
    keys = set(a) | set(b)
    return all(sorted(a.get(k, [])) == sorted(b.get(k, [])) for k in keys)


def _diff(replayed: dict, real: dict) -> str:
    parts = []
    for mid in sorted(set(replayed) | set(real)):
        x, y = sorted(replayed.get(mid, [])), sorted(real.get(mid, []))
        if x != y:
            parts.append(f"{mid}: replay {_fmt(x)} real {_fmt(y)}")
    return "; ".join(parts)


def _fmt(parts: list[TopicPartition]) -> str:
    return "[" + ",".join(f"{t}-{p}" for t, p in parts) + "]"


def _assign(assignor: str, protocol: str, step: Step, state: _State, targets: dict[str, list]) -> tuple[dict, set | None]:
    """One assignor call with the protocol's inputs. Returns (assignment, extra paused set)."""
    specs = []
    for m in step.members:
        carried = state.carried(m)
        spec = MemberSpec(member_id=m.member_id, instance_id=m.instance_id, topics=list(m.topics))
        if protocol == COOPERATIVE:
            # onJoinPrepare revokes the partitions of topics the member no longer subscribes to.
            spec.owned = [tp for tp in carried if tp[0] in m.topics]
            spec.generation = state.generation if (m.member_id in state.owned or carried) else None
        elif assignor == "sticky" and (m.member_id in state.owned or carried):
            # Eager members revoke before joining; the sticky assignor keeps the previous
            # assignment in the subscription's user data instead.
            spec.user_data = encode_sticky_user_data(carried, state.generation)
        elif protocol == CONSUMER:
            prev = targets.get(m.member_id)
            if prev is None and m.instance_id is not None:
                prev = next((v for k, v in targets.items() if state.instances.get(k) == m.instance_id), None)
            spec.target = _runs(prev) if prev is not None else None
        elif protocol == HANDOFF:
            spec.owned = carried
        specs.append(spec)
    problem = _problem(step, specs)
    if protocol == HANDOFF:
        target, paused = handoff_plan(problem)
        for s in specs:
            target.setdefault(s.member_id, [])
        return target, paused
    return assign_problem(assignor, problem), None


def _runs(parts: list[TopicPartition]) -> list[tuple[str, list[int]]]:
    out: list[tuple[str, list[int]]] = []
    for t, p in parts:
        if out and out[-1][0] == t:
            out[-1][1].append(p)
        else:
            out.append((t, [p]))
    return out


def replay(hist: GroupHistory, assignor: str, follow_real: bool = False) -> Replay:
    """Hand `hist`'s steps to `assignor`, round by round, with its protocol's behaviour.

    `follow_real`: start every step from what the group really owned (not from the replay's
    own previous round), so each generation's decision is compared on its own: a divergence
    then does not carry over into the following generations."""
    protocol = protocol_of(assignor)
    check = assignor == hist.real_assignor
    real_coop = _real_protocol(hist) == COOPERATIVE and hist.kind == "classic"
    state = _State()
    targets: dict[str, list[TopicPartition]] = {}
    rounds: list[Round] = []
    divergences: list[dict] = []
    pending = False  # a cooperative handover waits for its follow-up round
    for i, step in enumerate(hist.steps):
        real = {m.member_id: list(m.assigned) for m in step.members}
        if follow_real and i > 0 and not pending:
            prev = hist.steps[i - 1]
            generation = state.generation
            state.set(prev, {m.member_id: list(m.assigned) for m in prev.members})
            state.generation = generation
            targets = {m.member_id: list(m.assigned) for m in prev.members}
        if _is_carried_over(hist, i):
            # Every assignor starts from what the members owned when the group converted.
            state.set(step, real)
            targets = {m.member_id: list(m.assigned) for m in step.members}
            continue
        if _is_rewrite(hist, i):
            # The coordinator hands the replaced static member its predecessor's assignment.
            state.set(step, {m.member_id: state.carried(m) for m in step.members})
            targets = {m.member_id: state.owned[m.member_id] for m in step.members}
            state.generation -= 1
            if check and not _same(state.owned, real):
                divergences.append({"generation": step.generation, "phase": "rewrite", "kind": "assignment",
                                    "detail": _diff(state.owned, real)})
            continue
        followup_step = _is_real_followup(hist, i)
        if followup_step and not (protocol == COOPERATIVE and pending):
            # The real group needed this second round for its cooperative handover; this
            # assignor's protocol does not (or its handover was already complete).
            if check:
                divergences.append({"generation": step.generation, "phase": "followup", "kind": "followup-not-needed",
                                    "detail": "the group had a follow-up generation the replay did not need"})
            continue
        if pending and not followup_step:
            _follow_up(hist, assignor, protocol, rounds, state, targets, check, divergences)
            pending = False
        phase = "followup" if followup_step else ("reconcile" if protocol == CONSUMER else "rebalance")
        try:
            assignment, extra = _assign(assignor, protocol, step, state, targets)
            error = None
        except AssignorError as exc:
            # Kafka would fail this rebalance (e.g. uniform 3.9's movement-record bug): the
            # target stays what it was; members keep what they own.
            assignment = {m.member_id: [tp for tp in state.carried(m)] for m in step.members}
            extra, error = None, str(exc)
        r = _measure(hist, assignor, protocol, i, step, phase, state, assignment, step.duration_ms,
                     step.duration_source, extra)
        r.error = error
        if error:
            r.complete = False
        if check:
            r.matches_actual = _same(assignment, real)
            if not r.matches_actual:
                r.divergence = _diff(assignment, real)
                divergences.append({"generation": step.generation, "phase": phase, "kind": "assignment",
                                    "detail": r.divergence})
        rounds.append(r)
        state.set(step, assignment)
        targets = {m.member_id: list(assignment.get(m.member_id, [])) for m in step.members}
        pending = protocol == COOPERATIVE and not r.complete and error is None
        if pending and i + 1 < len(hist.steps) and not _is_real_followup(hist, i + 1) and _overlaps(step, hist.steps[i + 1]):
            # The next membership change started before this handover's follow-up could have
            # finished: the two are one rebalance (as the real group had them), not two.
            pending = False
            continue
        if pending and check and real_coop and not (i + 1 < len(hist.steps) and _is_real_followup(hist, i + 1)):
            divergences.append({"generation": step.generation, "phase": "followup", "kind": "followup-extra",
                                "detail": "the replay needed a follow-up generation the group did not have"})
    if pending:
        _follow_up(hist, assignor, protocol, rounds, state, targets, check, divergences)
    return Replay(assignor=assignor, protocol=protocol, rounds=rounds, divergences=divergences)


def _overlaps(step: Step, nxt: Step) -> bool:
    """Did `nxt`'s rebalance start inside the follow-up window after `step` (one more round of
    about `step`'s duration)? Unknown times: no."""
    if step.ts_ms is None or nxt.ts_ms is None:
        return False
    start_next = nxt.ts_ms - (nxt.duration_ms or 0.0)
    return start_next <= step.ts_ms + (step.duration_ms or 0.0)


def _follow_up(hist, assignor, protocol, rounds, state, targets, check, divergences) -> None:
    """Synthetic follow-up rounds of a cooperative handover the real history did not have.

    Same members and subscriptions as the round that revoked; its duration is taken to be that
    round's (another join + sync with the same members)."""
    last = rounds[-1]
    step = hist.steps[last.step]
    for _ in range(MAX_FOLLOW_UPS):
        assignment, _extra = _assign(assignor, protocol, step, state, targets)
        r = _measure(hist, assignor, protocol, last.step, step, "followup", state, assignment, last.duration_ms,
                     f"estimate: same as generation {step.generation}")
        rounds.append(r)
        state.set(step, assignment)
        if r.complete:
            return
    raise AssignorError(f"{assignor}: cooperative handover after generation {step.generation} did not settle "
                        f"in {MAX_FOLLOW_UPS} follow-up rounds")


def replay_all(hist: GroupHistory, assignors: list[str]) -> list[Replay]:
    """The actual history plus one replay per assignor (the group's own assignor always included)."""
    names = list(dict.fromkeys(assignors))
    if hist.real_assignor is not None and hist.real_assignor not in names:
        names.append(hist.real_assignor)
    return [actual(hist)] + [replay(hist, a) for a in names]
