"""Round trips through the codec for every record type, version and layout of the
registry, size limits, tagged fields, the embedded consumer protocol, control records,
and clear errors for bad input."""
from __future__ import annotations

import base64
import json
import os
import random
import struct
from pathlib import Path

import pytest

from pipelines.codec import (RECORD_TYPES, CodecError, decode_control_record, decode_key,
                             decode_record, decode_value, encode_control_record, encode_key,
                             encode_value)
from pipelines.codec.compiler import camel, in_versions, parse_versions
from pipelines.codec.schemas import RECORDS

SHARED = Path(os.environ.get("REBALANCE_AUDIT_SHARED",
                             Path(__file__).resolve().parents[1].parent / "shared"))


# --- a value generator that walks the schema data (independently of the codec) ----------

def _gen_value(spec, version, rng, flexible, strings):
    type_ = spec["type"]
    nullable_ok = in_versions(spec.get("nullableVersions"), version)
    if nullable_ok and rng.random() < 0.25:
        return None
    if type_.startswith("[]"):
        n = rng.choice([0, 0, 1, 2, 3])
        elem = {**spec, "type": type_[2:]}
        elem.pop("nullableVersions", None)
        return [_gen_value(elem, version, rng, flexible, strings) for _ in range(n)]
    if type_ == "int8":
        return rng.randint(-128, 127)
    if type_ == "int16":
        return rng.randint(-32768, 32767)
    if type_ == "int32":
        return rng.randint(-2**31, 2**31 - 1)
    if type_ == "int64":
        return rng.randint(-2**63, 2**63 - 1)
    if type_ == "uint16":
        return rng.randint(0, 65535)
    if type_ == "uuid":
        return base64.urlsafe_b64encode(rng.randbytes(16)).rstrip(b"=").decode()
    if type_ == "string":
        return rng.choice(strings)
    if type_ == "bytes":
        return base64.b64encode(rng.randbytes(rng.choice([0, 1, 127, 128, 300]))).decode()
    return _gen_struct(spec["fields"], version, rng, flexible, strings)


def _gen_struct(fields, version, rng, flexible, strings):
    out = {}
    for spec in fields:
        if not in_versions(spec["versions"], version):
            continue
        if flexible and in_versions(spec.get("taggedVersions"), version) and rng.random() < 0.4:
            continue  # tagged fields are present only when written
        out[camel(spec["name"])] = _gen_value(spec, version, rng, flexible, strings)
    return out


STRINGS = ["", "a", "x" * 127, "y" * 128, "é" * 100, "z" * 32767]


def _cases():
    for rtype, entry in RECORDS.items():
        for layout in entry["value"]:
            sch = layout["schema"]
            lo, hi = parse_versions(sch["validVersions"])
            for version in range(lo, hi + 1):
                yield pytest.param(rtype, version, layout, id=f"{rtype}-v{version}-{layout['since']}")


@pytest.mark.parametrize("rtype,version,layout", list(_cases()))
def test_generated_values_round_trip(rtype, version, layout):
    sch = layout["schema"]
    flexible = in_versions(sch["flexibleVersions"], version)
    ambiguous = len(RECORDS[rtype]["value"]) > 1
    kafka_version = layout["since"] if ambiguous else None
    rng = random.Random(f"{rtype}/{version}/{layout['since']}")
    for _ in range(25):
        data = _gen_struct(sch["fields"], version, rng, flexible, STRINGS)
        if rtype == 2:
            # Non-consumer protocol type: members' blobs stay bytes (consumer tested below).
            data["protocolType"] = rng.choice(["connect", ""])
        raw = encode_value(rtype, version, data, kafka_version)
        assert decode_value(rtype, raw, kafka_version) == (version, data)
        assert encode_value(rtype, version, decode_value(rtype, raw, kafka_version)[1], kafka_version) == raw
        # Without kafka_version the codec either finds the only layout that parses, or says
        # it is ambiguous -- never a different layout's reading.
        try:
            assert decode_value(rtype, raw) == (version, data)
        except CodecError as exc:
            assert ambiguous and "--kafka-version" in str(exc)


@pytest.mark.parametrize("rtype", sorted(RECORDS))
def test_keys_round_trip(rtype):
    fields = RECORDS[rtype]["key"]["fields"]
    data = {camel(f["name"]): ("g-ü" if f["type"] == "string" else 7) for f in fields}
    raw = encode_key(rtype, data)
    assert raw[:2] == struct.pack(">h", rtype)
    assert decode_key(raw) == (rtype, data)
    assert RECORD_TYPES[rtype] == RECORDS[rtype]["name"]


def test_registry_covers_types_0_to_23():
    assert sorted(RECORD_TYPES) == list(range(24))
    assert RECORD_TYPES[1] == "OffsetCommit" and RECORD_TYPES[2] == "GroupMetadata"


# --- sizes --------------------------------------------------------------------------------

def _offset_commit(version, metadata):
    data = {"offset": 5, "metadata": metadata, "commitTimestamp": 1}
    if version >= 3:
        data["leaderEpoch"] = 2
    if version == 1:
        data["expireTimestamp"] = 9
    return data


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("length", [0, 127, 128, 32767])
def test_string_lengths_at_the_edges(version, length):
    data = _offset_commit(version, "m" * length)
    raw = encode_value(1, version, data)
    assert decode_value(1, raw) == (version, data)
    # Non-flexible: int16 length; flexible v4: unsigned varint N+1 (two bytes from 127 on).
    header = 2 if version < 4 else (1 if length < 127 else 2 if length < 16383 else 3)
    assert len(raw) == 2 + 8 + (4 if version >= 3 else 0) + header + length + 8 + \
        (8 if version == 1 else 0) + (1 if version == 4 else 0)


@pytest.mark.parametrize("version", range(5))
def test_string_over_32767_bytes_is_an_error(version):
    with pytest.raises(CodecError, match=r"metadata.*32768 UTF-8 bytes is too long.*32767"):
        encode_value(1, version, _offset_commit(version, "m" * 32768))


def test_string_over_limit_in_compact_and_key_fields():
    member = {"instanceId": None, "rackId": None, "clientId": "c" * 32768, "clientHost": "/h",
              "subscribedTopicNames": [], "subscribedTopicRegex": None, "rebalanceTimeoutMs": 1,
              "serverAssignor": None}
    with pytest.raises(CodecError, match="clientId"):
        encode_value(5, 0, member, "3.9")
    with pytest.raises(CodecError, match="group.*too long"):
        encode_key(1, {"group": "g" * 40000, "topic": "t", "partition": 0})
    # Multi-byte characters count in UTF-8 bytes: 16384 x 'é' = 32768 bytes.
    with pytest.raises(CodecError, match="32768 UTF-8 bytes"):
        encode_value(1, 3, _offset_commit(3, "é" * 16384))


def test_malformed_bytes_name_the_field_and_the_byte_it_starts_at():
    # OffsetCommitValue v3: version (bytes 0-1), offset and leaderEpoch (2-13), metadata (14-).
    raw = encode_value(1, 3, _offset_commit(3, "abc"))
    with pytest.raises(CodecError, match=r"field offset, leaderEpoch: truncated.*\(at byte 2\)$"):
        decode_value(1, raw[:8])
    with pytest.raises(CodecError, match=r"field metadata: truncated: string of 3 bytes.*\(at byte 14\)$"):
        decode_value(1, raw[:18])
    key = encode_key(1, {"group": "g\u00e9", "topic": "t", "partition": 0})
    with pytest.raises(CodecError, match=r"field group: string is not valid UTF-8.*\(at byte 2\)$"):
        decode_key(key[:4] + b"\xff\xfe" + key[6:])


def test_a_bug_in_a_field_reader_fails_loudly_instead_of_reading_as_corrupt_data():
    # Malformed bytes become a CodecError (quarantined with its reason); an exception of
    # any other kind out of a field's reader is the codec's own bug and must not be.
    from pipelines.codec.compiler import MALFORMED, _generate_reader

    def buggy(buf, pos):
        raise ZeroDivisionError("a bug")

    read = _generate_reader([("call", "x", buggy)], False, "Probe")
    with pytest.raises(ZeroDivisionError):
        read(b"\0\0", 0)
    assert not issubclass(ZeroDivisionError, MALFORMED)


def test_compact_string_length_over_limit_on_read_is_an_error():
    # A flexible OffsetCommit v4 whose metadata claims 32768 bytes (varint 32769).
    raw = bytearray(struct.pack(">hqi", 4, 1, 2))
    n = 32769
    while n >= 0x80:
        raw.append((n & 0x7F) | 0x80)
        n >>= 7
    raw.append(n)
    raw += b"m" * 32768 + struct.pack(">q", 0) + b"\x00"
    with pytest.raises(CodecError, match="metadata: string length 32768 exceeds"):
        decode_value(1, bytes(raw))


@pytest.mark.parametrize("version", [3, 4])
def test_bytes_fields_of_70000_bytes(version):
    blob = base64.b64encode(bytes(range(256)) * 273 + b"x" * 112).decode()
    assert len(base64.b64decode(blob)) == 70000
    member = {"memberId": "m", "groupInstanceId": None, "clientId": "c", "clientHost": "/h",
              "rebalanceTimeout": 1, "sessionTimeout": 2, "subscription": blob, "assignment": ""}
    data = {"protocolType": "connect", "generation": 3, "protocol": "sessioned", "leader": "m",
            "currentStateTimestamp": 5, "members": [member]}
    raw = encode_value(2, version, data)
    assert decode_value(2, raw) == (version, data)
    classic = {"sessionTimeoutMs": 10, "supportedProtocols": [{"name": "range", "metadata": blob}]}
    value = {"instanceId": "i", "rackId": None, "clientId": "c", "clientHost": "/h",
             "subscribedTopicNames": ["a"], "subscribedTopicRegex": None, "rebalanceTimeoutMs": 1,
             "serverAssignor": "uniform", "classicMemberMetadata": classic}
    raw = encode_value(5, 0, value, "3.9")
    assert decode_value(5, raw) == (0, value)


# --- arrays, nullable structs, tagged fields ------------------------------------------

def test_null_and_empty_arrays_and_nullable_structs():
    streams_member = {"instanceId": None, "rackId": "r", "clientId": "c", "clientHost": "/h",
                      "rebalanceTimeoutMs": 1, "topologyEpoch": 2, "processId": "p",
                      "userEndpoint": None, "clientTags": []}
    for endpoint in (None, {"host": "h", "port": 65535}):
        streams_member["userEndpoint"] = endpoint
        raw = encode_value(19, 0, streams_member)
        assert decode_value(19, raw) == (0, streams_member)
    # Non-nullable array given null is an error on encode and on decode.
    with pytest.raises(CodecError, match="clientTags.*null is not allowed"):
        encode_value(19, 0, {**streams_member, "clientTags": None})
    current = {"memberEpoch": 1, "previousMemberEpoch": 0, "state": 0,
               "assignedPartitions": [{"topicId": "w8NgfqljSNKB8xMc7YOseQ", "partitions": [],
                                       "assignmentEpochs": None}],
               "partitionsPendingRevocation": []}
    raw = encode_value(8, 0, current, "3.9")
    assert decode_value(8, raw) == (0, current)
    metadata = {"epoch": 4, "metadataHash": 1, "lastAssignmentConfigs": None}
    assert decode_value(17, encode_value(17, 0, metadata)) == (0, metadata)
    # Tagged nullable struct, null and present (Kafka 3.9 writes the null one explicitly).
    member = {"instanceId": None, "rackId": None, "clientId": "k", "clientHost": "/h",
              "subscribedTopicNames": [], "subscribedTopicRegex": None, "rebalanceTimeoutMs": -1,
              "serverAssignor": None}
    for classic in (None, {"sessionTimeoutMs": 45000, "supportedProtocols": []}):
        value = {**member, "classicMemberMetadata": classic}
        raw = encode_value(5, 0, value, "3.9")
        assert decode_value(5, raw) == (0, value)
    assert decode_value(5, encode_value(5, 0, member, "3.9")) == (0, member)  # tag absent


def test_unknown_tagged_fields_are_kept_and_re_encoded():
    # ConsumerGroupMetadataValue {epoch: 7} + tags: 0 (metadataHash, known), 5 and 9 (unknown).
    raw = struct.pack(">hi", 0, 7) + bytes([3, 0, 8]) + struct.pack(">q", 99) + \
        bytes([5, 2, 0xAB, 0xCD, 9, 0])
    version, data = decode_value(3, raw)
    assert data == {"epoch": 7, "metadataHash": 99,
                    "_unknownTaggedFields": [{"tag": 5, "data": "q80="}, {"tag": 9, "data": ""}]}
    assert encode_value(3, version, data) == raw
    # Nested: inside a TopicPartitions element of type 8.
    nested = {"memberEpoch": 1, "previousMemberEpoch": 0, "state": 1,
              "assignedPartitions": [{"topicId": "AAAAAAAAAAAAAAAAAAAAAA", "partitions": [1],
                                      "_unknownTaggedFields": [{"tag": 3, "data": "AQI="}]}],
              "partitionsPendingRevocation": []}
    raw = encode_value(8, 0, nested, "4.0")
    assert decode_value(8, raw, "4.0") == (0, nested)
    with pytest.raises(CodecError, match="clashes with a known field"):
        encode_value(3, 0, {"epoch": 1, "_unknownTaggedFields": [{"tag": 0, "data": ""}]})


def test_ignorable_fields_of_other_versions():
    # expireTimestamp only exists in v1; it is ignorable, so writing v3 drops it (Kafka's rule).
    data = {**_offset_commit(3, ""), "expireTimestamp": 5}
    assert decode_value(1, encode_value(1, 3, data))[1] == _offset_commit(3, "")
    with pytest.raises(CodecError, match="unknown field for OffsetCommitValue version 3"):
        encode_value(1, 3, {**_offset_commit(3, ""), "offsett": 1})
    with pytest.raises(CodecError, match="missing"):
        encode_value(1, 3, {"offset": 1, "metadata": ""})


# --- embedded consumer protocol ---------------------------------------------------------

def _group(protocol, subscription, assignment, version=3):
    return {"protocolType": "consumer", "generation": 4, "protocol": protocol, "leader": "m1",
            "currentStateTimestamp": 11,
            "members": [{"memberId": "m1", "groupInstanceId": None, "clientId": "c",
                         "clientHost": "/127.0.0.1", "rebalanceTimeout": 300000,
                         "sessionTimeout": 10000, "subscription": subscription,
                         "assignment": assignment}]}


@pytest.mark.parametrize("sub_version", range(4))
def test_consumer_protocol_versions_round_trip(sub_version):
    sub = {"_version": sub_version, "topics": ["a", "b"], "userData": None}
    if sub_version >= 1:
        sub["ownedPartitions"] = [{"topic": "a", "partitions": [0, 2]}]
    if sub_version >= 2:
        sub["generationId"] = 3
    if sub_version >= 3:
        sub["rackId"] = None
    asg = {"_version": sub_version, "assignedPartitions": [{"topic": "a", "partitions": [1]}],
           "userData": ""}
    data = _group("range", sub, asg)
    raw = encode_value(2, 3, data)
    assert decode_value(2, raw) == (3, data)


def test_sticky_and_cooperative_user_data_are_decoded_and_exact():
    sticky = {"_format": "sticky-v1", "previous_assignment": [{"topic": "t", "partitions": [0, 1]}],
              "generation": 6}
    sub = {"_version": 1, "topics": ["t"], "userData": sticky, "ownedPartitions": []}
    asg = {"_version": 1, "assignedPartitions": [], "userData": None}
    for protocol, user_data in (("sticky", sticky),
                                ("sticky", {"_format": "sticky-v0", "previous_assignment": []}),
                                ("cooperative-sticky", {"_format": "cooperative-sticky", "generation": 2}),
                                ("cooperative-sticky", sticky)):
        data = _group(protocol, {**sub, "userData": user_data}, asg)
        raw = encode_value(2, 3, data)
        assert decode_value(2, raw) == (3, data)
    # Under another protocol the same bytes stay base64.
    data = _group("range", {**sub, "userData": sticky}, asg)
    decoded = decode_value(2, encode_value(2, 3, data))[1]
    assert isinstance(decoded["members"][0]["subscription"]["userData"], str)


def test_future_consumer_protocol_version_keeps_its_extra_bytes():
    sub = struct.pack(">h", 7) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + \
        struct.pack(">i", -1) + struct.pack(">i", 0) + struct.pack(">i", 9) + struct.pack(">h", -1) + b"NEW"
    member_blob = base64.b64encode(sub).decode()
    data = _group("range", member_blob, "")
    raw = encode_value(2, 3, data)
    decoded = decode_value(2, raw)[1]
    s = decoded["members"][0]["subscription"]
    assert s["_version"] == 7 and s["topics"] == ["t"] and s["generationId"] == 9
    assert base64.b64decode(s["_trailing"]) == b"NEW"
    assert decoded["members"][0]["_assignmentError"].startswith("ConsumerProtocolAssignment")
    assert decoded["members"][0]["assignment"] == ""
    assert encode_value(2, 3, decoded) == raw


def test_unparseable_embedded_blobs_keep_raw_bytes_and_a_note():
    data = _group("sticky", base64.b64encode(b"\x00\x01\xff").decode(),
                  base64.b64encode(b"\x00\x00\x00\x00\x00\x01\x00").decode())
    raw = encode_value(2, 3, data)
    decoded = decode_value(2, raw)[1]
    member = decoded["members"][0]
    assert member["subscription"] == data["members"][0]["subscription"]
    assert "truncated" in member["_subscriptionError"]
    assert "_assignmentError" in member
    assert encode_value(2, 3, decoded) == raw
    bad_user_data = {"_version": 0, "topics": [], "userData": base64.b64encode(b"\x01\x02\x03").decode()}
    decoded = decode_value(2, encode_value(2, 3, _group("sticky", bad_user_data, "")))[1]
    assert "_userDataError" in decoded["members"][0]["subscription"]


# --- layouts ----------------------------------------------------------------------------

def test_ambiguous_bytes_need_kafka_version():
    # Valid as 3.7 {error=1, [], metadataVersion=2, metadataBytes=""} and as 3.8+
    # {[], unknown tag 0 = 0x0100}: the codec must not pick one silently.
    raw = bytes([0, 0, 1, 1, 0, 2, 1, 0])
    with pytest.raises(CodecError, match=r"ambiguous.*Kafka 3\.7.*Kafka 3\.8\+.*--kafka-version"):
        decode_value(7, raw)
    assert decode_value(7, raw, "3.7") == (0, {"error": 1, "topicPartitions": [],
                                               "metadataVersion": 2, "metadataBytes": ""})
    assert decode_value(7, raw, "3.9.1") == (0, {"topicPartitions": [],
                                                 "_unknownTaggedFields": [{"tag": 0, "data": "AQA="}]})


def test_kafka_version_selects_layout_and_rejects_impossible_releases():
    v40 = encode_value(11, 0, {"epoch": 3}, "4.0")
    v41 = encode_value(11, 0, {"epoch": 3, "metadataHash": 8}, "4.1")
    assert decode_value(11, v40) == (0, {"epoch": 3})        # only one layout parses
    assert decode_value(11, v41) == (0, {"epoch": 3, "metadataHash": 8})
    with pytest.raises(CodecError, match="trailing"):
        decode_value(11, v41, "4.0")
    # A release newer than every layout of a retired record reads it with the last layout.
    topics = {"topics": []}
    assert decode_value(9, encode_value(9, 0, topics), "4.2") == (0, topics)
    # Where a layout choice exists, a release before all of them cannot have written it.
    with pytest.raises(CodecError, match=r"not written by Kafka 3\.6 \(first written by Kafka 3\.7\)"):
        decode_value(4, encode_value(4, 0, topics, "3.9"), "3.6")
    # A (type, version) with a single layout has one meaning: kafka_version does not matter.
    assert decode_value(12, encode_value(12, 0, {"assignmentEpoch": 1}), "3.8") == (0, {"assignmentEpoch": 1})
    with pytest.raises(CodecError, match="invalid kafka_version"):
        decode_value(8, v40, "four")
    # Encoding picks the only layout the data fits; data fitting several needs the flag.
    assert encode_value(11, 0, {"epoch": 3}) == v40


# --- bad input --------------------------------------------------------------------------

def test_truncated_values_are_errors_at_every_cut():
    data = _group("range", {"_version": 3, "topics": ["a"], "userData": None, "ownedPartitions": [],
                            "generationId": 1, "rackId": None},
                  {"_version": 3, "assignedPartitions": [], "userData": None})
    raw = encode_value(2, 3, data)
    for cut in range(2, len(raw)):
        with pytest.raises(CodecError, match="GroupMetadata value v3"):
            decode_value(2, raw[:cut])
    with pytest.raises(CodecError, match="too short"):
        decode_value(1, b"\x00")


def test_trailing_garbage_is_an_error():
    raw = encode_value(1, 3, _offset_commit(3, "x"))
    with pytest.raises(CodecError, match="3 trailing byte"):
        decode_value(1, raw + b"abc")
    key = encode_key(1, {"group": "g", "topic": "t", "partition": 1})
    with pytest.raises(CodecError, match="1 trailing byte"):
        decode_key(key + b"\x00")


def test_unknown_type_and_version_are_errors():
    with pytest.raises(CodecError, match="unknown record type 99"):
        decode_key(struct.pack(">h", 99) + b"\x00\x01g")
    with pytest.raises(CodecError, match="unknown record type 24"):
        decode_value(24, b"\x00\x00")
    with pytest.raises(CodecError, match=r"OffsetCommit \(type 1\): unknown value version 5 \(known: 0-4\)"):
        decode_value(1, struct.pack(">h", 5) + b"\x00" * 30)
    with pytest.raises(CodecError, match="unknown value version 1"):
        encode_value(3, 1, {"epoch": 1})
    with pytest.raises(CodecError, match="not valid UTF-8"):
        decode_key(b"\x00\x02\x00\x02\xff\xfe")
    with pytest.raises(CodecError, match="non-nullable string was serialized as null"):
        decode_key(b"\x00\x02\xff\xff")


def test_tombstones_are_none():
    assert decode_value(1, None) is None
    key = encode_key(5, {"groupId": "g", "memberId": "m"})
    assert decode_record(key, None) == {"key": {"type": 5, "data": {"groupId": "g", "memberId": "m"}},
                                        "value": None}


def test_output_is_json_serialisable():
    raw = encode_value(8, 0, {"memberEpoch": 1, "previousMemberEpoch": 0, "state": 2,
                              "assignedPartitions": [], "partitionsPendingRevocation": []}, "3.9")
    key = encode_key(8, {"groupId": "g", "memberId": "m"})
    assert json.loads(json.dumps(decode_record(key, raw))) == decode_record(key, raw)


# --- control records --------------------------------------------------------------------

@pytest.mark.parametrize("ctype,name", [(0, "ABORT"), (1, "COMMIT")])
def test_control_records_round_trip(ctype, name):
    key, value = encode_control_record(ctype, 17)
    assert (len(key), len(value)) == (4, 6)  # the dump's keySize/valueSize for markers
    assert decode_control_record(key, value) == {"type": name, "controlType": ctype, "keyVersion": 0,
                                                 "valueVersion": 0, "coordinatorEpoch": 17}
    with pytest.raises(CodecError, match="needs 6 bytes"):
        decode_control_record(key, value[:5])
    with pytest.raises(CodecError, match="needs 4 bytes"):
        decode_control_record(key[:3], value)
    with pytest.raises(CodecError):
        encode_control_record(2, 0)


# --- every recorded record re-encodes to its exact bytes ---------------------------------

def test_every_recorded_record_re_encodes_to_the_same_bytes():
    count = 0
    for path in sorted((SHARED / "recordings").glob("*/offsets_records.jsonl")):
        for line in open(path, encoding="utf-8"):
            rec = json.loads(line)
            key = bytes.fromhex(rec["key_hex"])
            rtype, key_data = decode_key(key)
            assert encode_key(rtype, key_data) == key
            if rec["value_hex"] is not None:
                value = bytes.fromhex(rec["value_hex"])
                version, data = decode_value(rtype, value)
                assert encode_value(rtype, version, data, "3.9") == value, (path.parent.name, rec["offset"])
            count += 1
    assert count == 6572  # README: records across all 14 runs
