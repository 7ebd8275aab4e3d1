"""KIP-848 consumer groups (`group.protocol=consumer`) on the Java coordinator.

Records in the order `consumerGroupHeartbeat` writes them (kafka-internals §1.6 and the
kip848_consumer_protocol recording): a joining member's heartbeat writes, in one batch,
its member metadata (5), the topic metadata (4, when it changed), the group epoch (3), the
target-assignment delta (7 for each member whose target changed), the assignment epoch (6)
and its own current assignment (8). A member that must give partitions up writes 8 with
state UNREVOKED_PARTITIONS at its next heartbeat, commits, and acks with 8 at the new epoch;
partitions go to their new owner only once released (UNRELEASED_PARTITIONS until then).
A leave or a fenced member writes the tombstones 8, 7, 5 and the next epoch (3); the next
heartbeat of another member computes the new target. The last member out also empties the
topic metadata (4 with no topics).
"""
from __future__ import annotations


from pipelines.assignors import MemberSpec, Problem, assign_problem
from pipelines.assignors.javahash import uuid_from_string

from .engine import GroupTraffic, runs
from .ids import kafka_uuid

STABLE, UNREVOKED, UNRELEASED = 0, 1, 2


class KMember:
    __slots__ = ("member_id", "client_id", "instance_id", "client_host", "epoch", "state", "assigned",
                 "pending", "token", "alive", "stalled_at")

    def __init__(self, member_id, client_id, instance_id, host):
        self.member_id = member_id
        self.client_id = client_id
        self.instance_id = instance_id
        self.client_host = host
        self.epoch = 0
        self.state = STABLE
        self.assigned: set = set()
        self.pending: set = set()
        self.token = 0
        self.alive = True
        self.stalled_at = None


class ConsumerGroup(GroupTraffic):
    def __init__(self, sim, gid: str, index: int):
        super().__init__(sim, gid)
        self.topic_ids = {t: kafka_uuid(sim.rng) for t in self.topics}
        self.members: dict[str, KMember] = {}
        self.target: dict[str, set] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.metadata_written = False

    def commit(self, m: KMember, parts, ms: int) -> None:
        if not parts:
            return
        sim = self.sim
        pos = self.hw(m.stalled_at if m.stalled_at is not None else ms)
        recs = []
        for tp in sorted(parts):
            recs.append((1, self.key(tp), sim.rf.commit_value(pos, ms)))
            self.committed[tp] = pos
        sim.out.append(self.p, recs, ms)

    def by_id(self, parts) -> list:
        return [(self.topic_ids[t], ps) for t, ps in runs(parts)]

    def k(self, rtype: int, mid: str | None = None) -> bytes:
        rf = self.sim.rf
        return rf.k848_group_key(rtype, self.gid) if mid is None else rf.k848_member_key(rtype, self.gid, mid)

    # ------------------------------------------------------------------ lifecycle
    def create(self) -> None:
        sim, cfg, rng = self.sim, self.sim.cfg, self.sim.rng
        self.start = sim.now
        sim.out.truth("groups", {"group_id": self.gid, "protocol": "consumer", "assignor": "uniform",
                                 "coordinator_partition": self.p, "broker": sim.out.leader(self.p),
                                 "topics": self.topics, "topic_ids": self.topic_ids, "static": False,
                                 "transactional": False, "messages_per_s": self.rate,
                                 "commit_interval_ms": cfg.commit_interval_ms, "start_ms": self.start,
                                 "kafka_version": sim.rel.name})
        n = rng.randint(cfg.min_members, cfg.max_members)
        for i in range(n):
            sim.at(sim.now + i * rng.randint(200, 1500), self.join, None)
        sim.at(sim.now + sim.exp_delay(cfg.churn_per_minute) + 5000, self.churn)
        sim.at(sim.end_ms - rng.randint(0, 5000), self.shutdown)

    def begin_episode(self, trigger: str, who: str | None) -> None:
        if self.ep is None:
            self.ep = {"group_id": self.gid, "protocol": "consumer", "from_epoch": self.assignment_epoch,
                       "started_at": self.sim.now, "trigger": trigger, "trigger_member": who,
                       "members_before": sorted(self.members), "owners_before": dict(self.owner)}

    def maybe_finish_episode(self) -> None:
        if self.ep is None:
            return
        if any(m.epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return
        if self.group_epoch != self.assignment_epoch:
            return
        sim = self.sim
        ep, self.ep = self.ep, None
        before = ep.pop("owners_before")
        moved = sum(1 for tp, mid in self.owner.items() if before.get(tp) not in (None, mid))
        ep.update({"to_epoch": self.assignment_epoch, "completed_at": sim.now, "members_after": sorted(self.members),
                   "partitions_moved": moved, "partitions_revoked": moved})
        sim.out.truth("episodes", ep)
        sim.stats["episodes"] += 1

    def compute_target(self) -> list:
        """New target for the current group epoch; returns the type-7 records of the delta."""
        specs = [MemberSpec(member_id=m.member_id, instance_id=m.instance_id, topics=sorted(self.topics),
                            target=runs(self.target.get(m.member_id, ())) or None)
                 for m in self.members.values()]
        prob = Problem(members=specs, topics=dict(self.topics),
                       topic_ids={t: uuid_from_string(i) for t, i in self.topic_ids.items()},
                       subscription_type="HOMOGENEOUS")
        result = assign_problem("uniform", prob) if specs else {}
        recs = []
        shown = {}
        for mid, parts in result.items():
            new = set(parts)
            if new != self.target.get(mid):
                self.target[mid] = new
                recs.append((7, self.k(7, mid), self.sim.rf.target_member(self.by_id(new))))
            shown[mid] = [(self.topic_ids[t], ps) for t, ps in runs(new)]
        self.assignment_epoch = self.group_epoch
        recs.append((6, self.k(6), self.sim.rf.target_metadata(self.assignment_epoch)))
        sim = self.sim
        sim.lines(self.p, self.f.k_target(sim.now, self.p, self.gid, self.assignment_epoch, "uniform", shown))
        sim.stats["generations"] += 1
        sim.out.truth("kip848_epochs", {"group_id": self.gid, "epoch": self.assignment_epoch, "ts": sim.now,
                                        "target": {mid: runs(self.target[mid]) for mid in self.members}})
        return recs

    def reconcile(self, m: KMember) -> tuple[list, list]:
        """CurrentAssignmentBuilder for one heartbeat of `m`: (records, lines)."""
        sim = self.sim
        target = self.target.get(m.member_id, set())
        if m.state == UNREVOKED:
            # the client acked the revocation: the partitions are released
            for tp in m.pending:
                if self.owner.get(tp) == m.member_id:
                    del self.owner[tp]
            m.pending = set()
        keep = m.assigned & target
        revoke = m.assigned - target
        prev = m.epoch
        if revoke:
            self.commit(m, revoke, sim.now)   # commit on revocation (auto-commit)
            m.assigned, m.pending, m.state = keep, revoke, UNREVOKED
        else:
            free = {tp for tp in target - keep if self.owner.get(tp) in (None, m.member_id)}
            for tp in sorted(free):
                if tp in self.lost:
                    self.handover(tp, m.member_id)
                self.owner[tp] = m.member_id
            m.assigned = keep | free
            m.state = UNRELEASED if (target - m.assigned) else STABLE
            m.epoch = self.assignment_epoch
        value = sim.rf.current_assignment(epoch=m.epoch, previous_epoch=prev, state=m.state,
                                          assigned=self.by_id(m.assigned), pending=self.by_id(m.pending))
        lines = self.f.k_state(sim.now, self.p, self.gid, m.member_id, m.epoch, prev, m.state,
                               self.by_id(m.assigned), self.by_id(m.pending))
        if m.state != STABLE or m.epoch != self.assignment_epoch:
            sim.at(sim.now + (60 if m.state == UNREVOKED else sim.rng.randint(500, 2000)), self.heartbeat,
                   m.member_id)
        return [(8, self.k(8, m.member_id), value)], lines

    def needs_heartbeat(self, m: KMember) -> bool:
        return m.epoch != self.assignment_epoch or m.state != STABLE or m.assigned != self.target.get(m.member_id)

    def heartbeat(self, mid: str) -> None:
        sim = self.sim
        m = self.members.get(mid)
        if m is None or not m.alive or not self.needs_heartbeat(m):
            return
        recs = []
        if self.group_epoch > self.assignment_epoch:
            recs += self.compute_target()
            self.wake_others(mid)
        r, lines = self.reconcile(m)
        sim.lines(self.p, lines)
        sim.out.append(self.p, recs + r, sim.now)
        self.maybe_finish_episode()
        if m.state == STABLE:
            self.wake_waiting()

    def wake_others(self, mid: str) -> None:
        for other in self.members.values():
            if other.member_id != mid and other.alive:
                self.sim.at(self.sim.now + self.sim.rng.randint(20, 2000), self.heartbeat, other.member_id)

    def wake_waiting(self) -> None:
        for other in self.members.values():
            if other.state == UNRELEASED and other.alive:
                self.sim.at(self.sim.now + self.sim.rng.randint(20, 500), self.heartbeat, other.member_id)

    def handover(self, tp, new: str) -> None:
        end, cause, prev = self.lost.pop(tp)
        start = self.committed.get(tp, 0)
        if end > start:
            self.sim.out.truth("reconsumed", {"group_id": self.gid, "topic": tp[0], "partition": tp[1],
                                              "from_member": prev, "to_member": new, "start_offset": start,
                                              "end_offset": end, "records": end - start, "cause": cause,
                                              "handover_ts": self.sim.now})
            self.sim.stats["reconsumed_records"] += end - start

    # ------------------------------------------------------------------ membership
    def join(self, client_id=None) -> None:
        sim = self.sim
        if self.closing:
            return
        if client_id is None:
            self.clients += 1
            client_id = f"k{self.clients}"
        m = KMember(kafka_uuid(sim.rng), client_id, None, f"10.1.{self.clients % 250}.{len(client_id)}")
        self.begin_episode("join", m.member_id)
        self.members[m.member_id] = m
        ms = sim.now
        lines = self.f.k_join(ms, self.p, self.gid, m.member_id) + \
            self.f.k_subscribed(ms, self.p, self.gid, m.member_id, sorted(self.topics))
        recs = [(5, self.k(5, m.member_id), sim.rf.member_metadata(
            instance_id=None, client_id=client_id, client_host="/" + m.client_host, topics=sorted(self.topics),
            rebalance_timeout=sim.cfg.max_poll_interval_ms))]
        if not self.metadata_written:
            meta = [(self.topic_ids[t], t, n) for t, n in self.topics.items()]
            lines += self.f.k_metadata(ms, self.p, self.gid, meta)
            recs.append((4, self.k(4), sim.rf.partition_metadata(meta)))
            self.metadata_written = True
        self.group_epoch += 1
        lines += self.f.k_epoch(ms, self.p, self.gid, self.group_epoch)
        recs.append((3, self.k(3), sim.rf.group_epoch(self.group_epoch)))
        sim.lines(self.p, lines)
        recs += self.compute_target()
        r, lines = self.reconcile(m)
        sim.lines(self.p, lines)
        sim.out.append(self.p, recs + r, ms)
        self.wake_others(m.member_id)
        m.token = 1
        sim.at(ms + sim.rng.randint(100, sim.cfg.commit_interval_ms), self.tick, m.member_id, 1)
        self.maybe_finish_episode()

    def tick(self, mid: str, token: int) -> None:
        sim = self.sim
        m = self.members.get(mid)
        if m is None or m.token != token or not m.alive or self.closing:
            return
        if m.assigned and m.stalled_at is None:
            self.commit(m, m.assigned, sim.now)
        sim.at(sim.now + sim.cfg.commit_interval_ms, self.tick, mid, token)

    def remove(self, mid: str, line: list[str], trigger: str) -> None:
        sim = self.sim
        m = self.members.pop(mid, None)
        if m is None:
            return
        self.begin_episode(trigger, mid)
        assert self.ep is not None  # begin_episode opened it
        self.ep["members_before"] = sorted(set(self.ep["members_before"]) | {mid})
        m.token = -1
        for tp in m.assigned | m.pending:
            if self.owner.get(tp) == mid:
                del self.owner[tp]
        self.target.pop(mid, None)
        sim.lines(self.p, line)
        recs: list[tuple[int, bytes, bytes | None]] = [(8, self.k(8, mid), None), (7, self.k(7, mid), None),
                                                       (5, self.k(5, mid), None)]
        if not self.members:
            recs.append((4, self.k(4), sim.rf.partition_metadata([])))
            self.metadata_written = False
        self.group_epoch += 1
        recs.append((3, self.k(3), sim.rf.group_epoch(self.group_epoch)))
        sim.out.append(self.p, recs, sim.now)
        if self.members:
            first = next(iter(self.members))
            sim.at(sim.now + sim.rng.randint(100, 2000), self.heartbeat_after_leave, first)
        else:
            self.assignment_epoch = self.group_epoch
            self.maybe_finish_episode()

    def heartbeat_after_leave(self, mid: str) -> None:
        if mid not in self.members:
            if not self.members:
                return
            mid = next(iter(self.members))
        m = self.members[mid]
        if not m.alive:
            alive = [x for x in self.members.values() if x.alive]
            if not alive:
                self.sim.at(self.sim.now + 1000, self.heartbeat_after_leave, mid)
                return
            m = alive[0]
        sim = self.sim
        recs = self.compute_target()
        self.wake_others(m.member_id)
        r, lines = self.reconcile(m)
        sim.lines(self.p, lines)
        sim.out.append(self.p, recs + r, sim.now)
        self.maybe_finish_episode()

    def leave(self, mid: str, final_commit: bool = True, trigger: str = "leave") -> None:
        m = self.members.get(mid)
        if m is None:
            return
        if final_commit and m.alive and m.assigned:
            self.commit(m, m.assigned, self.sim.now)
        self.remove(mid, self.f.k_left(self.sim.now, self.p, self.gid, mid), trigger)

    def crash(self, mid: str) -> None:
        sim = self.sim
        m = self.members.get(mid)
        if m is None or not m.alive:
            return
        m.alive = False
        pos = self.hw(sim.now)
        for tp in m.assigned | m.pending:
            self.lost[tp] = (pos, "crash", mid)
        sim.at(sim.now + sim.cfg.session_timeout_ms, self.fence, mid)
        sim.at(sim.now + sim.rng.randint(5_000, 40_000), self.join, m.client_id)

    def fence(self, mid: str) -> None:
        self.remove(mid, self.f.k_fenced(self.sim.now, self.p, self.gid, mid, "the member session expired."),
                    "crash")

    def stall(self, mid: str) -> None:
        sim = self.sim
        m = self.members.get(mid)
        if m is None or not m.alive:
            return
        m.alive = False
        m.stalled_at = sim.now
        pos = self.hw(sim.now)
        for tp in m.assigned | m.pending:
            self.lost[tp] = (pos, "poll_timeout", mid)
        sim.at(sim.now + sim.cfg.max_poll_interval_ms, self.poll_expired, mid)

    def poll_expired(self, mid: str) -> None:
        m = self.members.get(mid)
        if m is None:
            return
        self.leave(mid, final_commit=False, trigger="poll_timeout")
        self.sim.at(self.sim.now + self.sim.rng.randint(1_000, 20_000), self.join, m.client_id)

    def churn(self) -> None:
        sim, cfg, rng = self.sim, self.sim.cfg, self.sim.rng
        if self.closing or sim.now > sim.end_ms - 30_000:
            return
        sim.at(sim.now + sim.exp_delay(cfg.churn_per_minute), self.churn)
        live = [m for m in self.members.values() if m.alive]
        n = len(self.members)
        kinds = [(k, w) for k, w in cfg.weights.items() if w > 0 and k in ("join", "leave", "crash", "poll_timeout")
                 and not (k == "join" and n >= cfg.max_members)
                 and not (k != "join" and (n <= cfg.min_members or not live))]
        if not kinds:
            return
        r = rng.random() * sum(w for _, w in kinds)
        for kind, w in kinds:
            r -= w
            if r <= 0:
                break
        if kind == "join":
            self.join()
            return
        victim = live[rng.randrange(len(live))].member_id
        if kind == "leave":
            self.leave(victim)
            sim.at(sim.now + rng.randint(2_000, 60_000), self.join)
        elif kind == "crash":
            self.crash(victim)
        else:
            self.stall(victim)

    def shutdown(self) -> None:
        self.closing = True
        for i, mid in enumerate(list(self.members)):
            self.sim.at(self.sim.now + 300 * i + self.sim.rng.randint(0, 200), self.close_member, mid)

    def close_member(self, mid: str) -> None:
        m = self.members.get(mid)
        if m is not None and m.alive:
            self.leave(mid)
