"""Parser for the text of `kafka-dump-log.sh --offsets-decoder --print-data-log
--deep-iteration` (kafka.tools.DumpLogSegments), Kafka's own decoding of segment files.

Used to check our decoders against Kafka's.  Line shapes (Kafka 3.9 and 4.x):

    Dumping offsets_segments/__consumer_offsets-0/00000000000000000000.log
    baseOffset: 0 lastOffset: 0 count: 1 ... isTransactional: false isControl: false
        deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795337543678 ... compresscodec: none ...
    | offset: 0 CreateTime: ... keySize: 18 valueSize: 24 sequence: 0 headerKeys: [] key: {json} payload: {json}
    | offset: 3720 ... key: {json} payload: <DELETE>
    | offset: 3 ... headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0

Kafka 4.x prints a record it cannot decode in place of its key, with no payload:

    | offset: 4 ... headerKeys: [] key: Unknown record type 9 at offset 4, skipping.
    | offset: 5 ... headerKeys: [] key: Error at offset 5, skipping. Found an unknown record version 3 for 0 type
    | offset: 6 ... headerKeys: [] key: Error at offset 6, skipping. Could not read record with version 0 from value's buffer due to: ...

Key and payload JSON are parsed with a JSON decoder, not split on text, because group
names and member ids inside them are arbitrary strings.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

_PARTITION = re.compile(r"(?:^|/)[^/]*-(\d+)/[^/]*\.log\s*$")
_PAIR = re.compile(r"(\w+): (\[[^\]]*\]|\S+)")
_RECORD_HEAD = re.compile(r"^\| offset: (\d+) (.*?)(?= key: | endTxnMarker: )")
_DECODER = json.JSONDecoder()
# What Kafka 4.x prints in place of the key of a record it cannot decode (DumpLogSegments'
# CoordinatorRecordMessageParser). Keys are JSON objects, so these never clash with one.
_KAFKA_ERROR = re.compile(r"Unknown record type -?\d+ at offset \d+, skipping\.|Error at offset \d+, skipping\. ")


class DumpFormatError(ValueError):
    """A line of the dump that does not have the expected shape."""


def _value(text: str):
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    m = re.fullmatch(r"OptionalLong\[(-?\d+)\]", text)
    if m:
        return int(m.group(1))
    if text == "OptionalLong.empty":
        return None
    return text


def _pairs(text: str) -> dict:
    return {k: _value(v) for k, v in _PAIR.findall(text)}


def parse_dump_offsets_decoder(path) -> dict:
    """Returns {(partition, offset): record} for every record line of the dump.

    record = {"partition", "offset", "file": <the dumped .log path as printed>,
    "key": <key JSON as printed, or None for control records and errors>,
    "value": <payload JSON, None for a tombstone, control record or error>,
    "tombstone": bool, "control": None or {"endTxnMarker": "COMMIT", "coordinatorEpoch": 0},
    "error": None or the text Kafka printed instead of a record it could not decode,
    "record": {CreateTime, keySize, valueSize, sequence, headerKeys},
    "batch": {baseOffset, lastOffset, count, producerId, producerEpoch, isTransactional,
    isControl, deleteHorizonMs (None when empty), CreateTime, compresscodec, ...}}.
    Note that Kafka prints key "type" and value "version" as JSON strings.
    A dump of several files of the same partition number raises: see iter_dump_records.
    """
    records: dict[tuple[int, int], dict] = {}
    for rec in iter_dump_records(path):
        key = (rec["partition"], rec["offset"])
        if key in records:
            raise DumpFormatError(f"{path}: offset {key} appears twice")
        records[key] = rec
    return records


def iter_dump_records(path):
    """Every record line of the dump, in order, as parse_dump_offsets_decoder describes
    them; for dumps of several files (`--files a.log,b.log`), tell them apart by "file"."""
    partition = None
    dumped = None
    batch = None
    with open(Path(path), encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            where = f"{path}:{lineno}"
            if line.startswith("Dumping "):
                dumped = line[len("Dumping "):].strip()
                m = _PARTITION.search(dumped)
                if not m:
                    raise DumpFormatError(f"{where}: cannot tell the partition from {line!r}")
                partition = int(m.group(1))
                batch = None
            elif line.startswith("baseOffset: "):
                batch = _pairs(line)
            elif line.startswith("| offset: "):
                if partition is None or batch is None:
                    raise DumpFormatError(f"{where}: record line before any 'Dumping'/'baseOffset' line")
                rec = _parse_record_line(line, where)
                rec["partition"] = partition
                rec["file"] = dumped
                rec["batch"] = batch
                yield rec


def _parse_record_line(line: str, where: str) -> dict:
    m = _RECORD_HEAD.match(line)
    if not m:
        raise DumpFormatError(f"{where}: unrecognised record line {line[:120]!r}")
    rec = {"offset": int(m.group(1)), "record": _pairs(m.group(2)),
           "key": None, "value": None, "tombstone": False, "control": None, "error": None}
    rest = line[m.end():]
    if rest.startswith(" endTxnMarker: "):
        rec["control"] = _pairs(rest)
        return rec
    pos = len(" key: ")
    if _KAFKA_ERROR.match(rest, pos):
        rec["error"] = rest[pos:]
        return rec
    try:
        rec["key"], pos = _DECODER.raw_decode(rest, pos)
    except json.JSONDecodeError as exc:
        raise DumpFormatError(f"{where}: key is not JSON: {exc}") from None
    if not rest.startswith(" payload: ", pos):
        raise DumpFormatError(f"{where}: no 'payload:' after the key")
    pos += len(" payload: ")
    if rest[pos:] == "<DELETE>":
        rec["tombstone"] = True
        return rec
    try:
        rec["value"], end = _DECODER.raw_decode(rest, pos)
    except json.JSONDecodeError as exc:
        raise DumpFormatError(f"{where}: payload is not JSON: {exc}") from None
    if rest[end:].strip():
        raise DumpFormatError(f"{where}: unexpected text after the payload: {rest[end:][:80]!r}")
    return rec
