"""Arrow schemas of the silver tables (what each row means: README, "How it works").

Defined once, in Arrow, because both sides use them: the Python row builders
(`records.py`) fill them and Spark takes them as the output schema of `mapInArrow`.
Timestamps are epoch milliseconds from Kafka; they are stored as UTC microsecond
timestamps so that Spark and delta-rs agree on them.
"""
from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")

# Where a silver row came from: the bronze key of the record it was decoded from.
_SOURCE = [
    pa.field("cluster", pa.string(), nullable=False),
    pa.field("coordinator_partition", pa.int32(), nullable=False),
    pa.field("log_offset", pa.int64(), nullable=False),
    pa.field("record_ts", TS),
    pa.field("source", pa.string()),
    # The leader epoch of the __consumer_offsets partition when the record was written: the
    # coordinator's term. It goes up each time the group's coordinator moves to another
    # broker (a broker stopped, a leader election), so a failover is visible in the history.
    # Null where the input does not carry it (message format v0/v1 batches).
    pa.field("coordinator_epoch", pa.int32()),
]

GROUP_GENERATIONS = pa.schema(
    [
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("generation", pa.int32()),  # null on a deletion (tombstone)
        pa.field("is_deletion", pa.bool_(), nullable=False),
        pa.field("protocol_type", pa.string()),
        pa.field("protocol", pa.string()),
        pa.field("leader", pa.string()),
        pa.field("current_state_ts", TS),
        pa.field("member_count", pa.int32()),
        pa.field("value_version", pa.int16()),
        *_SOURCE,
    ]
)

MEMBER_ASSIGNMENTS = pa.schema(
    [
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("generation", pa.int32(), nullable=False),
        pa.field("protocol", pa.string()),
        pa.field("member_id", pa.string(), nullable=False),
        pa.field("group_instance_id", pa.string()),
        pa.field("client_id", pa.string()),
        pa.field("client_host", pa.string()),
        pa.field("session_timeout_ms", pa.int32()),
        pa.field("rebalance_timeout_ms", pa.int32()),
        pa.field("is_leader", pa.bool_()),
        pa.field("subscribed_topics", pa.list_(pa.string())),
        pa.field("owned_partitions", pa.list_(pa.string())),  # "topic-p" claimed by the member (cooperative)
        pa.field("user_data_generation", pa.int32()),  # sticky/cooperative generation from user data
        pa.field("topic", pa.string()),  # null with partition: the member got nothing
        pa.field("partition", pa.int32()),
        pa.field("decode_error", pa.string()),
        *_SOURCE,
    ]
)

OFFSET_COMMITS = pa.schema(
    [
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64()),  # null on a deletion (tombstone)
        pa.field("is_deletion", pa.bool_(), nullable=False),
        pa.field("leader_epoch", pa.int32()),
        pa.field("metadata", pa.string()),
        pa.field("commit_ts", TS),
        pa.field("expire_ts", TS),
        pa.field("value_version", pa.int16()),
        pa.field("transactional", pa.bool_()),
        pa.field("producer_id", pa.int64()),
        # Where the commit took effect: its own position, or for a transactional
        # commit the position of the COMMIT marker that made it visible.
        pa.field("effective_log_offset", pa.int64()),
        *_SOURCE,
    ]
)

CONSUMER_GROUP_EPOCHS = pa.schema(
    [
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("epoch", pa.int32()),
        pa.field("metadata_hash", pa.int64()),
        pa.field("is_deletion", pa.bool_(), nullable=False),
        *_SOURCE,
    ]
)

CONSUMER_GROUP_MEMBERS = pa.schema(
    [
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("member_id", pa.string(), nullable=False),
        pa.field("is_deletion", pa.bool_(), nullable=False),
        pa.field("instance_id", pa.string()),
        pa.field("rack_id", pa.string()),
        pa.field("client_id", pa.string()),
        pa.field("client_host", pa.string()),
        pa.field("subscribed_topic_names", pa.list_(pa.string())),
        pa.field("subscribed_topic_regex", pa.string()),
        pa.field("rebalance_timeout_ms", pa.int32()),
        pa.field("server_assignor", pa.string()),
        pa.field("classic_protocol", pa.bool_()),
        *_SOURCE,
    ]
)

# One row per (member, topic, partition) of one type-7 record: a *delta* of the target.
# `target_assignments` (materialized per epoch) is built from these in Spark.
TARGET_ASSIGNMENT_MEMBER_DELTAS = pa.schema(
    [
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("member_id", pa.string(), nullable=False),
        pa.field("is_deletion", pa.bool_(), nullable=False),
        pa.field("topic_id", pa.string()),
        pa.field("partition", pa.int32()),
        *_SOURCE,
    ]
)

TARGET_ASSIGNMENT_EPOCHS = pa.schema(
    [
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("assignment_epoch", pa.int32()),
        pa.field("is_deletion", pa.bool_(), nullable=False),
        *_SOURCE,
    ]
)

CURRENT_ASSIGNMENTS = pa.schema(
    [
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("member_id", pa.string(), nullable=False),
        pa.field("is_deletion", pa.bool_(), nullable=False),
        pa.field("member_epoch", pa.int32()),
        pa.field("previous_member_epoch", pa.int32()),
        pa.field("state", pa.int8()),
        pa.field("state_name", pa.string()),
        pa.field("topic_id", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("pending_revocation", pa.bool_()),
        *_SOURCE,
    ]
)

TOPIC_IDS = pa.schema(
    [
        pa.field("topic_id", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("num_partitions", pa.int32()),
        pa.field("group_id", pa.string()),
        *_SOURCE,
    ]
)

# Coordinator records of group kinds the product does not analyse (share groups, KIP-932;
# streams groups, KIP-1071), decoded and kept whole: nothing in __consumer_offsets is
# dropped on the way to silver, and SQL can reach them.
OTHER_GROUP_RECORDS = pa.schema(
    [
        pa.field("group_kind", pa.string(), nullable=False),     # share | streams | other
        pa.field("record_type", pa.int32(), nullable=False),
        pa.field("record_type_name", pa.string(), nullable=False),
        pa.field("group_id", pa.string()),
        pa.field("is_deletion", pa.bool_(), nullable=False),
        pa.field("value_version", pa.int16()),
        pa.field("key_json", pa.string(), nullable=False),
        pa.field("value_json", pa.string()),
        *_SOURCE,
    ]
)

# Records the silver decoder could not read: they go to quarantine with the reason.
DECODE_ERRORS = pa.schema(
    [
        pa.field("record_type", pa.int32()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        *_SOURCE,
    ]
)
