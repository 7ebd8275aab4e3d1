"""The discrete-event simulation: consumer groups on one cluster, in time order.

One heap of timed actions for all groups, so that the records of groups sharing a
`__consumer_offsets` partition interleave, and every log line and record is written at its
own time (logs and partitions stay in time order). State per group is small (members,
owners, committed offsets); records, lines and truth rows are streamed out as they happen.

Classic groups (`Group`) follow the broker's protocol as the recordings show it:
* a change (join, LeaveGroup, session expiry, a poll-timeout leave) logs "Preparing to
  rebalance" and starts a rebalance; changes while one is running join it;
* eager members commit what they own when they revoke, before the new GroupMetadata
  (librdkafka/Java auto-commit in onJoinPrepare); a crashed or stalled member commits
  nothing, so its processed-but-uncommitted offsets are consumed again by the next owner,
  which the ground truth records;
* the leader's SyncGroup persists GroupMetadata with the new generation; a group that empties
  gets one more generation with no members and no protocol; the Java coordinator also writes
  the generation-0 record when it creates a group;
* cooperative-sticky takes two generations to move a partition (the assignor withholds it
  until its owner revoked it and rejoined);
* a static member restarted within its session timeout re-writes the same generation with
  its new member id and no rebalance.
KIP-848 groups are in `kip848.py`.
"""
from __future__ import annotations

import heapq
import random
from typing import Any

from pipelines.assignors import MemberSpec, Problem, assign_problem

from .config import Release, SimConfig
from .ids import classic_member_id, partition_for
from .loglines import LineFormatter
from .output import Output
from .records import RecordFactory


def runs(parts) -> list:
    """[(t, p), ...] -> [[t, [p, ...]], ...] sorted by topic then partition."""
    by: dict[str, list[int]] = {}
    for t, p in sorted(parts):
        by.setdefault(t, []).append(p)
    return [[t, ps] for t, ps in by.items()]


class GroupTraffic:
    """What a classic group (`Group`) and a KIP-848 one (`kip848.ConsumerGroup`) share: where
    the group lives, its topics, the messages produced on them, its commits' keys and the
    state of who owns and committed what."""

    def __init__(self, sim: Sim, gid: str):
        cfg = sim.cfg
        self.sim = sim
        self.gid = gid
        self.p = partition_for(gid, cfg.offsets_partitions)
        self.f = sim.fmt_for(self.p)
        self.topics = {f"{gid}-t{j}": cfg.partitions_per_topic for j in range(cfg.topics_per_group)}
        self.owner: dict = {}
        self.committed: dict = {}
        self.keys: dict = {}
        self.lost: dict = {}    # (topic, partition) -> (processed up to, cause, member) of a member that died
        self.ep: dict[str, Any] | None = None  # the episode being built
        self.start = 0
        self.clients = 0
        self.closing = False
        self.rate = cfg.messages_per_s

    def hw(self, ms: int) -> int:
        """Messages produced on each partition by `ms` (the consumer keeps up with it)."""
        return max(0, int((ms - self.start) * self.rate / 1000))

    def key(self, tp):
        k = self.keys.get(tp)
        if k is None:
            k = self.keys[tp] = self.sim.rf.commit_key(self.gid, tp[0], tp[1])
        return k


class Member:
    __slots__ = ("member_id", "client_id", "instance_id", "client_host", "session_timeout", "rebalance_timeout",
                 "generation", "token", "alive", "stalled_at", "owned", "pid", "txn_seq")

    def __init__(self, member_id, client_id, instance_id, host, session_timeout, rebalance_timeout):
        self.member_id = member_id
        self.client_id = client_id
        self.instance_id = instance_id
        self.client_host = host
        self.session_timeout = session_timeout
        self.rebalance_timeout = rebalance_timeout
        self.generation = -1
        self.token = 0          # bumped to cancel this member's pending timers
        self.alive = True       # False once crashed / stalled (stops committing)
        self.stalled_at = None
        self.owned: list = []   # [(topic, partition)] as the client holds them
        self.pid = -1
        self.txn_seq = 0

    def as_dict(self) -> dict:
        return {"member_id": self.member_id, "client_id": self.client_id, "instance_id": self.instance_id,
                "client_host": self.client_host, "session_timeout": self.session_timeout,
                "rebalance_timeout": self.rebalance_timeout}


class Sim:
    def __init__(self, cfg: SimConfig):
        self.rel: Release = cfg.validate()
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.out = Output(cfg, self.rel)
        self.rf = RecordFactory(self.rel)
        self.fmt = {b: LineFormatter(self.rel, b) for b in self.out.brokers}
        self.heap: list = []
        self.seq = 0
        self.now = cfg.start_ms
        self.end_ms = cfg.start_ms + int(cfg.minutes * 60_000)
        self.stats = {"generations": 0, "episodes": 0, "reconsumed_records": 0, "groups": 0}
        self.next_pid = 1000
        self.groups: list = []

    # ------------------------------------------------------------------ scheduling
    def at(self, ms: int, fn, *args) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (int(ms), self.seq, fn, args))

    def run(self) -> dict:
        from .kip848 import ConsumerGroup

        cfg = self.cfg
        t0 = cfg.start_ms
        for b in self.out.brokers:
            self.out.lines(b, self.fmt[b].startup(t0 - 5000, self.out.led_partitions(b)))
        for i in range(cfg.groups):
            gid = f"{cfg.group_prefix}-{i:05d}"
            start = t0 + self.rng.randrange(0, max(1, min(30_000, int(cfg.minutes * 60_000 / 4))))
            g: ConsumerGroup | Group
            if self.rel.supports_kip848 and self.rng.random() < cfg.kip848_fraction:
                g = ConsumerGroup(self, gid, i)
            else:
                g = Group(self, gid, i)
            self.at(start, g.create)
            self.groups.append(g)
            self.stats["groups"] += 1
        while self.heap:
            ms, _, fn, args = heapq.heappop(self.heap)
            self.now = max(self.now, ms)
            fn(*args)
        loaded: dict[int, list] = {}
        for g in self.groups:
            kind, n = ("consumer", g.group_epoch) if hasattr(g, "group_epoch") else ("classic", g.generation)
            loaded.setdefault(g.p, []).append((g.gid, kind, n))
        for b in self.out.brokers:
            f = self.fmt[b]
            self.out.lines(b, f.unload(self.now + 1000, self.out.led_partitions(b), loaded) + f.shutdown(self.now + 1500))
        summary: dict[str, Any] = {"config": {k: v for k, v in vars(cfg).items() if k != "out"},
                                   "kafka_version": self.rel.name, "records": self.out.counts, **self.stats}
        summary["records"]["by_type"] = {str(k): v for k, v in sorted(summary["records"]["by_type"].items())}
        self.out.close(summary)
        return summary

    # ------------------------------------------------------------------ helpers for groups
    def lines(self, partition: int, lines: list[str]) -> None:
        self.out.lines(self.out.leader(partition), lines)

    def fmt_for(self, partition: int) -> LineFormatter:
        return self.fmt[self.out.leader(partition)]

    def exp_delay(self, per_minute: float) -> int:
        return int(self.rng.expovariate(per_minute / 60_000.0)) + 1 if per_minute > 0 else 10**15


class Group(GroupTraffic):
    """A classic-protocol consumer group and its members' clients."""

    def __init__(self, sim: Sim, gid: str, index: int):
        super().__init__(sim, gid)
        cfg = sim.cfg
        rng = sim.rng
        self.assignor = cfg.assignors[index % len(cfg.assignors)]
        self.static = sim.rel.supports_static and rng.random() < cfg.static_fraction
        self.txn = sim.rel.magic >= 2 and rng.random() < cfg.transactional_fraction
        self.all_parts = [(t, q) for t, n in self.topics.items() for q in range(n)]
        self.members: dict[str, Member] = {}
        self.generation = 0
        self.state = "Empty"
        self.rebalancing = False
        self.instances_down: dict[str, int] = {}
        self.leader = None

    # ------------------------------------------------------------------ lifecycle
    def create(self) -> None:
        sim, cfg, rng = self.sim, self.sim.cfg, self.sim.rng
        self.start = sim.now
        sim.out.truth("groups", {"group_id": self.gid, "protocol": "classic", "assignor": self.assignor,
                                 "coordinator_partition": self.p, "broker": sim.out.leader(self.p),
                                 "topics": self.topics, "static": self.static, "transactional": self.txn,
                                 "messages_per_s": self.rate, "commit_interval_ms": cfg.commit_interval_ms,
                                 "start_ms": self.start, "kafka_version": sim.rel.name})
        if sim.rel.java:
            # newEmptyGroupMetadataRecord: generation 0, protocolType "" (new_coordinator_classic).
            sim.out.append(self.p, [(2, sim.rf.group_key(self.gid), sim.rf.group_metadata(
                self.gid, generation=0, protocol_type="", protocol=None, leader=None, state_ts=sim.now,
                members=[]))], sim.now)
        n = rng.randint(cfg.min_members, cfg.max_members)
        for i in range(n):
            sim.at(sim.now + i * rng.randint(5, 120), self.join, None)
        sim.at(sim.now + sim.exp_delay(cfg.churn_per_minute) + 5000, self.churn)
        sim.at(sim.end_ms - rng.randint(0, 5000), self.shutdown)

    def new_member(self, instance_id=None, client_id=None) -> Member:
        cfg = self.sim.cfg
        if client_id is None:
            self.clients += 1
            client_id = f"c{self.clients}"
        mid = classic_member_id(client_id, self.sim.rng, instance_id)
        return Member(mid, client_id, instance_id, f"10.0.{self.clients % 250}.{(hash_index(client_id) % 250) + 1}",
                      cfg.session_timeout_ms, cfg.max_poll_interval_ms)

    def join(self, instance_id=None, client_id=None, reason="not provided") -> None:
        sim = self.sim
        if self.closing:
            return
        if self.static and instance_id is None and client_id is None:
            instance_id = f"{self.gid}-i{self.clients + 1}"
        m = self.new_member(instance_id, client_id)
        state = "PreparingRebalance" if self.rebalancing else self.state
        sim.lines(self.p, self.f.member_join(sim.now, self.p, self.gid, m.member_id, state, instance_id))
        self.members[m.member_id] = m
        self.begin(self.f.reason_join(m.member_id, instance_id, reason), "join", m.member_id)

    # ------------------------------------------------------------------ rebalances
    def begin(self, reason: str, trigger: str, who: str | None) -> None:
        sim = self.sim
        if self.rebalancing:
            if self.ep is not None:
                self.ep["extra_triggers"].append([trigger, who])
            return
        sim.lines(self.p, self.f.prepare(sim.now, self.p, self.gid, self.generation, reason))
        self.rebalancing = True
        self.ep = {"group_id": self.gid, "from_generation": self.generation, "started_at": sim.now,
                   "trigger": trigger, "trigger_member": who, "extra_triggers": [],
                   "members_before": sorted(m for m, o in self.owner_members().items()),
                   "owners_before": dict(self.owner)}
        if self.assignor != "cooperative-sticky":
            sim.at(sim.now + sim.rng.randint(2, 40), self.revoke_all)
        sim.at(sim.now + sim.rng.randint(150, 900), self.complete)

    def owner_members(self) -> dict:
        out = {}
        for mid in self.owner.values():
            out[mid] = True
        return out

    def commit(self, m: Member, parts, ms: int) -> None:
        """One OffsetCommit request of member `m` for `parts` at its current position."""
        if not parts:
            return
        sim = self.sim
        pos = self.hw(m.stalled_at if m.stalled_at is not None else ms)
        if self.txn:
            self.txn_commit(m, parts, pos, ms)
            return
        recs = []
        for tp in parts:
            recs.append((1, self.key(tp), sim.rf.commit_value(pos, ms)))
            self.committed[tp] = pos
        sim.out.append(self.p, recs, ms, base_sequence=0 if sim.rel.java or sim.rel.magic >= 2 else -1)

    def txn_commit(self, m: Member, parts, pos: int, ms: int) -> None:
        """TxnOffsetCommit in a transactional batch, then the transaction marker; every
        `abort_every`-th transaction aborts (its offsets never count, the app seeks back)."""
        sim = self.sim
        if m.pid < 0:
            m.pid = sim.next_pid
            sim.next_pid += 1
        m.txn_seq += 1
        recs = [(1, self.key(tp), sim.rf.commit_value(pos, ms)) for tp in parts]
        sim.out.append(self.p, recs, ms, transactional=True, producer_id=m.pid, producer_epoch=0)
        abort = sim.cfg.abort_every > 0 and m.txn_seq % sim.cfg.abort_every == 0
        sim.at(ms + sim.rng.randint(3, 60), self.txn_marker, m.pid, "ABORT" if abort else "COMMIT",
               list(parts), pos)

    def txn_marker(self, pid, kind, parts, pos) -> None:
        self.sim.out.control(self.p, kind, self.sim.now, pid, 0)
        if kind == "COMMIT":
            for tp in parts:
                self.committed[tp] = max(self.committed.get(tp, 0), pos)

    def revoke_all(self) -> None:
        """Eager protocol: every live member commits what it owns as it revokes (onJoinPrepare)."""
        sim = self.sim
        for m in self.members.values():
            if m.alive and m.owned and m.stalled_at is None:
                self.commit(m, m.owned, sim.now)
                m.owned = []
            elif m.owned:
                m.owned = []

    def problem(self) -> Problem:
        specs = []
        for m in self.members.values():
            specs.append(MemberSpec(member_id=m.member_id, instance_id=m.instance_id, topics=sorted(self.topics),
                                    owned=sorted(m.owned) if self.assignor == "cooperative-sticky" else [],
                                    generation=m.generation if m.generation >= 0 else None))
        return Problem(members=specs, topics=dict(self.topics))

    def complete(self) -> None:
        sim = self.sim
        if not self.rebalancing:
            return
        if not self.members:
            self.become_empty()
            return
        if any(not m.alive for m in self.members.values()):
            # The join phase waits for every known member; a dead one is removed at its
            # session (or poll) expiry, which then lets the rebalance complete.
            sim.at(sim.now + 500, self.complete)
            return
        result = assign_problem(self.assignor, self.problem())
        self.generation += 1
        gen = self.generation
        ms = sim.now
        members = list(self.members.values())
        if self.leader not in self.members:
            self.leader = members[0].member_id
        static = sum(1 for m in members if m.instance_id is not None)
        lines = self.f.stabilized(ms, self.p, self.gid, gen, len(members))
        lines += self.f.assignment_received(ms + 5, self.p, self.gid, self.leader, gen, len(members), static)
        sim.lines(self.p, lines)
        revoking = []
        for m in members:
            new = [tuple(x) for x in result.get(m.member_id, [])]
            if self.assignor == "cooperative-sticky":
                lost = sorted(set(m.owned) - set(new))
                if lost:
                    revoking.append(m)
                    self.commit(m, lost, ms + 6)
            m.owned = new
            m.generation = gen
        self.write_generation(ms + 7)
        # new owners take over; a handover from a member that did not commit is re-consumed
        for m in members:
            for tp in m.owned:
                if tp in self.lost:
                    self.handover(tp, m.member_id, ms)
                self.owner[tp] = m.member_id
        assigned = {tp for m in members for tp in m.owned}
        for tp in list(self.owner):
            if tp not in assigned:
                del self.owner[tp]
        if revoking:
            # Members that revoked rejoin; the follow-up generation hands the partitions over.
            sim.at(ms + sim.rng.randint(50, 300), self.followup, revoking[0].member_id)
            return
        self.finish_episode(ms + 7)

    def followup(self, who: str) -> None:
        sim = self.sim
        if who not in self.members:
            who = next(iter(self.members), who)
        sim.lines(self.p, self.f.prepare(sim.now, self.p, self.gid, self.generation,
                                         self.f.reason_rejoin(who, "need to revoke partitions and re-join")))
        if self.ep is not None:
            self.ep["cooperative_followups"] = self.ep.get("cooperative_followups", 0) + 1
        sim.at(sim.now + sim.rng.randint(100, 500), self.complete)

    def finish_episode(self, ms: int) -> None:
        sim = self.sim
        self.rebalancing = False
        self.state = "Stable"
        ep = self.ep
        self.ep = None
        if ep is not None:
            before = ep.pop("owners_before")
            moved = sum(1 for tp, mid in self.owner.items() if before.get(tp) not in (None, mid))
            ep.update({"to_generation": self.generation, "completed_at": ms,
                       "members_after": sorted(self.members), "partitions_moved": moved,
                       "partitions_revoked": (sum(1 for tp in before) if self.assignor != "cooperative-sticky"
                                              else moved)})
            sim.out.truth("episodes", ep)
            sim.stats["episodes"] += 1
        for m in self.members.values():
            if m.token == 0:
                m.token = 1
                sim.at(ms + sim.rng.randint(100, sim.cfg.commit_interval_ms), self.tick, m.member_id, m.token)

    def write_generation(self, ms: int, rewrite: bool = False) -> None:
        sim = self.sim
        members = list(self.members.values())
        md = []
        for m in members:
            d = m.as_dict()
            ud = ({"_format": "cooperative-sticky", "generation": m.generation}
                  if self.assignor == "cooperative-sticky" and sim.rel.subscription_version < 2 else None)
            d["subscription"] = sim.rf.subscription(list(self.topics), runs(m.owned) if self.assignor ==
                                                    "cooperative-sticky" else [], m.generation, ud)
            d["assignment"] = runs(m.owned)
            md.append(d)
        value = sim.rf.group_metadata(self.gid, generation=self.generation, protocol_type="consumer",
                                      protocol=self.assignor, leader=self.leader,
                                      state_ts=(self.ep or {}).get("started_at", ms), members=md)
        sim.out.append(self.p, [(2, sim.rf.group_key(self.gid), value)], ms,
                       base_sequence=0 if sim.rel.java else -1)
        sim.out.truth("generations", {
            "group_id": self.gid, "generation": self.generation, "ts": ms, "protocol": self.assignor,
            "leader": self.leader, "rewrite": rewrite,
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "instance_id": m.instance_id}
                        for m in members],
            "assignment": {m.member_id: runs(m.owned) for m in members}})
        if not rewrite:
            sim.stats["generations"] += 1

    def become_empty(self) -> None:
        sim = self.sim
        self.generation += 1
        ms = sim.now
        sim.lines(self.p, self.f.group_empty(ms, self.p, self.gid, self.generation))
        sim.out.append(self.p, [(2, sim.rf.group_key(self.gid), sim.rf.group_metadata(
            self.gid, generation=self.generation, protocol_type="consumer", protocol=None, leader=None,
            state_ts=ms, members=[]))], ms, base_sequence=0 if sim.rel.java else -1)
        sim.out.truth("generations", {"group_id": self.gid, "generation": self.generation, "ts": ms,
                                      "protocol": None, "leader": None, "rewrite": False, "members": [],
                                      "assignment": {}})
        sim.stats["generations"] += 1
        self.owner.clear()
        self.leader = None
        self.state = "Empty"
        self.rebalancing = True   # so that finish_episode closes the episode
        self.finish_episode(ms)

    def handover(self, tp, new: str, ms: int) -> None:
        """Record what the new owner re-reads: from the committed offset up to how far the
        previous owner had processed (known only to the simulator)."""
        lost = self.lost.pop(tp, None)
        if lost is None:
            return
        end, cause, prev = lost
        start = self.committed.get(tp, 0)
        if end > start:
            self.sim.out.truth("reconsumed", {"group_id": self.gid, "topic": tp[0], "partition": tp[1],
                                              "from_member": prev, "to_member": new, "start_offset": start,
                                              "end_offset": end, "records": end - start, "cause": cause,
                                              "handover_ts": ms})
            self.sim.stats["reconsumed_records"] += end - start

    def lose(self, m: Member, cause: str, upto_ms: int) -> None:
        """`m` stops without committing: remember how far it got on each partition it owned."""
        pos = self.hw(upto_ms)
        for tp in m.owned:
            self.lost[tp] = (pos, cause, m.member_id)

    # ------------------------------------------------------------------ members' clients
    def tick(self, mid: str, token: int) -> None:
        sim = self.sim
        m = self.members.get(mid)
        if m is None or m.token != token or not m.alive or self.closing:
            return
        if not self.rebalancing and m.owned and m.stalled_at is None:
            self.commit(m, m.owned, sim.now)
        sim.at(sim.now + sim.cfg.commit_interval_ms, self.tick, mid, token)

    def leave(self, mid: str, client_reason: str = "the consumer is being closed", final_commit: bool = True,
              trigger: str = "leave") -> None:
        sim = self.sim
        m = self.members.get(mid)
        if m is None:
            return
        ms = sim.now
        if final_commit and m.alive and m.owned and not self.rebalancing:
            self.commit(m, m.owned, ms)
            m.owned = [] if self.assignor != "cooperative-sticky" else m.owned
        m.token = -1
        del self.members[mid]
        if sim.rel.java:
            sim.lines(self.p, self.f.member_left(ms + 1, self.p, self.gid, m.as_dict(), self.assignor, client_reason))
            self.begin(self.f.reason_leave(mid, client_reason), trigger, mid)
        else:
            self.begin(self.f.reason_leave(mid, client_reason), trigger, mid)
            if not self.members:
                self.become_empty()
            sim.lines(self.p, self.f.member_left(ms + 1, self.p, self.gid, m.as_dict(), self.assignor, client_reason))
            return
        if not self.members and self.rebalancing:
            # The last member left: the coordinator empties the group at once.
            self.become_empty()

    def crash(self, mid: str) -> None:
        """SIGKILL: no commit, no LeaveGroup; the coordinator notices at session expiry."""
        sim = self.sim
        m = self.members.get(mid)
        if m is None or not m.alive:
            return
        m.alive = False
        self.lose(m, "crash", sim.now)
        sim.at(sim.now + m.session_timeout, self.expire, mid)
        if m.instance_id is None:
            sim.at(sim.now + sim.rng.randint(5_000, 40_000), self.join, None, m.client_id,
                   "not provided")

    def expire(self, mid: str) -> None:
        sim = self.sim
        m = self.members.get(mid)
        if m is None:
            return
        del self.members[mid]
        sim.lines(self.p, self.f.member_failed(sim.now, self.p, self.gid, mid))
        self.begin(self.f.reason_crash(mid), "crash", mid)
        if not self.members and self.rebalancing:
            self.become_empty()

    def stall(self, mid: str) -> None:
        """Processing stops (a slow batch); past max.poll.interval.ms the client leaves the
        group with an ordinary LeaveGroup ("consumer poll timeout has expired.")."""
        sim = self.sim
        m = self.members.get(mid)
        if m is None or not m.alive:
            return
        m.stalled_at = sim.now
        m.alive = False
        self.lose(m, "poll_timeout", sim.now)
        sim.at(sim.now + m.rebalance_timeout, self.poll_expired, mid)

    def poll_expired(self, mid: str) -> None:
        sim = self.sim
        m = self.members.get(mid)
        if m is None:
            return
        self.leave(mid, "consumer poll timeout has expired.", final_commit=False, trigger="poll_timeout")
        # the application wakes up, gets UNKNOWN_MEMBER_ID and rejoins with a new member id
        sim.at(sim.now + sim.rng.randint(1_000, 20_000), self.join, m.instance_id, m.client_id, "not provided")

    def static_restart(self, mid: str) -> None:
        """A static member closes (committing, no LeaveGroup) and comes back inside its session
        timeout: the coordinator maps the instance id to the new member id, no rebalance."""
        sim = self.sim
        m = self.members.get(mid)
        if m is None or m.instance_id is None or self.rebalancing:
            return
        if m.owned:
            self.commit(m, m.owned, sim.now)
        down = sim.rng.randint(1_000, max(1_500, m.session_timeout // 2))
        sim.at(sim.now + down, self.static_back, mid)
        m.token = -2

    def static_back(self, old: str) -> None:
        sim = self.sim
        m = self.members.get(old)
        if m is None or self.closing:
            return
        if self.rebalancing:
            sim.at(sim.now + 1000, self.static_back, old)
            return
        new = self.new_member(m.instance_id, m.client_id)
        sim.lines(self.p, self.f.static_replaced(sim.now, self.p, self.gid, m.instance_id, old))
        new.owned, new.generation = m.owned, m.generation
        # keep the member's slot (the coordinator replaces it in place)
        self.members = {(new.member_id if k == old else k): (new if k == old else v) for k, v in self.members.items()}
        if self.leader == old:
            self.leader = new.member_id
        for tp in new.owned:
            self.owner[tp] = new.member_id
        self.write_generation(sim.now + 2, rewrite=True)
        new.token = 1
        sim.at(sim.now + sim.rng.randint(100, sim.cfg.commit_interval_ms), self.tick, new.member_id, 1)

    def storm(self, left: int, client_id: str | None = None) -> None:
        """A flapping member: joins, consumes a few seconds, closes cleanly, comes back."""
        sim = self.sim
        if left <= 0 or self.closing:
            return
        if client_id is None:
            self.clients += 1
            client_id = f"flapper{self.clients}"
        self.join(None, client_id)
        mid = next(reversed(self.members))
        sim.at(sim.now + sim.rng.randint(3_000, 6_000), self.storm_leave, mid, left, client_id)

    def storm_leave(self, mid, left, client_id) -> None:
        self.leave(mid)
        self.sim.at(self.sim.now + self.sim.rng.randint(1_500, 3_000), self.storm, left - 1, client_id)

    def churn(self) -> None:
        sim, cfg, rng = self.sim, self.sim.cfg, self.sim.rng
        if self.closing or sim.now > sim.end_ms - 30_000:
            return
        sim.at(sim.now + sim.exp_delay(cfg.churn_per_minute), self.churn)
        live = [m for m in self.members.values() if m.alive and m.token > 0]
        n = len(self.members)
        kinds = []
        for kind, w in cfg.weights.items():
            if w <= 0:
                continue
            if kind == "join" and n >= cfg.max_members:
                continue
            if kind in ("leave", "crash", "poll_timeout") and (n <= cfg.min_members or not live):
                continue
            if kind == "static_restart" and not (self.static and live):
                continue
            kinds.append((kind, w))
        if not kinds:
            return
        total = sum(w for _, w in kinds)
        r = rng.random() * total
        for kind, w in kinds:
            r -= w
            if r <= 0:
                break
        if kind == "join":
            self.join(None)
        elif kind == "storm":
            self.storm(rng.randint(3, 8))
        else:
            victim = live[rng.randrange(len(live))].member_id
            if kind == "leave":
                self.leave(victim)
                sim.at(sim.now + rng.randint(2_000, 60_000), self.join, None)
            elif kind == "crash":
                self.crash(victim)
            elif kind == "poll_timeout":
                self.stall(victim)
            elif kind == "static_restart":
                self.static_restart(victim)

    def shutdown(self) -> None:
        """End of the run: clients close one after another (clean LeaveGroup with a commit)."""
        sim = self.sim
        self.closing = True
        ms = sim.now
        for i, mid in enumerate(list(self.members)):
            sim.at(ms + 100 * i + sim.rng.randint(0, 80), self.close_member, mid)

    def close_member(self, mid: str) -> None:
        m = self.members.get(mid)
        if m is None:
            return
        if not m.alive:
            return  # a crashed/stalled client is not there to close; session expiry removes it
        self.leave(mid)


def hash_index(s: str) -> int:
    h = 0
    for ch in s.encode("utf-8"):
        h = (h * 31 + ch) & 0xFFFF
    return h


def simulate(cfg: SimConfig) -> dict:
    """Run the simulation; returns the summary also written to `truth/summary.json`."""
    return Sim(cfg).run()
