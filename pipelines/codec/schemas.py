"""The record schemas of `__consumer_offsets`, as data.

Each schema mirrors one of Kafka's message JSON files (`group-coordinator/src/main/
resources/common/message/*.json`, `clients/.../ConsumerProtocol*.json`): a struct has
`validVersions`, `flexibleVersions` and `fields`; a field has `name`, `type`, `versions`,
and optionally `nullableVersions`, `taggedVersions` + `tag`, `default`, `ignorable`, and
`fields` when its type is a struct or an array of structs.  Version ranges use Kafka's
own notation ("0+", "3+", "1", "0-4", "none").

Nothing here is code: `pipelines.codec.compiler` turns each (schema, version) into a
reader and a writer once, at import.

Layouts that changed without a version bump (early-access/preview records) are listed
as several `layouts` for the same (type, version), each with the broker releases that
wrote it (`since` inclusive, `until` exclusive).  See docs/codec.md.
"""
from __future__ import annotations


def f(name, type_, versions="0+", **extra):
    """One field, in the shape of a Kafka JSON field spec (keys as in the JSON files)."""
    spec = {"name": name, "type": type_, "versions": versions}
    spec.update(extra)
    return spec


def nullable(name, type_, versions="0+", **extra):
    return f(name, type_, versions, nullableVersions=versions, **extra)


def tagged(name, type_, tag, default, versions="0+", **extra):
    """A tagged field. `default` is the value Kafka's generated code starts from (and leaves
    out of its JSON): the JSON file's "default", else 0 / "" / [] / an all-default struct;
    null only where the JSON file says "null"."""
    return f(name, type_, versions, taggedVersions=versions, tag=tag, default=default, **extra)


def schema(name, valid, flexible, fields):
    return {"name": name, "validVersions": valid, "flexibleVersions": flexible, "fields": fields}


# --- shared sub-structs -------------------------------------------------------------

def _topic_partitions(epochs_tag: bool = True):
    """`TopicPartitions{TopicId, Partitions}` of the KIP-848/share records.

    `AssignmentEpochs` (tag 0, KIP-1251; in Kafka 4.3+ type 8 only) is newer than any
    release we have bytes of; as a tagged field it is harmless for older records (absent),
    so one layout covers all. Nullable, but its default is [] (Kafka 4.4's generated code).
    """
    fields = [f("TopicId", "uuid"), f("Partitions", "[]int32")]
    if epochs_tag:
        fields.append(tagged("AssignmentEpochs", "[]int32", 0, [], nullableVersions="0+"))
    return fields


def _task_ids(epochs_tag: bool = True):
    # Streams `TaskIds`; Kafka 4.2 added the tagged AssignmentEpochs (compatible with 4.1
    # bytes) to the current assignment (type 22) only: the target one (type 21) has none.
    fields = [f("SubtopologyId", "string"), f("Partitions", "[]int32")]
    if epochs_tag:
        fields.append(tagged("AssignmentEpochs", "[]int32", 0, [], nullableVersions="0+"))
    return fields


def _partition_metadata_topics():
    # ConsumerGroupPartitionMetadataValue (3.8+) / ShareGroupPartitionMetadataValue /
    # StreamsGroupPartitionMetadataValue topic list.
    return f("Topics", "[]TopicMetadata", fields=[
        f("TopicId", "uuid"), f("TopicName", "string"), f("NumPartitions", "int32"),
        f("PartitionMetadata", "[]PartitionMetadata", fields=[
            f("Partition", "int32"), f("Racks", "[]string")]),
    ])


def _key(name, *fields):
    # Keys are never flexible; all key strings are int16-length `string`.
    return schema(name, "0", "none", list(fields))


_GROUP_ID = f("GroupId", "string")
_MEMBER_ID = f("MemberId", "string")

_TOPIC_INFO = [f("Name", "string"), f("Partitions", "int32"), f("ReplicationFactor", "int16"),
               f("TopicConfigs", "[]TopicConfig", fields=[f("key", "string"), f("value", "string")])]

# --- the registry ---------------------------------------------------------------------
# type -> {"name", "key": schema, "value": [layout, ...]}; layout = {"since", "until", "schema"}
# since/until are broker releases ("3.8"); None = unbounded.

_OFFSET_COMMIT_VALUE = schema("OffsetCommitValue", "0-4", "4+", [
    f("offset", "int64"),
    f("leaderEpoch", "int32", "3+", default=-1, ignorable=True),
    f("metadata", "string"),
    f("commitTimestamp", "int64"),
    f("expireTimestamp", "int64", "1", default=-1, ignorable=True),
    tagged("topicId", "uuid", 0, "AAAAAAAAAAAAAAAAAAAAAA", versions="4+", ignorable=True),
])

_OFFSET_COMMIT_KEY = schema("OffsetCommitKey", "0", "none", [
    f("group", "string"), f("topic", "string"), f("partition", "int32")])

RECORDS: dict[int, dict] = {
    0: {"name": "LegacyOffsetCommit", "key": _OFFSET_COMMIT_KEY,
        # Up to 4.0 a type-0 key was read with the same OffsetCommitValue (any version).
        "value": [{"since": None, "until": None, "schema": _OFFSET_COMMIT_VALUE}]},
    1: {"name": "OffsetCommit", "key": _OFFSET_COMMIT_KEY,
        "value": [{"since": None, "until": None, "schema": _OFFSET_COMMIT_VALUE}]},
    2: {"name": "GroupMetadata", "key": schema("GroupMetadataKey", "0", "none", [f("group", "string")]),
        "value": [{"since": None, "until": None, "schema": schema("GroupMetadataValue", "0-4", "4+", [
            f("protocolType", "string"),
            f("generation", "int32"),
            nullable("protocol", "string"),
            nullable("leader", "string"),
            f("currentStateTimestamp", "int64", "2+", default=-1, ignorable=True),
            f("members", "[]MemberMetadata", fields=[
                f("memberId", "string"),
                f("groupInstanceId", "string", "3+", nullableVersions="3+", default=None, ignorable=True),
                f("clientId", "string"),
                f("clientHost", "string"),
                f("rebalanceTimeout", "int32", "1+", ignorable=True),
                f("sessionTimeout", "int32"),
                f("subscription", "bytes"),
                f("assignment", "bytes"),
            ]),
        ])}]},
    3: {"name": "ConsumerGroupMetadata", "key": _key("ConsumerGroupMetadataKey", _GROUP_ID),
        "value": [{"since": "3.7", "until": None, "schema": schema("ConsumerGroupMetadataValue", "0", "0+", [
            f("Epoch", "int32"),
            tagged("MetadataHash", "int64", 0, 0),          # 4.1+ (KIP-1101)
        ])}]},
    4: {"name": "ConsumerGroupPartitionMetadata", "key": _key("ConsumerGroupPartitionMetadataKey", _GROUP_ID),
        "value": [
            {"since": "3.7", "until": "3.8", "schema": schema("ConsumerGroupPartitionMetadataValue", "0", "0+", [
                f("Epoch", "int32"),
                f("Topics", "[]TopicMetadata", fields=[
                    f("TopicId", "uuid"), f("TopicName", "string"), f("NumPartitions", "int32"),
                    f("PartitionMetadata", "[]PartitionMetadata", fields=[
                        f("Partition", "int32"), f("Racks", "[]string")]),
                ]),
            ])},
            {"since": "3.8", "until": None, "schema": schema("ConsumerGroupPartitionMetadataValue", "0", "0+", [
                _partition_metadata_topics(),
            ])},
        ]},
    5: {"name": "ConsumerGroupMemberMetadata",
        "key": _key("ConsumerGroupMemberMetadataKey", _GROUP_ID, _MEMBER_ID),
        "value": [
            {"since": "3.7", "until": "3.8", "schema": schema("ConsumerGroupMemberMetadataValue", "0", "0+", [
                nullable("InstanceId", "string"), nullable("RackId", "string"),
                f("ClientId", "string"), f("ClientHost", "string"),
                f("SubscribedTopicNames", "[]string"), nullable("SubscribedTopicRegex", "string"),
                f("RebalanceTimeoutMs", "int32", default=-1), nullable("ServerAssignor", "string"),
                f("Assignors", "[]Assignor", fields=[
                    f("Name", "string"), f("MinimumVersion", "int16"), f("MaximumVersion", "int16"),
                    f("Reason", "int8"), f("Version", "int16"), f("Metadata", "bytes")]),
            ])},
            {"since": "3.8", "until": None, "schema": schema("ConsumerGroupMemberMetadataValue", "0", "0+", [
                nullable("InstanceId", "string"), nullable("RackId", "string"),
                f("ClientId", "string"), f("ClientHost", "string"),
                f("SubscribedTopicNames", "[]string"), nullable("SubscribedTopicRegex", "string"),
                f("RebalanceTimeoutMs", "int32", default=-1), nullable("ServerAssignor", "string"),
                # Nullable, but the default (what Kafka's JSON leaves out) is the all-default
                # struct, not null: Kafka 3.9 writes null explicitly and prints it.
                tagged("ClassicMemberMetadata", "ClassicMemberMetadata", 0,
                       {"sessionTimeoutMs": 0, "supportedProtocols": []}, nullableVersions="0+", fields=[
                    f("SessionTimeoutMs", "int32"),
                    f("SupportedProtocols", "[]ClassicProtocol", fields=[
                        f("Name", "string"), f("Metadata", "bytes")]),
                ]),
            ])},
        ]},
    6: {"name": "ConsumerGroupTargetAssignmentMetadata",
        "key": _key("ConsumerGroupTargetAssignmentMetadataKey", _GROUP_ID),
        "value": [{"since": "3.7", "until": None, "schema": schema("ConsumerGroupTargetAssignmentMetadataValue", "0", "0+", [
            f("AssignmentEpoch", "int32"),
            tagged("AssignmentTimestamp", "int64", 0, 0),      # KIP-1263 (Kafka 4.3+)
        ])}]},
    7: {"name": "ConsumerGroupTargetAssignmentMember",
        "key": _key("ConsumerGroupTargetAssignmentMemberKey", _GROUP_ID, _MEMBER_ID),
        "value": [
            {"since": "3.7", "until": "3.8", "schema": schema("ConsumerGroupTargetAssignmentMemberValue", "0", "0+", [
                f("Error", "int8"),
                f("TopicPartitions", "[]TopicPartition", fields=_topic_partitions(False)),
                f("MetadataVersion", "int16"), f("MetadataBytes", "bytes"),
            ])},
            {"since": "3.8", "until": None, "schema": schema("ConsumerGroupTargetAssignmentMemberValue", "0", "0+", [
                f("TopicPartitions", "[]TopicPartition", fields=_topic_partitions(False)),
            ])},
        ]},
    8: {"name": "ConsumerGroupCurrentMemberAssignment",
        "key": _key("ConsumerGroupCurrentMemberAssignmentKey", _GROUP_ID, _MEMBER_ID),
        "value": [
            {"since": "3.7", "until": "3.8", "schema": schema("ConsumerGroupCurrentMemberAssignmentValue", "0", "0+", [
                f("MemberEpoch", "int32"), f("PreviousMemberEpoch", "int32"), f("TargetMemberEpoch", "int32"),
                f("AssignedPartitions", "[]TopicPartitions", fields=_topic_partitions(False)),
                f("PartitionsPendingRevocation", "[]TopicPartitions", fields=_topic_partitions(False)),
                f("PartitionsPendingAssignment", "[]TopicPartitions", fields=_topic_partitions(False)),
                f("Error", "int8"), f("MetadataVersion", "int16"), f("MetadataBytes", "bytes"),
            ])},
            {"since": "3.8", "until": None, "schema": schema("ConsumerGroupCurrentMemberAssignmentValue", "0", "0+", [
                f("MemberEpoch", "int32"), f("PreviousMemberEpoch", "int32"), f("State", "int8"),
                f("AssignedPartitions", "[]TopicPartitions", fields=_topic_partitions()),
                f("PartitionsPendingRevocation", "[]TopicPartitions", fields=_topic_partitions()),
            ])},
        ]},
    9: {"name": "ShareGroupPartitionMetadata", "key": _key("ShareGroupPartitionMetadataKey", _GROUP_ID),
        "value": [{"since": "3.9", "until": "4.1", "schema": schema("ShareGroupPartitionMetadataValue", "0", "0+", [
            _partition_metadata_topics()])}]},
    10: {"name": "ShareGroupMemberMetadata", "key": _key("ShareGroupMemberMetadataKey", _GROUP_ID, _MEMBER_ID),
         "value": [{"since": "3.9", "until": None, "schema": schema("ShareGroupMemberMetadataValue", "0", "0+", [
             nullable("RackId", "string"), f("ClientId", "string"), f("ClientHost", "string"),
             f("SubscribedTopicNames", "[]string")])}]},
    11: {"name": "ShareGroupMetadata", "key": _key("ShareGroupMetadataKey", _GROUP_ID),
         "value": [
             {"since": "3.9", "until": "4.1", "schema": schema("ShareGroupMetadataValue", "0", "0+", [
                 f("Epoch", "int32")])},
             {"since": "4.1", "until": None, "schema": schema("ShareGroupMetadataValue", "0", "0+", [
                 f("Epoch", "int32"), f("MetadataHash", "int64")])},
         ]},
    12: {"name": "ShareGroupTargetAssignmentMetadata",
         "key": _key("ShareGroupTargetAssignmentMetadataKey", _GROUP_ID),
         "value": [{"since": "4.0", "until": None, "schema": schema("ShareGroupTargetAssignmentMetadataValue", "0", "0+", [
             f("AssignmentEpoch", "int32"), tagged("AssignmentTimestamp", "int64", 0, 0)])}]},
    13: {"name": "ShareGroupTargetAssignmentMember",
         "key": _key("ShareGroupTargetAssignmentMemberKey", _GROUP_ID, _MEMBER_ID),
         "value": [{"since": "4.0", "until": None, "schema": schema("ShareGroupTargetAssignmentMemberValue", "0", "0+", [
             f("TopicPartitions", "[]TopicPartition", fields=_topic_partitions(False))])}]},
    14: {"name": "ShareGroupCurrentMemberAssignment",
         "key": _key("ShareGroupCurrentMemberAssignmentKey", _GROUP_ID, _MEMBER_ID),
         "value": [{"since": "4.0", "until": None, "schema": schema("ShareGroupCurrentMemberAssignmentValue", "0", "0+", [
             f("MemberEpoch", "int32"), f("PreviousMemberEpoch", "int32"), f("State", "int8"),
             f("AssignedPartitions", "[]TopicPartitions", fields=_topic_partitions(False))])}]},
    15: {"name": "ShareGroupStatePartitionMetadata",
         "key": _key("ShareGroupStatePartitionMetadataKey", _GROUP_ID),
         "value": [
             {"since": "4.0", "until": "4.1", "schema": schema("ShareGroupStatePartitionMetadataValue", "0", "0+", [
                 f("InitializedTopics", "[]TopicPartitionsInfo", fields=[
                     f("TopicId", "uuid"), f("TopicName", "string"), f("Partitions", "[]int32")]),
                 f("DeletingTopics", "[]TopicInfo", fields=[f("TopicId", "uuid"), f("TopicName", "string")]),
             ])},
             # 4.1 prepended InitializingTopics (KAFKA-18827). A `CreateTimestamp` per entry
             # was on trunk for a while but is in no release: the generated classes of 4.1.0,
             # 4.2.0, 4.3.0 and 4.4.0 have none, and Kafka 4.4's DumpLogSegments rejects
             # entries carrying one (tests/test_codec_dumplogsegments.py).
             {"since": "4.1", "until": None, "schema": schema("ShareGroupStatePartitionMetadataValue", "0", "0+", [
                 f("InitializingTopics", "[]TopicPartitionsInfo", fields=[
                     f("TopicId", "uuid"), f("TopicName", "string"), f("Partitions", "[]int32")]),
                 f("InitializedTopics", "[]TopicPartitionsInfo", fields=[
                     f("TopicId", "uuid"), f("TopicName", "string"), f("Partitions", "[]int32")]),
                 f("DeletingTopics", "[]TopicInfo", fields=[f("TopicId", "uuid"), f("TopicName", "string")]),
             ])},
         ]},
    16: {"name": "ConsumerGroupRegularExpression",
         "key": _key("ConsumerGroupRegularExpressionKey", _GROUP_ID, f("RegularExpression", "string")),
         "value": [{"since": "4.0", "until": None, "schema": schema("ConsumerGroupRegularExpressionValue", "0", "0+", [
             f("Topics", "[]string"), f("Version", "int64"), f("Timestamp", "int64")])}]},
    17: {"name": "StreamsGroupMetadata", "key": _key("StreamsGroupMetadataKey", _GROUP_ID),
         "value": [{"since": "4.1", "until": None, "schema": schema("StreamsGroupMetadataValue", "0", "0+", [
             f("Epoch", "int32"), f("MetadataHash", "int64"),
             # 4.2 added tags 0-1 and 4.4 tags 2-3, so 4.1 bytes read the same way.
             tagged("ValidatedTopologyEpoch", "int32", 0, -1),
             tagged("LastAssignmentConfigs", "[]LastAssignmentConfig", 1, [], nullableVersions="0+",
                    fields=[f("Key", "string"), f("Value", "string")]),
             tagged("StoredDescriptionTopologyEpoch", "int32", 2, -1),
             tagged("FailedDescriptionTopologyEpoch", "int32", 3, -1),
         ])}]},
    18: {"name": "StreamsGroupPartitionMetadata", "key": _key("StreamsGroupPartitionMetadataKey", _GROUP_ID),
         # Only on pre-release branches (kip1071); layout of that branch.
         "value": [{"since": None, "until": None, "schema": schema("StreamsGroupPartitionMetadataValue", "0", "0+", [
             _partition_metadata_topics()])}]},
    19: {"name": "StreamsGroupMemberMetadata", "key": _key("StreamsGroupMemberMetadataKey", _GROUP_ID, _MEMBER_ID),
         "value": [{"since": "4.1", "until": None, "schema": schema("StreamsGroupMemberMetadataValue", "0", "0+", [
             nullable("InstanceId", "string"), nullable("RackId", "string"),
             f("ClientId", "string"), f("ClientHost", "string"),
             f("RebalanceTimeoutMs", "int32"), f("TopologyEpoch", "int32"), f("ProcessId", "string"),
             nullable("UserEndpoint", "Endpoint", fields=[f("Host", "string"), f("Port", "uint16")]),
             f("ClientTags", "[]KeyValue", fields=[f("Key", "string"), f("Value", "string")]),
         ])}]},
    20: {"name": "StreamsGroupTargetAssignmentMetadata",
         "key": _key("StreamsGroupTargetAssignmentMetadataKey", _GROUP_ID),
         "value": [{"since": "4.1", "until": None, "schema": schema("StreamsGroupTargetAssignmentMetadataValue", "0", "0+", [
             f("AssignmentEpoch", "int32"), tagged("AssignmentTimestamp", "int64", 0, 0)])}]},
    21: {"name": "StreamsGroupTargetAssignmentMember",
         "key": _key("StreamsGroupTargetAssignmentMemberKey", _GROUP_ID, _MEMBER_ID),
         "value": [{"since": "4.1", "until": None, "schema": schema("StreamsGroupTargetAssignmentMemberValue", "0", "0+", [
             f("ActiveTasks", "[]TaskIds", fields=_task_ids(False)),
             f("StandbyTasks", "[]TaskIds", fields=_task_ids(False)),
             f("WarmupTasks", "[]TaskIds", fields=_task_ids(False)),
         ])}]},
    22: {"name": "StreamsGroupCurrentMemberAssignment",
         "key": _key("StreamsGroupCurrentMemberAssignmentKey", _GROUP_ID, _MEMBER_ID),
         "value": [{"since": "4.1", "until": None, "schema": schema("StreamsGroupCurrentMemberAssignmentValue", "0", "0+", [
             f("MemberEpoch", "int32"), f("PreviousMemberEpoch", "int32"), f("State", "int8"),
             f("ActiveTasks", "[]TaskIds", fields=_task_ids()),
             f("StandbyTasks", "[]TaskIds", fields=_task_ids()),
             f("WarmupTasks", "[]TaskIds", fields=_task_ids()),
             f("ActiveTasksPendingRevocation", "[]TaskIds", fields=_task_ids()),
             f("StandbyTasksPendingRevocation", "[]TaskIds", fields=_task_ids()),
             f("WarmupTasksPendingRevocation", "[]TaskIds", fields=_task_ids()),
         ])}]},
    23: {"name": "StreamsGroupTopology", "key": _key("StreamsGroupTopologyKey", _GROUP_ID),
         "value": [{"since": "4.1", "until": None, "schema": schema("StreamsGroupTopologyValue", "0", "0+", [
             f("Epoch", "int32"),
             f("Subtopologies", "[]Subtopology", fields=[
                 f("SubtopologyId", "string"),
                 f("SourceTopics", "[]string"),
                 f("SourceTopicRegex", "[]string"),
                 f("StateChangelogTopics", "[]TopicInfo", fields=_TOPIC_INFO),
                 f("RepartitionSinkTopics", "[]string"),
                 f("RepartitionSourceTopics", "[]TopicInfo", fields=_TOPIC_INFO),
                 f("CopartitionGroups", "[]CopartitionGroup", fields=[
                     f("SourceTopics", "[]int16"), f("SourceTopicRegex", "[]int16"),
                     f("RepartitionSourceTopics", "[]int16")]),
             ]),
         ])}]},
}

# --- embedded consumer protocol (bytes inside GroupMetadata members) ------------------
# clients/src/main/resources/common/message/ConsumerProtocol{Subscription,Assignment}.json:
# non-flexible, written after an int16 version prefix.

_TOPIC_PARTITION = [f("topic", "string"), f("partitions", "[]int32")]

CONSUMER_PROTOCOL_SUBSCRIPTION = schema("ConsumerProtocolSubscription", "0-3", "none", [
    f("Topics", "[]string"),
    nullable("UserData", "bytes", default=None),
    f("OwnedPartitions", "[]TopicPartition", "1+", ignorable=True, fields=_TOPIC_PARTITION),
    f("GenerationId", "int32", "2+", default=-1, ignorable=True),
    f("RackId", "string", "3+", nullableVersions="3+", default=None, ignorable=True),
])

CONSUMER_PROTOCOL_ASSIGNMENT = schema("ConsumerProtocolAssignment", "0-3", "none", [
    f("AssignedPartitions", "[]TopicPartition", fields=_TOPIC_PARTITION),
    nullable("UserData", "bytes", default=None),
])

# StickyAssignor user data (Struct schemas in clients/.../StickyAssignor.java; field names
# are Kafka's own, snake_case): V1 = {previous_assignment, generation}, V0 without generation.
STICKY_USER_DATA_V0 = schema("StickyAssignorUserDataV0", "0", "none", [
    f("previous_assignment", "[]TopicAssignment", fields=[f("topic", "string"), f("partitions", "[]int32")]),
])
STICKY_USER_DATA_V1 = schema("StickyAssignorUserDataV1", "0", "none", [
    f("previous_assignment", "[]TopicAssignment", fields=[f("topic", "string"), f("partitions", "[]int32")]),
    f("generation", "int32"),
])
# CooperativeStickyAssignor.java: COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0 = {generation:int32}.
COOPERATIVE_STICKY_USER_DATA = schema("CooperativeStickyAssignorUserData", "0", "none", [
    f("generation", "int32"),
])
