"""Decoded `__consumer_offsets` records → silver rows (pure Python, no Spark).

Each builder takes one bronze row (a dict with `key`, `value` and the source columns)
and returns rows shaped like the Arrow schemas in `schemas.py`. Spark calls them
inside `mapInArrow` (see `decode_job.py`), so they must stay cheap and never raise:
a record that cannot be decoded becomes a `DECODE_ERRORS` row with the reason.
"""
from __future__ import annotations

import base64
import json

from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any

from pipelines.codec import RECORD_TYPES, CodecError, decode_key, decode_value

# Key types by family (kafka-internals.md §1.3).
OFFSET_COMMIT_TYPES = (0, 1)
GROUP_METADATA_TYPE = 2
CONSUMER_GROUP_TYPES = (3, 4, 5, 6, 7, 8)

# KIP-848 member states (group-coordinator/.../modern/MemberState.java).
MEMBER_STATES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS", 127: "UNKNOWN"}


def ms_to_ts(ms: int | None) -> datetime | None:
    """Kafka epoch milliseconds → UTC datetime; Kafka's "unset" (-1 or absent) → None."""
    if ms is None or ms < 0:
        return None
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


def source_columns(row: dict) -> dict:
    return {
        "cluster": row["cluster"],
        "coordinator_partition": row["partition"],
        "log_offset": row["offset"],
        "record_ts": ms_to_ts(row.get("timestamp")),
        "source": row.get("source"),
        "coordinator_epoch": row.get("leader_epoch"),
    }


def decode_error_row(row: dict, record_type: int | None, reason: str) -> dict:
    return {
        "record_type": record_type,
        "reason": reason,
        "key": row.get("key"),
        "value": row.get("value"),
        **source_columns(row),
    }


def _decode(row: dict, kafka_version: str | None) -> tuple[int, dict, int | None, dict | None]:
    record_type, key = decode_key(row["key"])
    decoded = decode_value(record_type, row["value"], kafka_version)
    if decoded is None:
        return record_type, key, None, None
    version, value = decoded
    return record_type, key, version, value


def offset_commit_rows(row: dict, kafka_version: str | None = None) -> tuple[list[dict], list[dict]]:
    """One OffsetCommit record (types 0/1) → ([offset_commits row], [errors])."""
    try:
        record_type, key, version, value = _decode(row, kafka_version)
    except CodecError as exc:
        return [], [decode_error_row(row, None, str(exc))]
    if record_type not in OFFSET_COMMIT_TYPES:
        return [], []
    out = {
        "group_id": key["group"],
        "topic": key["topic"],
        "partition": key["partition"],
        "is_deletion": value is None,
        "offset": None,
        "leader_epoch": None,
        "metadata": None,
        "commit_ts": None,
        "expire_ts": None,
        "value_version": version,
        "transactional": bool(row.get("transactional")),
        "producer_id": row.get("producer_id"),
        "effective_log_offset": row["offset"],
        **source_columns(row),
    }
    if value is not None:
        leader_epoch = value.get("leaderEpoch")
        out.update(
            offset=value["offset"],
            leader_epoch=None if leader_epoch is None or leader_epoch < 0 else leader_epoch,
            metadata=value.get("metadata"),
            # v0 (0.8.2 / Scala V0) named the commit time `timestamp`.
            commit_ts=ms_to_ts(value.get("commitTimestamp", value.get("timestamp"))),
            expire_ts=ms_to_ts(value.get("expireTimestamp")),
        )
    return [out], []


def _topic_partitions(entries: Iterable[dict] | None, topic_key: str = "topic") -> Iterator[tuple[str, int]]:
    for entry in entries or ():
        for p in entry.get("partitions") or ():
            yield entry[topic_key], p


def _user_data_generation(blob: Any) -> int | None:
    """Generation carried in sticky / cooperative-sticky user data, when the codec decoded it."""
    if isinstance(blob, dict):
        gen = blob.get("generation")
        if isinstance(gen, int) and gen >= 0:
            return gen
    return None


def group_metadata_rows(row: dict, kafka_version: str | None = None) -> tuple[list[dict], list[dict], list[dict]]:
    """One GroupMetadata record (type 2) → ([group_generations row], [member_assignments rows], [errors])."""
    try:
        record_type, key, version, value = _decode(row, kafka_version)
    except CodecError as exc:
        return [], [], [decode_error_row(row, GROUP_METADATA_TYPE, str(exc))]
    if record_type != GROUP_METADATA_TYPE:
        return [], [], []
    src = source_columns(row)
    group = key["group"]
    if value is None:
        return [
            {
                "group_id": group,
                "generation": None,
                "is_deletion": True,
                "protocol_type": None,
                "protocol": None,
                "leader": None,
                "current_state_ts": None,
                "member_count": None,
                "value_version": None,
                **src,
            }
        ], [], []
    members = value.get("members") or []
    generation = value["generation"]
    gen_row = {
        "group_id": group,
        "generation": generation,
        "is_deletion": False,
        "protocol_type": value.get("protocolType"),
        "protocol": value.get("protocol"),
        "leader": value.get("leader"),
        "current_state_ts": ms_to_ts(value.get("currentStateTimestamp")),
        "member_count": len(members),
        "value_version": version,
        **src,
    }
    member_rows = []
    for m in members:
        sub = m.get("subscription")
        asg = m.get("assignment")
        error = None
        if not isinstance(sub, dict) or not isinstance(asg, dict):
            # Not a consumer-protocol group (connect, streams...) or an unparseable blob:
            # membership is still real, the partitions are unknown.
            error = None if value.get("protocolType") != "consumer" else "embedded consumer protocol not decoded"
            sub = sub if isinstance(sub, dict) else {}
            asg = asg if isinstance(asg, dict) else {}
        base = {
            "group_id": group,
            "generation": generation,
            "protocol": value.get("protocol"),
            "member_id": m["memberId"],
            "group_instance_id": m.get("groupInstanceId"),
            "client_id": m.get("clientId"),
            "client_host": m.get("clientHost"),
            "session_timeout_ms": m.get("sessionTimeout"),
            # v0 had no rebalance timeout: the session timeout played that role.
            "rebalance_timeout_ms": m.get("rebalanceTimeout", m.get("sessionTimeout")),
            "is_leader": m["memberId"] == value.get("leader"),
            "subscribed_topics": list(sub.get("topics") or []),
            "owned_partitions": [f"{t}-{p}" for t, p in _topic_partitions(sub.get("ownedPartitions"))],
            "user_data_generation": _user_data_generation(sub.get("userData")),
            "decode_error": error,
            **src,
        }
        assigned = list(_topic_partitions(asg.get("assignedPartitions")))
        if not assigned:
            member_rows.append({**base, "topic": None, "partition": None})
        for topic, p in assigned:
            member_rows.append({**base, "topic": topic, "partition": p})
    return [gen_row], member_rows, []


def consumer_group_rows(row: dict, kafka_version: str | None = None) -> tuple[dict[str, list[dict]], list[dict]]:
    """One KIP-848 record (types 3–8) → ({silver table: rows}, [errors])."""
    try:
        record_type, key, version, value = _decode(row, kafka_version)
    except CodecError as exc:
        return {}, [decode_error_row(row, None, str(exc))]
    src = source_columns(row)
    group = key.get("groupId")
    deleted = value is None
    value = value or {}
    out: dict[str, list[dict]] = {}
    if record_type == 3:
        out["consumer_group_epochs"] = [
            {"group_id": group, "epoch": value.get("epoch"), "metadata_hash": value.get("metadataHash"),
             "is_deletion": deleted, **src}
        ]
    elif record_type == 4:
        out["topic_ids"] = [
            {"topic_id": t["topicId"], "topic": t["topicName"], "num_partitions": t.get("numPartitions"),
             "group_id": group, **src}
            for t in value.get("topics") or ()
        ]
    elif record_type == 5:
        out["consumer_group_members"] = [
            {
                "group_id": group,
                "member_id": key["memberId"],
                "is_deletion": deleted,
                "instance_id": value.get("instanceId"),
                "rack_id": value.get("rackId"),
                "client_id": value.get("clientId"),
                "client_host": value.get("clientHost"),
                "subscribed_topic_names": value.get("subscribedTopicNames"),
                "subscribed_topic_regex": value.get("subscribedTopicRegex") or None,
                "rebalance_timeout_ms": value.get("rebalanceTimeoutMs"),
                "server_assignor": value.get("serverAssignor"),
                "classic_protocol": value.get("classicMemberMetadata") is not None,
                **src,
            }
        ]
    elif record_type == 6:
        out["target_assignment_epochs"] = [
            {"group_id": group, "assignment_epoch": value.get("assignmentEpoch"), "is_deletion": deleted, **src}
        ]
    elif record_type == 7:
        base = {"group_id": group, "member_id": key["memberId"], "is_deletion": deleted, **src}
        parts = list(_topic_partitions(value.get("topicPartitions"), "topicId"))
        out["target_assignment_member_deltas"] = [
            {**base, "topic_id": t, "partition": p} for t, p in parts
        ] or [{**base, "topic_id": None, "partition": None}]
    elif record_type == 8:
        state = value.get("state")
        base = {
            "group_id": group,
            "member_id": key["memberId"],
            "is_deletion": deleted,
            "member_epoch": value.get("memberEpoch"),
            "previous_member_epoch": value.get("previousMemberEpoch"),
            "state": state,
            "state_name": MEMBER_STATES.get(state) if state is not None else None,
            **src,
        }
        rows = [
            {**base, "topic_id": t, "partition": p, "pending_revocation": False}
            for t, p in _topic_partitions(value.get("assignedPartitions"), "topicId")
        ] + [
            {**base, "topic_id": t, "partition": p, "pending_revocation": True}
            for t, p in _topic_partitions(value.get("partitionsPendingRevocation"), "topicId")
        ]
        out["current_assignments"] = rows or [{**base, "topic_id": None, "partition": None, "pending_revocation": None}]
    return out, []





def _json(data: Any) -> str:
    """Decoded record fields as JSON text; bytes (user data, metadata blobs) as base64."""
    return json.dumps(data, sort_keys=True, default=lambda v: base64.b64encode(bytes(v)).decode("ascii")
                      if isinstance(v, (bytes, bytearray, memoryview)) else str(v))


def other_group_rows(row: dict, kafka_version: str | None = None) -> tuple[dict[str, list[dict]], list[dict]]:
    """A record of a group kind no other silver table takes (share and streams groups, and
    any type added later that the codec knows) → one `other_group_records` row, decoded
    to JSON; a type the codec does not know → a decode error (quarantine)."""
    try:
        record_type, key, version, value = _decode(row, kafka_version)
    except CodecError as exc:
        return {}, [decode_error_row(row, None, str(exc))]
    name = RECORD_TYPES[record_type]
    kind = "share" if name.startswith("ShareGroup") else "streams" if name.startswith("StreamsGroup") else "other"
    return {"other_group_records": [{
        "group_kind": kind,
        "record_type": record_type,
        "record_type_name": name,
        "group_id": key.get("groupId"),
        "is_deletion": value is None,
        "value_version": version,
        "key_json": _json(key),
        "value_json": None if value is None else _json(value),
        **source_columns(row),
    }]}, []
