"""Kafka's own DumpLogSegments (Kafka 4.4.0, ``--offsets-decoder``) as the oracle for our codec.

1. ``test_generated_segment_*``: one real segment ``__consumer_offsets-0/000...0.log``,
   written by our writer with values generated here from our schema table
   (``pipelines.codec.schemas``) and encoded by our codec: every record type the codec
   knows (0-23), every value version, every layout, each in three modes (``full``: nullable
   fields set, negative numbers, several array elements, tagged fields set to non-default
   values, plus one unknown "probe" tag in every flexible struct; ``nulls``: nullable
   fields null, nullable tagged fields present as null, others absent; ``empty``: empty
   strings/arrays/bytes, integer extremes, tagged fields present at their default), a
   tombstone of every type, GroupMetadata with the embedded consumer protocol (versions
   0-3, range/sticky/cooperative-sticky userData), a transaction with its COMMIT/ABORT
   markers, and batches in every compression codec. Kafka's dump of it is compared,
   record by record and field by field, with ``rebalance-audit decode --kafka-version 4.4``
   of the same folder. A wrong field, type, version range, tagged field or default in our
   schemas shows up as a mismatch or as an error on one side only; a tagged field that
   Kafka knows and we do not shows up through the probe, our highest tag number + 1 (Kafka
   numbers tags consecutively): Kafka prints it by name, or fails to read its 4 bytes.
2. ``test_recordings_*``: the 14 Kafka 3.9 recordings, all files in one DumpLogSegments
   run, against ``rebalance-audit decode`` of the same folders.

What Kafka 4.4.0 does not decode (asserted record by record, never skipped):
* record types 9 (ShareGroupPartitionMetadata, removed in 4.1) and 18
  (StreamsGroupPartitionMetadata, never in a release): "Unknown record type N at offset O,
  skipping.", tombstones included. Our codec reads them; each is also written a second
  time under the key of type 4, whose value schema is the same, so Kafka checks that
  reading too ("twins").
* type 0 (LegacyOffsetCommit) value versions 1-4: 4.4 knows LegacyOffsetCommitValue v0
  only ("Found an unknown record version V for 0 type"). Our codec reads type 0 values
  with OffsetCommitValue v0-4, as Kafka up to 4.0 did; twins under type 1 check them.
* layouts older than 4.4 of the version-0 records whose bytes changed without a version
  bump (3.7 of types 4/5/7/8, 3.9-4.0 of 11, 4.0 of 15): Kafka 4.4 reads them with its own
  layout and fails ("Could not read record with version 0 ..."); our codec, told the
  bytes are 4.4's (``--kafka-version 4.4``), fails too.
* type 24 is known to neither (the codec covers 0-23; Kafka 4.4 has no type 24).

Normalisation of our output before comparing (representation only, never values):
* Kafka prints the key "type" and value "version" as JSON strings.
* Kafka's generated JSON converters leave out a tagged field whose value equals its
  default (``if (x != default) node.set(...)``; null is printed, as it is never the
  default): ours holds every tagged field that was in the bytes, so a tagged field equal
  to OUR schema's default is dropped. A wrong default in our schema thus shows up too.
* Unknown tagged fields: Kafka keeps them out of its JSON; our ``_unknownTaggedFields``
  (the probe) is dropped.
* GroupMetadata with protocolType "consumer": Kafka decodes the members' subscription and
  assignment too, but prints userData as base64; ours carries ``_version`` (dropped) and
  decodes sticky/cooperative-sticky userData, which is re-encoded with our encoder and
  compared as base64, byte for byte.
* Any other key starting with "_" (codec metadata such as ``_subscriptionError``) fails.
Both sides print bytes as standard base64 and UUIDs as ``Uuid.toString()`` (base64url,
no padding), so those need nothing. The JVM is told to print UTF-8, so strings compare as
they are (unicode, quotes, backslashes and newlines included).
"""
from __future__ import annotations

import base64
import json
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipelines.codec import RECORD_TYPES, encode_key, encode_value
from pipelines.codec.compiler import UNKNOWN_TAGS_KEY, camel, in_versions, parse_versions
from pipelines.codec.consumer_protocol import encode_user_data
from pipelines.codec.dumpfmt import iter_dump_records
from pipelines.codec.records import parse_release
from pipelines.codec.schemas import (CONSUMER_PROTOCOL_ASSIGNMENT, CONSUMER_PROTOCOL_SUBSCRIPTION,
                                     COOPERATIVE_STICKY_USER_DATA, RECORDS, STICKY_USER_DATA_V1)
from pipelines.segments.writer import SegmentWriter, WriteRecord
from testbed.kafka_home import TestbedUnavailable, find_java, java_command, kafka_version

from conftest import RECORDINGS, REPO

KAFKA = "4.4"                       # the release whose DumpLogSegments is the oracle
KAFKA_UNKNOWN_TYPES = {9, 18}       # types our codec knows and Kafka 4.4 does not
KAFKA_VERSIONS = {0: range(0, 1)}   # value versions of Kafka 4.4 where they differ from ours
TWIN_TYPE = {9: 4, 18: 4, 0: 1}     # a type Kafka 4.4 reads with the same value schema
NOT_A_TYPE = 24                     # known to neither side
T0 = 1_795_337_253_311
MODES = ("full", "nulls", "empty")
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
# Kafka 4 tools print with the platform charset unless told otherwise.
UTF8 = ("-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8", "-Dstdout.encoding=UTF-8")
# Every string a JSON printer could get wrong: multi-byte and 4-byte UTF-8, quotes,
# backslashes, control characters, and lengths past the one-byte varint.
STRINGS = ["grp-ü", 'a "quoted" name', "back\\slash", "line\nbreak\ttab", "emoji 😀", "é" * 70,
           "t" * 200, "orders.v2"]
PROBE_BYTES = b"\x00\x00\x00\x07"   # an int32 7, a null compact array: no default of any type


# --- values generated from our schema table -------------------------------------------------

@dataclass
class Gen:
    """Walks our schema data (not the codec) to build a value for one mode."""

    rng: random.Random
    mode: str
    version: int
    flexible: bool

    def struct(self, fields: list[dict]) -> dict:
        out, tags = {}, []
        for spec in fields:
            if not in_versions(spec["versions"], self.version):
                continue
            name = camel(spec["name"])
            if self.flexible and in_versions(spec.get("taggedVersions"), self.version):
                tags.append(spec["tag"])
                present, value = self.tagged(spec)
                if present:
                    out[name] = value
            else:
                out[name] = self.value(spec)
        if self.flexible and self.mode == "full":
            # A tag one past ours: Kafka 4.4 printing it (or failing on it) means it knows
            # a tagged field our schema lacks.
            probe = max(tags, default=-1) + 1
            out[UNKNOWN_TAGS_KEY] = [{"tag": probe, "data": base64.b64encode(PROBE_BYTES).decode()}]
        return out

    def tagged(self, spec: dict) -> tuple[bool, object]:
        if self.mode == "empty":
            return True, spec["default"]
        if self.mode == "nulls":
            nullable = in_versions(spec.get("nullableVersions"), self.version)
            return nullable, None
        value = self.value(spec)
        assert value != spec["default"], spec
        return True, value

    def value(self, spec: dict):
        type_ = spec["type"]
        if self.mode == "nulls" and in_versions(spec.get("nullableVersions"), self.version):
            return None
        if type_.startswith("[]"):
            element = {**spec, "type": type_[2:]}
            element.pop("nullableVersions", None)     # the array may be null, its elements not
            count = {"full": 3, "nulls": 1, "empty": 0}[self.mode]
            return [self.value(element) for _ in range(count)]
        if "fields" in spec:
            return self.struct(spec["fields"])
        return self.primitive(type_)

    def primitive(self, type_: str):
        bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}.get(type_)
        if bits is not None:
            lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
            # full: negative, never -1 (a common default); nulls: positive; empty: extremes.
            if self.mode == "full":
                return self.rng.randint(lo, -2)
            return self.rng.randint(1, hi) if self.mode == "nulls" else self.rng.choice([lo, hi])
        if type_ == "uint16":
            return 65535 if self.mode == "empty" else self.rng.randint(1, 65535)
        if type_ == "uuid":
            raw = bytes(16) if self.mode == "empty" else self.rng.randbytes(16)
            return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if type_ == "string":
            return "" if self.mode == "empty" else self.rng.choice(STRINGS)
        if type_ == "bytes":
            raw = b"" if self.mode == "empty" else self.rng.randbytes(self.rng.choice([1, 5, 200]))
            return base64.b64encode(raw).decode()
        raise AssertionError(f"the generator does not know type {type_!r}")


def _layouts(rtype: int):
    """(schema, version, kafka_version to encode with, label) for every layout and version."""
    entries = RECORDS[rtype]["value"]
    for layout in entries:
        sch = layout["schema"]
        lo, hi = parse_versions(sch["validVersions"])
        release = layout["since"] if len(entries) > 1 and _is_older_than_kafka(layout) else KAFKA
        label = f"layout {layout['since'] or ''}..{layout['until'] or ''}"
        for version in range(lo, hi + 1):
            yield sch, version, release, label


def _is_older_than_kafka(layout: dict) -> bool:
    return layout["until"] is not None and parse_release(layout["until"]) <= parse_release(KAFKA)


def _kafka_layout(rtype: int) -> dict:
    """Our schema of the layout Kafka 4.4 reads (the newest of each type)."""
    return RECORDS[rtype]["value"][-1]["schema"]


def _gen_key(rtype: int, rng: random.Random, mode: str) -> dict:
    return Gen(rng, mode, 0, False).struct(RECORDS[rtype]["key"]["fields"])


def _gen_value(rtype: int, sch: dict, version: int, rng: random.Random, mode: str) -> dict:
    flexible = in_versions(sch["flexibleVersions"], version)
    data = Gen(rng, mode, version, flexible).struct(sch["fields"])
    if rtype == 2 and data["protocolType"] == "consumer":
        data["protocolType"] = "connect"   # raw member bytes here; the embedded protocol below
    return data


# --- GroupMetadata with the embedded consumer protocol --------------------------------------

USER_DATA_FORMATS = {"sticky": STICKY_USER_DATA_V1, "cooperative-sticky": COOPERATIVE_STICKY_USER_DATA}


def _consumer_blob(schema: dict, version: int, mode: str, rng: random.Random, protocol: str) -> dict:
    blob = {"_version": version, **Gen(rng, mode, version, False).struct(schema["fields"])}
    user_data_schema = USER_DATA_FORMATS.get(protocol)
    if schema is CONSUMER_PROTOCOL_SUBSCRIPTION and user_data_schema and blob["userData"]:
        fmt = "sticky-v1" if protocol == "sticky" else "cooperative-sticky"
        blob["userData"] = {"_format": fmt, **Gen(rng, "full", 0, False).struct(user_data_schema["fields"])}
    return blob


def _consumer_group(version: int, protocol: str, rng: random.Random) -> dict:
    """A GroupMetadata value with one member per consumer-protocol version 0-3."""
    sch = _kafka_layout(2)
    flexible = in_versions(sch["flexibleVersions"], version)
    data = Gen(rng, "full", version, flexible).struct(sch["fields"])
    data.update(protocolType="consumer", protocol=protocol)
    member_fields = next(f for f in sch["fields"] if f["name"] == "members")["fields"]
    members = []
    for sub_version, mode in zip(range(4), ("full", "nulls", "empty", "full")):
        member = Gen(rng, "full", version, flexible).struct(member_fields)
        member["subscription"] = _consumer_blob(CONSUMER_PROTOCOL_SUBSCRIPTION, sub_version, mode, rng, protocol)
        member["assignment"] = _consumer_blob(CONSUMER_PROTOCOL_ASSIGNMENT, sub_version, mode, rng, protocol)
        members.append(member)
    data["members"] = members
    return data


# --- the segment ------------------------------------------------------------------------------

@dataclass
class Written:
    """What the test wrote at one offset, and what Kafka 4.4 is expected to make of it."""

    kind: str            # decoded | unknown_type | unknown_version | old_layout | control
    rtype: int | None = None
    version: int | None = None
    label: str = ""
    mode: str | None = None
    twin_of: int | None = None      # offset of the record this one repeats under TWIN_TYPE
    control: str | None = None


def _expected_kind(rtype: int, version: int | None, release: str) -> str:
    if rtype in KAFKA_UNKNOWN_TYPES or rtype not in RECORD_TYPES:
        return "unknown_type"
    if version is not None and version not in KAFKA_VERSIONS.get(rtype, range(version, version + 1)):
        return "unknown_version"
    return "decoded" if release == KAFKA else "old_layout"


class Segment:
    """Appends batches to partition 0 and remembers what each offset holds."""

    def __init__(self, log_dir: Path):
        self.writer = SegmentWriter(log_dir)
        self.written: dict[int, Written] = {}
        self._batches = 0

    def batch(self, entries: list[tuple[WriteRecord, Written]], **kwargs) -> int:
        kwargs.setdefault("compression", COMPRESSIONS[self._batches % len(COMPRESSIONS)])
        self._batches += 1
        base, _ = self.writer.append(0, [r for r, _ in entries], timestamp=T0, **kwargs)
        for i, (_, what) in enumerate(entries):
            self.written[base + i] = what
        return base

    def control(self, marker: str, producer_id: int) -> None:
        offset = self.writer.append_control(0, marker, coordinator_epoch=7, producer_id=producer_id,
                                            producer_epoch=0, timestamp=T0)
        self.written[offset] = Written("control", control=marker)


def _record_batches(seg: Segment) -> None:
    for rtype in sorted(RECORDS):
        for sch, version, release, label in _layouts(rtype):
            rng = random.Random(f"{rtype}/{version}/{label}")
            kind = _expected_kind(rtype, version, release)
            entries = []
            for mode in MODES:
                key = encode_key(rtype, _gen_key(rtype, rng, mode))
                value = encode_value(rtype, version, _gen_value(rtype, sch, version, rng, mode), release)
                entries.append((WriteRecord(key, value), Written(kind, rtype, version, label, mode)))
            base = seg.batch(entries)
            if kind in ("unknown_type", "unknown_version"):
                _twins(seg, rtype, base, entries)


def _twins(seg: Segment, rtype: int, base: int, entries) -> None:
    """The same value bytes under a key Kafka 4.4 decodes with the same value schema."""
    twin = TWIN_TYPE[rtype]
    rng = random.Random(f"twin/{rtype}/{base}")
    twins = []
    for i, (rec, what) in enumerate(entries):
        key = encode_key(twin, _gen_key(twin, rng, "full"))
        twins.append((WriteRecord(key, rec.value),
                      Written("decoded", twin, what.version, what.label, twin_of=base + i)))
    seg.batch(twins)


def _group_metadata_batches(seg: Segment) -> None:
    lo, hi = parse_versions(_kafka_layout(2)["validVersions"])
    for version in range(lo, hi + 1):
        entries = []
        for protocol in ("range", "sticky", "cooperative-sticky"):
            rng = random.Random(f"consumer/{version}/{protocol}")
            key = encode_key(2, _gen_key(2, rng, "full"))
            value = encode_value(2, version, _consumer_group(version, protocol, rng))
            entries.append((WriteRecord(key, value), Written("decoded", 2, version, protocol)))
        seg.batch(entries)


def _tombstones(seg: Segment) -> None:
    rng = random.Random("tombstones")
    entries = []
    for rtype in [*sorted(RECORDS), NOT_A_TYPE]:
        key = encode_key(rtype, _gen_key(rtype, rng, "full")) if rtype in RECORDS else _not_a_type_key()
        entries.append((WriteRecord(key, None), Written(_expected_kind(rtype, None, KAFKA), rtype, None, "tombstone")))
    seg.batch(entries)


def _not_a_type_key() -> bytes:
    return NOT_A_TYPE.to_bytes(2, "big") + b"\x00\x01g"


def _unknown_type_record(seg: Segment) -> None:
    seg.batch([(WriteRecord(_not_a_type_key(), b"\x00\x00\x00\x00\x00\x01"),
                Written("unknown_type", NOT_A_TYPE, 0, "not a type"))])


def _transaction(seg: Segment) -> None:
    rng = random.Random("txn")
    entries = []
    for mode in MODES:
        key = encode_key(1, _gen_key(1, rng, mode))
        value = encode_value(1, 3, _gen_value(1, _kafka_layout(1), 3, rng, mode))
        entries.append((WriteRecord(key, value), Written("decoded", 1, 3, "transactional")))
    seg.batch(entries[:2], transactional=True, producer_id=42, producer_epoch=0, base_sequence=0)
    seg.control("COMMIT", 42)
    seg.batch(entries[2:], transactional=True, producer_id=43, producer_epoch=0, base_sequence=0)
    seg.control("ABORT", 43)


def write_segment(log_dir: Path) -> dict[int, Written]:
    seg = Segment(log_dir)
    with seg.writer:
        _record_batches(seg)
        _group_metadata_batches(seg)
        _tombstones(seg)
        _unknown_type_record(seg)
        _transaction(seg)
    return seg.written


# --- running both decoders --------------------------------------------------------------------

def run_dump_log_segments(files: list[Path], out: Path) -> list[dict]:
    """One JVM run of Kafka's DumpLogSegments over all files; its stdout is kept in `out`."""
    try:
        find_java()
    except TestbedUnavailable as exc:
        pytest.skip(f"no Java for Kafka's DumpLogSegments: {exc}")
    assert kafka_version() == "4.4.0", "the facts asserted here are Kafka 4.4.0's: check them again"
    cmd = java_command("org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder", "--print-data-log",
                       "--deep-iteration", "--files", ",".join(map(str, files)), jvm_options=UTF8, install=True)
    proc = subprocess.run(cmd, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-2000:]
    out.write_bytes(proc.stdout)
    return list(iter_dump_records(out))


def run_decode(*args: str | Path) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "rebalance_audit.cli", "decode", *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


# --- normalisation: our JSON as Kafka prints it ----------------------------------------------

def _kafka_view(data: dict, fields: list[dict], version: int, flexible: bool) -> dict:
    specs = {camel(f["name"]): f for f in fields if in_versions(f["versions"], version)}
    out = {}
    for name, value in data.items():
        if name == UNKNOWN_TAGS_KEY:
            continue                          # Kafka's JSON has no place for unknown tags
        spec = specs.get(name)
        assert spec is not None, f"field {name!r} is not in the schema (version {version})"
        if flexible and in_versions(spec.get("taggedVersions"), version) and value == spec["default"]:
            continue                          # Kafka's JSON leaves out tags at their default
        out[name] = _kafka_field(value, spec, version, flexible)
    return out


def _kafka_field(value, spec: dict, version: int, flexible: bool):
    if value is None or "fields" not in spec:
        return value
    if spec["type"].startswith("[]"):
        return [_kafka_view(v, spec["fields"], version, flexible) for v in value]
    return _kafka_view(value, spec["fields"], version, flexible)


def _embedded(blob):
    """A decoded consumer-protocol blob as Kafka prints it (userData as base64)."""
    if not isinstance(blob, dict):
        return blob
    assert "_trailing" not in blob, blob
    out = {k: v for k, v in blob.items() if k != "_version"}
    if isinstance(out.get("userData"), dict):
        out["userData"] = base64.b64encode(encode_user_data(out["userData"])).decode()
    return out


def as_kafka_prints(line: dict) -> tuple[dict, dict | None]:
    rtype = line["key"]["type"]
    key = {"type": str(rtype), "data": line["key"]["data"]}
    if line["value"] is None:
        return key, None
    version = line["value"]["version"]
    sch = _kafka_layout(rtype)
    data = _kafka_view(line["value"]["data"], sch["fields"], version, in_versions(sch["flexibleVersions"], version))
    if rtype == 2 and data.get("protocolType") == "consumer":
        data["members"] = [{**m, "subscription": _embedded(m["subscription"]),
                            "assignment": _embedded(m["assignment"])} for m in data["members"]]
    _assert_no_codec_metadata(data)
    return key, {"version": str(version), "data": data}


def _assert_no_codec_metadata(obj) -> None:
    if isinstance(obj, dict):
        assert not [k for k in obj if k.startswith("_")], obj
        for v in obj.values():
            _assert_no_codec_metadata(v)
    elif isinstance(obj, list):
        for v in obj:
            _assert_no_codec_metadata(v)


def mismatch(ours: dict, kafka: dict) -> str | None:
    """Why our line and Kafka's record differ, or None; both must be decoded records."""
    if kafka["error"] is not None:
        return f"Kafka could not decode it: {kafka['error']}"
    if "error" in ours:
        return f"we could not decode it: {ours['error']}"
    if (kafka["control"] is not None) != ours["control"]:
        return "a transaction marker on one side only"
    if kafka["control"] is not None:
        marker = {"endTxnMarker": ours.get("control_type"),
                  "coordinatorEpoch": (ours.get("marker") or {}).get("coordinatorEpoch")}
        return None if marker == kafka["control"] else f"marker {marker} != {kafka['control']}"
    key, value = as_kafka_prints(ours)
    if key != kafka["key"]:
        return f"key {key} != {kafka['key']}"
    if kafka["tombstone"] != (value is None) or (value is not None and value != kafka["value"]):
        return f"value {value} != {'<DELETE>' if kafka['tombstone'] else kafka['value']}"
    return None


# --- 1. the generated segment -------------------------------------------------------------------

@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("dumplogsegments") / "broker"
    written = write_segment(log_dir)
    log = log_dir / "__consumer_offsets-0" / "00000000000000000000.log"
    kafka = {r["offset"]: r for r in run_dump_log_segments([log], log_dir.parent / "dump.txt")}
    ours = {line["offset"]: line for line in run_decode("--kafka-version", KAFKA, log_dir / "__consumer_offsets-0")}
    assert set(written) == set(kafka) == set(ours), "both decoders must see every record written"
    return written, ours, kafka


def test_generated_segment_every_decoded_record_matches(generated):
    written, ours, kafka = generated
    decoded = [o for o, w in written.items() if w.kind in ("decoded", "control")]
    problems = [(o, written[o], why) for o in decoded if (why := mismatch(ours[o], kafka[o]))]
    assert not problems, f"{len(problems)} of {len(decoded)} records differ; first: {problems[:3]}"
    assert len(decoded) > 140


def test_generated_segment_covers_every_type_version_and_mode(generated):
    written, ours, _ = generated
    seen = {(w.rtype, w.version, w.label, w.mode) for w in written.values() if w.twin_of is None}
    for rtype in RECORDS:
        for _, version, _, label in _layouts(rtype):
            assert all((rtype, version, label, mode) in seen for mode in MODES), (rtype, version, label)
        assert (rtype, None, "tombstone", None) in seen, rtype
    group_versions = {w.version for w in written.values() if w.rtype == 2 and w.label == "sticky"}
    assert group_versions == set(range(5))
    # The modes did what they say: nulls, probes and tags reached Kafka's side of the check.
    lines = [ours[o] for o, w in written.items() if w.kind == "decoded" and ours[o].get("value")]
    texts = [json.dumps(line["value"]) for line in lines]
    assert any(UNKNOWN_TAGS_KEY in t for t in texts) and any("null" in t for t in texts)
    assert any('"assignmentEpochs": [' in t for t in texts) and any('"assignmentEpochs": null' in t for t in texts)
    assert sorted(RECORD_TYPES) == list(range(NOT_A_TYPE)), "types the codec knows changed: update this test"


def test_generated_segment_what_kafka_44_does_not_decode(generated):
    written, ours, kafka = generated
    for offset, what in written.items():
        text, line = kafka[offset]["error"], ours[offset]
        if what.kind == "unknown_type":
            assert text == f"Unknown record type {what.rtype} at offset {offset}, skipping.", (what, text)
            # We read the retired/pre-release types; type 24 is nobody's.
            assert ("error" in line) == (what.rtype == NOT_A_TYPE), (what, line)
        elif what.kind == "unknown_version":
            assert text == (f"Error at offset {offset}, skipping. Found an unknown record version "
                            f"{what.version} for {what.rtype} type"), (what, text)
            assert "error" not in line, (what, line)
        elif what.kind == "old_layout":
            assert text and text.startswith(f"Error at offset {offset}, skipping. Could not read record "
                                            f"with version {what.version} from value's buffer"), (what, text)
            assert "error" in line and "layout" in line["error"], (what, line)
        else:
            assert text is None, (what, text)
    # The list in this module's docstring, exactly: a new type, version or layout in the
    # codec that Kafka 4.4 cannot read must be added there knowingly.
    not_decoded = {(w.rtype, w.kind) for w in written.values() if w.kind not in ("decoded", "control")}
    assert not_decoded == {(9, "unknown_type"), (18, "unknown_type"), (NOT_A_TYPE, "unknown_type"),
                           (0, "unknown_version"), *((t, "old_layout") for t in (4, 5, 7, 8, 11, 15))}
    assert {w.version for w in written.values() if w.kind == "unknown_version"} == {1, 2, 3, 4}


def test_generated_segment_twins_read_like_kafka_reads_them(generated):
    """Types Kafka 4.4 does not decode, checked through the same bytes under a type it does."""
    written, ours, kafka = generated
    twins = [(w.twin_of, o) for o, w in written.items() if w.twin_of is not None]
    assert {written[orig].rtype for orig, _ in twins} == {0, 9, 18}
    for orig, twin in twins:
        _, ours_value = as_kafka_prints(ours[orig])
        assert kafka[twin]["error"] is None and ours_value == kafka[twin]["value"], (written[orig], orig, twin)


# --- 2. the Kafka 3.9 recordings ------------------------------------------------------------------

def _recording_logs() -> list[Path]:
    # The files `decode` reads in a folder: NNNNNNNNNNNNNNNNNNNN.log only.
    return sorted(p.resolve() for p in RECORDINGS.glob("*/offsets_segments/__consumer_offsets-*/*.log")
                  if p.stem.isdigit() and len(p.stem) == 20)


def test_recordings_decode_equals_dumplogsegments_44(tmp_path):
    logs = _recording_logs()
    assert len({p.parents[2] for p in logs}) == 14, "expected the 14 recordings"
    dump = run_dump_log_segments(logs, tmp_path / "dump.txt")
    kafka = {(str(Path(r["file"]).resolve()), r["offset"]): r for r in dump}
    folders = sorted({p.parents[1] for p in logs})
    ours = {(str(Path(line["file"]).resolve()), line["offset"]): line
            for line in run_decode(*folders) if not line.get("empty_batch")}
    assert set(ours) == set(kafka)
    problems = [(where, why) for where in sorted(kafka) if (why := mismatch(ours[where], kafka[where]))]
    assert not problems, f"{len(problems)} of {len(kafka)} records differ; first: {problems[:3]}"
    assert len(kafka) == 6572 + 297  # README: data records of all runs, plus the markers
