"""Group-coordinator `server.log` lines in the layout and wording of one Kafka release.

Wording per release follows kafka-internals §2/§7 and the recordings (3.9 Scala: e.g.
scale_out_range; 3.9 Java coordinator: new_coordinator_classic, kip848_consumer_protocol);
`pipelines/logs/formats.py` is the table of what each release prints. Lines a release logs
only at DEBUG/TRACE (0.9's member failure, 4.0's member reconciliation) are not written.
"""
from __future__ import annotations

import datetime as dt

from .config import Release

_SCALA_LOGGER = "kafka.coordinator.group.GroupCoordinator"
_SCALA_GMM = "kafka.coordinator.group.GroupMetadataManager"
_JAVA_GMM = "org.apache.kafka.coordinator.group.GroupMetadataManager"
_JAVA_SVC = "org.apache.kafka.coordinator.group.GroupCoordinatorService"


def log_ts(ms: int) -> str:
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S") + f",{ms % 1000:03d}"


STATE_NAMES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS"}


class LineFormatter:
    def __init__(self, rel: Release, broker: int):
        self.rel = rel
        self.b = broker
        v = (rel.major, rel.minor)
        self.v = v
        self.legacy = rel.family == "legacy"
        self.java = rel.java
        self.runtime_logger = ("org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime" if v >= (4, 0)
                               else "org.apache.kafka.coordinator.group.runtime.CoordinatorRuntime")
        self.client_reason = v >= (3, 2) or self.java   # KIP-800
        self.last_ms = 0  # log4j appends in time order: a line is never stamped before the previous one

    # -------------------------------------------------------------------- layout
    def _line(self, ms: int, prefix: str, body: str, logger: str, level: str = "INFO") -> str:
        ms = self.last_ms = max(ms, self.last_ms)
        return f"[{log_ts(ms)}] {level} {prefix}{body} ({logger})\n"

    def coord(self, ms: int, body: str, partition: int | None = None) -> str:
        """A GroupCoordinator / GroupMetadataManager (shard) line."""
        if self.java:
            return self._line(ms, f"[GroupCoordinator id={self.b} topic=__consumer_offsets partition={partition}] ",
                              body, _JAVA_GMM)
        logger = "kafka.coordinator.GroupCoordinator" if self.legacy else _SCALA_LOGGER
        return self._line(ms, f"[GroupCoordinator {self.b}]: ", body, logger)

    def _p(self, partition: int) -> str:
        return "" if self.java else f" (__consumer_offsets-{partition})"

    def _end(self) -> str:
        return "." if self.java else ""

    # -------------------------------------------------------------------- broker lifecycle
    def startup(self, ms: int, partitions: list[int]) -> list[str]:
        out = []
        if self.java:
            out.append(self._line(ms, f"[GroupCoordinator id={self.b}] ", "Starting up.", _JAVA_SVC))
            out.append(self._line(ms + 3, f"[GroupCoordinator id={self.b}] ", "Startup complete.", _JAVA_SVC))
            for i, p in enumerate(partitions):
                out.append(self._line(ms + 10 + i, f"[GroupCoordinator id={self.b}] ",
                                      f"Scheduling loading of metadata from __consumer_offsets-{p} with epoch 0",
                                      self.runtime_logger))
            for i, p in enumerate(partitions):
                out.append(self._line(ms + 60 + i, f"[GroupCoordinator id={self.b}] ",
                                      f"Finished loading of metadata from __consumer_offsets-{p} with epoch 0 in 6ms "
                                      "where 5ms was spent in the scheduler. Loaded 0 records which total to 0 bytes.",
                                      self.runtime_logger))
            return out
        if self.legacy:
            for i, p in enumerate(partitions):
                out.append(self._line(ms + i, f"[Group Metadata Manager on Broker {self.b}]: ",
                                      f"Loading offsets and group metadata from [__consumer_offsets,{p}]",
                                      "kafka.coordinator.GroupMetadataManager"))
                out.append(self._line(ms + i + 5, f"[Group Metadata Manager on Broker {self.b}]: ",
                                      f"Finished loading offsets from [__consumer_offsets,{p}] in 3 milliseconds.",
                                      "kafka.coordinator.GroupMetadataManager"))
            return out
        out.append(self.coord(ms, "Starting up."))
        out.append(self.coord(ms + 5, "Startup complete."))
        gmm = f"[GroupMetadataManager brokerId={self.b}] "
        for i, p in enumerate(partitions):
            out.append(self.coord(ms + 10 + i, f"Elected as the group coordinator for partition {p} in epoch 0"))
            out.append(self._line(ms + 10 + i, gmm, "Scheduling loading of offsets and group metadata from "
                                  f"__consumer_offsets-{p} for epoch 0", _SCALA_GMM))
        for i, p in enumerate(partitions):
            out.append(self._line(ms + 30 + i, gmm, f"Finished loading offsets and group metadata from "
                                  f"__consumer_offsets-{p} in 11 milliseconds for epoch 0, of which 2 milliseconds "
                                  "was spent in the scheduler.", _SCALA_GMM))
        return out

    def unload(self, ms: int, partitions: list[int], groups: dict[int, list[tuple[str, str, int]]]) -> list[str]:
        """Resigning leadership at shutdown: partitions unloaded, each group with its generation
        (classic) or epoch (consumer). `groups`: partition -> [(group, "classic"|"consumer", n)]."""
        out: list[str] = []
        if self.legacy:
            return out
        if self.java:
            pre = f"[GroupCoordinator id={self.b}] "
            for p in partitions:
                out.append(self._line(ms, pre, f"Scheduling unloading of metadata for __consumer_offsets-{p} with "
                                      "epoch OptionalInt[1]", self.runtime_logger))
                if self.v >= (3, 9):
                    out.append(self._line(ms, pre, f"Started unloading metadata for __consumer_offsets-{p} with "
                                          "epoch OptionalInt[1].", self.runtime_logger))
                for g, kind, n in groups.get(p, []):
                    body = (f"[GroupId={g}] Unloading group metadata for generation {n}." if kind == "classic"
                            else f"[GroupId={g}] Unloaded group metadata for group epoch {n}.")
                    out.append(self.coord(ms, body, p))
                out.append(self._line(ms + 1, pre, f"Finished unloading metadata for __consumer_offsets-{p} with "
                                      "epoch OptionalInt[1].", self.runtime_logger))
            return out
        gmm = f"[GroupMetadataManager brokerId={self.b}] "
        for p in partitions:
            out.append(self.coord(ms, f"Resigned as the group coordinator for partition {p} in epoch OptionalInt[1]"))
            out.append(self._line(ms, gmm, f"Scheduling unloading of offsets and group metadata from "
                                  f"__consumer_offsets-{p}", _SCALA_GMM))
        for p in partitions:
            gs = groups.get(p, [])
            for g, kind, n in gs:
                out.append(self.coord(ms + 2, f"Unloading group metadata for {g} with generation {n}"))
            out.append(self._line(ms + 2, gmm, f"Finished unloading __consumer_offsets-{p} for coordinator epoch "
                                  f"OptionalInt[1]. Removed 0 cached offsets and {len(gs)} cached groups.", _SCALA_GMM))
        return out

    def shutdown(self, ms: int) -> list[str]:
        if self.java:
            return [self._line(ms, f"[GroupCoordinator id={self.b}] ", "Shutting down.", _JAVA_SVC),
                    self._line(ms + 4, f"[GroupCoordinator id={self.b}] ", "Shutdown complete.", _JAVA_SVC)]
        if self.legacy:
            return []
        return [self.coord(ms, "Shutting down."), self.coord(ms + 4, "Shutdown complete.")]

    # -------------------------------------------------------------------- classic groups
    def _gi(self, instance_id: str | None) -> str:
        if self.java:
            return instance_id if instance_id is not None else "null"
        return f"Some({instance_id})" if instance_id is not None else "None"

    def _cr(self, client_reason: str) -> str:
        return f"; client reason: {client_reason}" if self.client_reason else ""

    def member_join(self, ms, p, group, member, state, instance_id=None) -> list[str]:
        if self.legacy:
            return []   # 0.9/0.10 log joins only at DEBUG
        if instance_id is not None:
            return [self.coord(ms, f"Static member with groupInstanceId={instance_id} and unknown member id joins "
                                   f"group {group} in {state} state. Created a new member id {member} for this "
                                   "member and add to the group.", p)]
        if self.java:
            tail = "and requesting the member to rejoin with this id."
        elif self.v >= (2, 8):
            tail = "and request the member to rejoin with this id."
        else:
            tail = "for this member and add to the group."
        return [self.coord(ms, f"Dynamic member with unknown member id joins group {group} in {state} state. "
                               f"Created a new member id {member} {tail}", p)]

    def prepare(self, ms, p, group, old_generation, reason: str) -> list[str]:
        if self.legacy:
            return [self.coord(ms, f"Preparing to restabilize group {group} with old generation {old_generation}", p)]
        if self.java:
            return [self.coord(ms, f"Preparing to rebalance group {group} in state PreparingRebalance with old "
                                   f"generation {old_generation} (reason: {reason}).", p)]
        return [self.coord(ms, f"Preparing to rebalance group {group} in state PreparingRebalance with old "
                               f"generation {old_generation}{self._p(p)} (reason: {reason})", p)]

    def reason_join(self, member, instance_id, client_reason="not provided") -> str:
        if self.v < (2, 3):
            return f"Adding new member {member}"
        if self.v < (2, 4):
            return f"Adding new member {member} with group instanceid {self._gi(instance_id)}"
        return f"Adding new member {member} with group instance id {self._gi(instance_id)}{self._cr(client_reason)}"

    def reason_leave(self, member, client_reason) -> str:
        if self.java:
            return f"explicit `LeaveGroup` request for ({member}) members."
        if self.v < (3, 0):
            return f"removing member {member} on LeaveGroup"
        return f"Removing member {member} on LeaveGroup{self._cr(client_reason)}"

    def reason_crash(self, member) -> str:
        return f"removing member {member} on heartbeat expiration" + ("." if self.java else "")

    def reason_rejoin(self, member, client_reason) -> str:
        return f"Updating metadata for member {member} during Stable{self._cr(client_reason)}"

    def stabilized(self, ms, p, group, generation, members) -> list[str]:
        if self.java:
            return [self.coord(ms, f"Stabilized group {group} generation {generation} with {members} members.", p)]
        if self.v >= (2, 8):
            return [self.coord(ms, f"Stabilized group {group} generation {generation}{self._p(p)} "
                                   f"with {members} members", p)]
        return [self.coord(ms, f"Stabilized group {group} generation {generation}{self._p(p) if not self.legacy else ''}", p)]

    def assignment_received(self, ms, p, group, leader, generation, members, static) -> list[str]:
        if self.java or self.v >= (3, 0):
            return [self.coord(ms, f"Assignment received from leader {leader} for group {group} for generation "
                                   f"{generation}. The group has {members} members, {static} of which are static.", p)]
        if self.v >= (2, 8):
            return [self.coord(ms, f"Assignment received from leader for group {group} for generation {generation}. "
                                   f"The group has {members} members, {static} of which are static.", p)]
        return [self.coord(ms, f"Assignment received from leader for group {group} for generation {generation}", p)]

    def member_left(self, ms, p, group, m: dict, protocol: str, client_reason: str) -> list[str]:
        mid, gi = m["member_id"], m["instance_id"]
        if self.legacy:
            return []
        if self.java:
            tag = "GroupId" if self.v >= (4, 0) else "Group"
            if gi is not None:
                who = f"Static member {mid} with instance id {gi}"
            else:
                who = f"Dynamic member {mid}" if self.v >= (4, 0) else f"Member {mid}"
            return [self.coord(ms, f"[{tag} {group}] {who} has left group through explicit `LeaveGroup` request; "
                                   f"client reason: {client_reason}", p)]
        if self.v < (3, 0):
            if self.v < (2, 4):
                return []
            return [self.coord(ms, f"Member[group.instance.id {self._gi(gi)}, member.id {mid}] in group {group} "
                                   "has left, removing it from the group", p)]
        mm = (f"MemberMetadata(memberId={mid}, groupInstanceId={self._gi(gi)}, clientId={m['client_id']}, "
              f"clientHost=/{m['client_host'].lstrip('/')}, sessionTimeoutMs={m['session_timeout']}, "
              f"rebalanceTimeoutMs={m['rebalance_timeout']}, supportedProtocols=List({protocol}))")
        if self.v < (3, 2):
            return [self.coord(ms, f"Member {mm} has left group {group} through explicit `LeaveGroup` request", p)]
        return [self.coord(ms, f"Member {mm} has left group {group} through explicit `LeaveGroup`; "
                               f"client reason: {client_reason}", p)]

    def member_failed(self, ms, p, group, member) -> list[str]:
        if self.legacy:
            return []  # TRACE before 1.1
        return [self.coord(ms, f"Member {member} in group {group} has failed, removing it from the group"
                           + self._end(), p)]

    def group_empty(self, ms, p, group, generation) -> list[str]:
        if self.v < (0, 11) and self.legacy and self.v < (0, 10):
            return []
        if self.legacy:
            return [self.coord(ms, f"Group {group} with generation {generation} is now empty", p)]
        return [self.coord(ms, f"Group {group} with generation {generation} is now empty{self._p(p)}{self._end()}", p)]

    def static_replaced(self, ms, p, group, instance_id, old) -> list[str]:
        proto = "the selected protocol will not trigger a rebalance." if self.java else \
            "selectProtocol will not trigger rebalance."
        return [self.coord(ms, f"Static member with groupInstanceId={instance_id} and unknown member id joins group "
                               f"{group} in Stable state. Replacing previously mapped member {old} with this "
                               "groupInstanceId.", p),
                self.coord(ms, f"Static member which joins during Stable stage and doesn't affect {proto}", p)]

    # -------------------------------------------------------------------- KIP-848
    def k_join(self, ms, p, group, member, instance_id=None) -> list[str]:
        if instance_id is not None:
            return [self.coord(ms, f"[GroupId {group}] Static member {member} with instance id {instance_id} joins "
                                   "the consumer group using the consumer protocol.", p)]
        return [self.coord(ms, f"[GroupId {group}] Member {member} joins the consumer group using the consumer "
                               "protocol.", p)]

    def k_subscribed(self, ms, p, group, member, topics) -> list[str]:
        return [self.coord(ms, f"[GroupId {group}] Member {member} updated its subscribed topics to: "
                               f"[{', '.join(topics)}].", p)]

    def k_metadata(self, ms, p, group, topics: list[tuple[str, str, int]]) -> list[str]:
        inner = ", ".join(f"{name}=TopicMetadata(id={tid}, name={name}, numPartitions={n}, partitionRacks={{}})"
                          for tid, name, n in topics)
        return [self.coord(ms, f"[GroupId {group}] Computed new subscription metadata: {{{inner}}}.", p)]

    def k_epoch(self, ms, p, group, epoch) -> list[str]:
        return [self.coord(ms, f"[GroupId {group}] Bumped group epoch to {epoch}.", p)]

    def k_target(self, ms, p, group, epoch, assignor, target: dict[str, list[tuple[str, list[int]]]]) -> list[str]:
        if self.v >= (4, 0):
            return [self.coord(ms, f"[GroupId {group}] Computed a new target assignment for epoch {epoch} with "
                                   f"'{assignor}' assignor in 0ms.", p)]
        inner = ", ".join(
            f"{m}=MemberAssignment(partitions={{" + ", ".join(f"{t}=[{', '.join(map(str, ps))}]" for t, ps in runs)
            + "})" for m, runs in target.items())
        return [self.coord(ms, f"[GroupId {group}] Computed a new target assignment for epoch {epoch} with "
                               f"'{assignor}' assignor in 0ms: {{{inner}}}.", p)]

    def k_state(self, ms, p, group, member, epoch, prev, state, assigned, revoked) -> list[str]:
        if self.v >= (4, 0):
            return []  # DEBUG from 4.0
        a = ", ".join(f"{t}-{q}" for t, ps in assigned for q in ps)
        r = ", ".join(f"{t}-{q}" for t, ps in revoked for q in ps)
        return [self.coord(ms, f"[GroupId {group}] Member {member} new assignment state: epoch={epoch}, "
                               f"previousEpoch={prev}, state={STATE_NAMES[state]}, assignedPartitions=[{a}] and "
                               f"revokedPartitions=[{r}].", p)]

    def k_left(self, ms, p, group, member, instance_id=None) -> list[str]:
        if instance_id is not None:
            return [self.coord(ms, f"[GroupId {group}] Static member {member} with instance id {instance_id} left "
                                   "the consumer group.", p)]
        return [self.coord(ms, f"[GroupId {group}] Member {member} left the consumer group.", p)]

    def k_fenced(self, ms, p, group, member, why) -> list[str]:
        return [self.coord(ms, f"[GroupId {group}] Member {member} fenced from the group because {why}.", p)]
