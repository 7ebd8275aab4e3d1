"""`__consumer_offsets` keys and values in the versions a given release writes, built by the
codec's encoders (`pipelines.codec`).

OffsetCommit values are by far the most numerous record (10 M in the large benchmark), and
the codec's schema interpreter costs ~25 µs each; so their fixed layout is packed with
`struct` after checking, at start-up, that the packing is byte-identical to the codec's
encoding of the same values. If that check ever fails (a schema change), the codec is used
for every record.
"""
from __future__ import annotations

import struct

from pipelines.codec import encode_key, encode_value

from .config import Release

OFFSET_RETENTION_MS = 24 * 3600 * 1000  # offsets.retention.minutes=1440, the 0.9-2.0 default


class RecordFactory:
    def __init__(self, rel: Release):
        self.rel = rel
        self.commit_version = rel.offset_value_version
        self.group_version = rel.group_value_version
        self._fast = self._check_fast_path()

    # ---------------------------------------------------------------- offset commits
    def commit_key(self, group: str, topic: str, partition: int) -> bytes:
        return encode_key(1, {"group": group, "topic": topic, "partition": partition})

    def _commit_data(self, offset: int, ts: int, leader_epoch: int, metadata: str) -> dict:
        if self.commit_version == 1:
            return {"offset": offset, "metadata": metadata, "commitTimestamp": ts,
                    "expireTimestamp": ts + OFFSET_RETENTION_MS}
        return {"offset": offset, "leaderEpoch": leader_epoch, "metadata": metadata, "commitTimestamp": ts}

    def _pack(self, offset: int, ts: int, leader_epoch: int, metadata: bytes) -> bytes:
        if self.commit_version == 1:
            return (struct.pack(">hqh", 1, offset, len(metadata)) + metadata
                    + struct.pack(">qq", ts, ts + OFFSET_RETENTION_MS))
        return struct.pack(">hqih", 3, offset, leader_epoch, len(metadata)) + metadata + struct.pack(">q", ts)

    def _check_fast_path(self) -> bool:
        samples = [(0, 0, -1, ""), (123456789012, 1795337000123, 7, "meta"), (1, 2**40, 0, "")]
        for off, ts, le, md in samples:
            ref = encode_value(1, self.commit_version, self._commit_data(off, ts, le, md))
            if ref != self._pack(off, ts, le, md.encode("utf-8")):
                return False
        return True

    def commit_value(self, offset: int, ts: int, leader_epoch: int = -1, metadata: str = "") -> bytes:
        if self._fast:
            return self._pack(offset, ts, leader_epoch, metadata.encode("utf-8"))
        return encode_value(1, self.commit_version, self._commit_data(offset, ts, leader_epoch, metadata))

    # ---------------------------------------------------------------- classic groups
    def group_key(self, group: str) -> bytes:
        return encode_key(2, {"group": group})

    def subscription(self, topics: list[str], owned: list, generation: int, user_data) -> dict:
        v = self.rel.subscription_version
        sub = {"_version": v, "topics": sorted(topics), "userData": user_data}
        if v >= 1:
            sub["ownedPartitions"] = [{"topic": t, "partitions": ps} for t, ps in owned]
        if v >= 2:
            sub["generationId"] = generation
            sub["rackId"] = None
        return sub

    def group_metadata(self, group: str, *, generation: int, protocol_type: str, protocol: str | None,
                       leader: str | None, state_ts: int, members: list[dict]) -> bytes:
        """members: dicts with member_id, instance_id, client_id, client_host, session_timeout,
        rebalance_timeout, subscription (dict), assignment (runs [[topic, [p...]]])."""
        v = self.group_version
        out = []
        for m in members:
            mm = {"memberId": m["member_id"], "clientId": m["client_id"], "clientHost": m["client_host"],
                  "sessionTimeout": m["session_timeout"], "subscription": m["subscription"],
                  "assignment": {"_version": 0, "assignedPartitions": [
                      {"topic": t, "partitions": ps} for t, ps in m["assignment"]], "userData": None}}
            if v >= 1:
                mm["rebalanceTimeout"] = m["rebalance_timeout"]
            if v >= 3:
                mm["groupInstanceId"] = m["instance_id"]
            out.append(mm)
        data = {"protocolType": protocol_type, "generation": generation, "protocol": protocol,
                "leader": leader, "members": out}
        if v >= 2:
            data["currentStateTimestamp"] = state_ts
        return encode_value(2, v, data)

    # ---------------------------------------------------------------- KIP-848 (3.8+ layouts)
    def k848_member_key(self, rtype: int, group: str, member: str) -> bytes:
        return encode_key(rtype, {"groupId": group, "memberId": member})

    def k848_group_key(self, rtype: int, group: str) -> bytes:
        return encode_key(rtype, {"groupId": group})

    def member_metadata(self, *, instance_id, client_id, client_host, topics, rebalance_timeout) -> bytes:
        return encode_value(5, 0, {"instanceId": instance_id, "rackId": None, "clientId": client_id,
                                   "clientHost": client_host, "subscribedTopicNames": list(topics),
                                   "subscribedTopicRegex": "", "rebalanceTimeoutMs": rebalance_timeout,
                                   "serverAssignor": None, "classicMemberMetadata": None},
                            kafka_version="3.9")

    def partition_metadata(self, topics: list[tuple[str, str, int]]) -> bytes:
        """topics: (topic_id, name, partitions)."""
        return encode_value(4, 0, {"topics": [
            {"topicId": tid, "topicName": name, "numPartitions": n, "partitionMetadata": []}
            for tid, name, n in topics]}, kafka_version="3.9")

    def group_epoch(self, epoch: int) -> bytes:
        return encode_value(3, 0, {"epoch": epoch}, kafka_version="3.9")

    def target_member(self, by_topic_id: list[tuple[str, list[int]]]) -> bytes:
        return encode_value(7, 0, {"topicPartitions": [{"topicId": t, "partitions": ps} for t, ps in by_topic_id]},
                            kafka_version="3.9")

    def target_metadata(self, epoch: int) -> bytes:
        return encode_value(6, 0, {"assignmentEpoch": epoch}, kafka_version="3.9")

    def current_assignment(self, *, epoch: int, previous_epoch: int, state: int, assigned, pending) -> bytes:
        return encode_value(8, 0, {
            "memberEpoch": epoch, "previousMemberEpoch": previous_epoch, "state": state,
            "assignedPartitions": [{"topicId": t, "partitions": ps} for t, ps in assigned],
            "partitionsPendingRevocation": [{"topicId": t, "partitions": ps} for t, ps in pending]},
            kafka_version="3.9")
