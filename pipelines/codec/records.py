"""Decoding and encoding of `__consumer_offsets` keys and values, driven by the compiled
registry (pipelines.codec.schemas.RECORDS).

Framing (CoordinatorRecordSerde): key = int16 record type + key struct; value = int16
value version + value struct, or null (a tombstone).

Layout choice for (type, version) pairs whose bytes changed between releases without a
version bump: with `kafka_version`, the layout that release wrote (a release newer than
every layout uses the newest, since records outlive the broker that wrote them).  Without
it, every candidate layout is tried strictly (all bytes consumed, every length, null and
tag valid); exactly one success is used, several are a CodecError that names the
releases and `--kafka-version`.  That is not a guess: bytes that parse under only one
layout could not have been written by the other.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .compiler import FieldError, Reader, Writer, compile_struct, in_versions, parse_versions
from .consumer_protocol import collapse_group_members, expand_group_members
from .errors import CodecError
from .schemas import RECORDS

_S_H = struct.Struct(">h")
GROUP_METADATA = 2


def parse_release(text: str) -> tuple[int, int]:
    """"3.9", "3.9.1", "4.0" -> (major, minor)."""
    parts = str(text).strip().split(".")
    try:
        if len(parts) < 2:
            raise ValueError
        return int(parts[0]), int(parts[1])
    except ValueError:
        raise CodecError(f"invalid kafka_version {text!r}: expected a release like '3.9' or '4.0'") from None


@dataclass(frozen=True)
class Layout:
    record_type: int
    version: int
    since: tuple[int, int] | None
    until: tuple[int, int] | None
    label: str
    read: Reader
    write: Writer


def _label(since, until) -> str:
    if since is None and until is None:
        return "all releases"
    if until is None:
        return f"Kafka {since}+"
    major, minor = (int(x) for x in since.split("."))
    if until == f"{major}.{minor + 1}":
        return f"Kafka {since}"
    return f"Kafka {since} to before {until}"


def _compile():
    keys, values, version_ranges = {}, {}, {}
    for rtype, entry in RECORDS.items():
        key = entry["key"]
        keys[rtype] = compile_struct(key["fields"], 0, False, key["name"])
        lo_all, hi_all = None, None
        for layout in entry["value"]:
            sch = layout["schema"]
            lo, hi = parse_versions(sch["validVersions"])
            lo_all = lo if lo_all is None else min(lo_all, lo)
            hi_all = hi if hi_all is None else max(hi_all, hi)
            for v in range(lo, hi + 1):
                flexible = in_versions(sch["flexibleVersions"], v)
                cs = compile_struct(sch["fields"], v, flexible, sch["name"])
                values.setdefault((rtype, v), []).append(Layout(
                    rtype, v,
                    parse_release(layout["since"]) if layout["since"] else None,
                    parse_release(layout["until"]) if layout["until"] else None,
                    _label(layout["since"], layout["until"]), cs.read, cs.write))
        version_ranges[rtype] = (lo_all, hi_all)
    return keys, values, version_ranges


_KEYS, _VALUES, _VERSION_RANGES = _compile()
# Hot path: (type, version) pairs with a single layout, read without any choosing.
_SINGLE = {tv: ls[0].read for tv, ls in _VALUES.items() if len(ls) == 1}
RECORD_TYPES: dict[int, str] = {t: e["name"] for t, e in sorted(RECORDS.items())}


def _as_bytes(buf, what):
    if isinstance(buf, bytes):
        return buf
    if isinstance(buf, (bytearray, memoryview)):
        return bytes(buf)
    raise CodecError(f"{what} must be bytes, got {type(buf).__name__}")


def _record_name(record_type: int) -> str:
    name = RECORD_TYPES.get(record_type)
    if name is None:
        raise CodecError(f"unknown record type {record_type} (known types: "
                         f"{min(RECORD_TYPES)}-{max(RECORD_TYPES)})")
    return name


# --- keys ------------------------------------------------------------------------------

def decode_key(key: bytes) -> tuple[int, dict]:
    if type(key) is not bytes:
        key = _as_bytes(key, "key")
    if len(key) < 2:
        raise CodecError(f"key of {len(key)} byte(s) is too short for the int16 record type")
    rtype = _S_H.unpack_from(key, 0)[0]
    compiled = _KEYS.get(rtype)
    if compiled is None:
        _record_name(rtype)
    try:
        data, pos = compiled.read(key, 2)
    except FieldError as exc:
        raise CodecError(f"{RECORD_TYPES[rtype]} key (type {rtype}): {exc}") from None
    if pos != len(key):
        raise CodecError(f"{RECORD_TYPES[rtype]} key (type {rtype}): {len(key) - pos} trailing "
                         f"byte(s) after the key")
    return rtype, data


def encode_key(record_type: int, data: dict) -> bytes:
    name = _record_name(record_type)
    out = bytearray(_S_H.pack(record_type))
    try:
        _KEYS[record_type].write(data, out)
    except FieldError as exc:
        raise CodecError(f"{name} key (type {record_type}): {exc}") from None
    return bytes(out)


# --- values ----------------------------------------------------------------------------

def _layouts(record_type: int, version: int, kafka_version: str | None) -> list[Layout]:
    name = _record_name(record_type)
    layouts = _VALUES.get((record_type, version))
    if layouts is None:
        lo, hi = _VERSION_RANGES[record_type]
        raise CodecError(f"{name} (type {record_type}): unknown value version {version} "
                         f"(known: {lo}-{hi})")
    if kafka_version is None or len(layouts) == 1:
        return layouts
    release = parse_release(kafka_version)
    chosen = [l for l in layouts if (l.since is None or l.since <= release)
              and (l.until is None or release < l.until)]
    if chosen:
        return chosen
    older = [l for l in layouts if l.since is None or l.since <= release]
    if older:  # a release after every layout: the newest layout wrote these records
        return [max(older, key=lambda l: l.since or (0, 0))]
    raise CodecError(f"{name} (type {record_type}) value v{version} was not written by Kafka "
                     f"{kafka_version} (first written by {layouts[0].label})")


def _parse(layout: Layout, value: bytes) -> dict:
    data, pos = layout.read(value, 2)
    if pos != len(value):
        raise FieldError("", f"{len(value) - pos} trailing byte(s) after the value")
    return data


def decode_value(record_type: int, value: bytes | None,
                 kafka_version: str | None = None) -> tuple[int, dict] | None:
    if value is None:
        return None
    if type(value) is not bytes:
        value = _as_bytes(value, "value")
    if record_type != GROUP_METADATA and len(value) >= 2:
        version = _S_H.unpack_from(value, 0)[0]
        read = _SINGLE.get((record_type, version))
        if read is not None:
            try:
                data, pos = read(value, 2)
                if pos == len(value):
                    return version, data
            except FieldError:
                pass
            # Fall through to the slow path, which builds the error message.
    if len(value) < 2:
        _record_name(record_type)
        raise CodecError(f"{RECORD_TYPES[record_type]} value of {len(value)} byte(s) is too short "
                         f"for the int16 version")
    version = _S_H.unpack_from(value, 0)[0]
    layouts = _layouts(record_type, version, kafka_version)
    name = RECORD_TYPES[record_type]
    if len(layouts) == 1:
        try:
            data = _parse(layouts[0], value)
        except FieldError as exc:
            where = f" ({layouts[0].label} layout)" if len(_VALUES[(record_type, version)]) > 1 else ""
            raise CodecError(f"{name} value v{version}{where}: {exc}") from None
    else:
        parsed, failures = [], []
        for layout in layouts:
            try:
                parsed.append((layout, _parse(layout, value)))
            except FieldError as exc:
                failures.append(f"as {layout.label}: {exc}")
        if len(parsed) == 1:
            data = parsed[0][1]
        elif parsed:
            raise CodecError(
                f"{name} value v{version} is ambiguous: its bytes are valid for the layouts of "
                f"{', '.join(l.label for l, _ in parsed)}; pass kafka_version "
                f"(--kafka-version) to choose")
        else:
            raise CodecError(f"{name} value v{version} matches no known layout ("
                             + "; ".join(failures) + "); --kafka-version selects one layout")
    if record_type == GROUP_METADATA:
        expand_group_members(data)
    return version, data


def encode_value(record_type: int, version: int, data: dict,
                 kafka_version: str | None = None) -> bytes:
    name = _record_name(record_type)
    if not isinstance(data, dict):
        raise CodecError(f"{name} value: data must be a dict, got {type(data).__name__}")
    layouts = _layouts(record_type, version, kafka_version)
    if record_type == GROUP_METADATA:
        data = collapse_group_members(data)
    results, failures = [], []
    for layout in layouts:
        out = bytearray(_S_H.pack(version))
        try:
            layout.write(data, out)
        except FieldError as exc:
            failures.append((layout, exc))
            continue
        results.append((layout, bytes(out)))
    if len(results) == 1:
        return results[0][1]
    if not results:
        if len(failures) == 1:
            raise CodecError(f"{name} value v{version}: {failures[0][1]}")
        raise CodecError(f"{name} value v{version}: fits no layout ("
                         + "; ".join(f"as {l.label}: {e}" for l, e in failures) + ")")
    raise CodecError(f"{name} value v{version}: the data fits the layouts of "
                     f"{', '.join(l.label for l, _ in results)}; pass kafka_version to choose")


def decode_record(key: bytes, value: bytes | None, kafka_version: str | None = None) -> dict:
    rtype, key_data = decode_key(key)
    decoded = decode_value(rtype, value, kafka_version)
    return {"key": {"type": rtype, "data": key_data},
            "value": None if decoded is None else {"version": decoded[0], "data": decoded[1]}}


def layouts_of(record_type: int, version: int) -> list[str]:
    """Labels of the layouts known for (type, version), for tests and docs."""
    _record_name(record_type)
    return [l.label for l in _VALUES.get((record_type, version), [])]


def value_versions(record_type: int) -> tuple[int, int]:
    _record_name(record_type)
    return _VERSION_RANGES[record_type]
