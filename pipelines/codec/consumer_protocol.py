"""The consumer protocol embedded in GroupMetadata members (`subscription`/`assignment`
bytes when protocolType == "consumer") and the sticky assignors' userData inside it.

Both blobs are `int16 version` + a non-flexible struct (ConsumerProtocolSubscription /
ConsumerProtocolAssignment, versions 0-3).  Like Kafka's ConsumerProtocol, a newer version
is read with the highest known one; bytes after the known fields are kept (`_trailing`)
so that encoding gives back the original bytes.  Decoded blobs carry `_version`.

The subscription's userData is decoded by the group's selected `protocol`:
`sticky` -> StickyAssignor V1 `{previous_assignment, generation}` or V0
`{previous_assignment}`; `cooperative-sticky` -> `{generation}` (Java) or the sticky V1
layout (librdkafka).  The decoded userData
carries `_format` ("sticky-v1", "sticky-v0", "cooperative-sticky").  Null or empty
userData stays as it is; other protocols keep the base64 bytes.
"""
from __future__ import annotations

import base64
import struct

from .compiler import FieldError, b64, bytes_from_json, compile_struct
from .errors import CodecError
from .schemas import (CONSUMER_PROTOCOL_ASSIGNMENT, CONSUMER_PROTOCOL_SUBSCRIPTION,
                      COOPERATIVE_STICKY_USER_DATA, STICKY_USER_DATA_V0, STICKY_USER_DATA_V1)

HIGHEST_KNOWN_VERSION = 3
_S_H = struct.Struct(">h")

_SUBSCRIPTION = {v: compile_struct(CONSUMER_PROTOCOL_SUBSCRIPTION["fields"], v, False, "ConsumerProtocolSubscription")
                 for v in range(HIGHEST_KNOWN_VERSION + 1)}
_ASSIGNMENT = {v: compile_struct(CONSUMER_PROTOCOL_ASSIGNMENT["fields"], v, False, "ConsumerProtocolAssignment")
               for v in range(HIGHEST_KNOWN_VERSION + 1)}
_USER_DATA = {
    "sticky-v1": compile_struct(STICKY_USER_DATA_V1["fields"], 0, False, "StickyAssignorUserDataV1"),
    "sticky-v0": compile_struct(STICKY_USER_DATA_V0["fields"], 0, False, "StickyAssignorUserDataV0"),
    "cooperative-sticky": compile_struct(COOPERATIVE_STICKY_USER_DATA["fields"], 0, False,
                                         "CooperativeStickyAssignorUserData"),
}
# Order in which userData formats are tried, per selected protocol; the first that parses
# all the bytes wins.  StickyAssignor reads V1 and falls back to V0.  For
# cooperative-sticky, Java clients write `{generation}` (4 bytes) but librdkafka writes the
# sticky V1 layout `{previous_assignment, generation}` (seen in the cooperative_rolling
# recording), so both are tried, Java's first.
_USER_DATA_FORMATS = {"sticky": ("sticky-v1", "sticky-v0"),
                      "cooperative-sticky": ("cooperative-sticky", "sticky-v1", "sticky-v0")}


def _read_versioned(raw: bytes, compiled: dict, what: str) -> dict:
    if len(raw) < 2:
        raise CodecError(f"{what}: {len(raw)} byte(s), too short for the int16 version")
    version = _S_H.unpack_from(raw, 0)[0]
    if version < 0:
        raise CodecError(f"{what}: negative version {version}")
    try:
        data, pos = compiled[min(version, HIGHEST_KNOWN_VERSION)].read(raw, 2)
    except FieldError as exc:
        raise CodecError(f"{what} v{version}: {exc}") from None
    out = {"_version": version}
    out.update(data)
    if pos < len(raw):
        out["_trailing"] = b64(raw[pos:])
    return out


def _write_versioned(obj: dict, compiled: dict, what: str) -> bytes:
    version = obj.get("_version", HIGHEST_KNOWN_VERSION)
    if not isinstance(version, int) or not 0 <= version <= 0x7FFF:
        raise CodecError(f"{what}: invalid _version {version!r}")
    out = bytearray(_S_H.pack(version))
    try:
        compiled[min(version, HIGHEST_KNOWN_VERSION)].write(obj, out)
        if "_trailing" in obj:
            out += bytes_from_json(obj["_trailing"])
    except FieldError as exc:
        raise CodecError(f"{what} v{version}: {exc}") from None
    return bytes(out)


def decode_user_data(raw: bytes, protocol: str | None):
    """userData bytes -> decoded dict for the sticky assignors, else None."""
    for fmt in _USER_DATA_FORMATS.get(protocol or "", ()):
        try:
            data, pos = _USER_DATA[fmt].read(raw, 0)
        except FieldError:
            continue
        if pos == len(raw):
            return {"_format": fmt, **data}
    return None


def read_user_data_prefix(raw: bytes, fmt: str) -> dict:
    """userData read as `fmt` the way Kafka's Java assignors read it (Struct.read): the fields
    from the start, bytes after them ignored. Raises CodecError when the fields do not fit."""
    try:
        data, _ = _USER_DATA[fmt].read(raw, 0)
    except FieldError as exc:
        raise CodecError(f"userData ({fmt}): {exc}") from None
    return data


def write_user_data(fmt: str, data: dict) -> bytes:
    """`data` (fields of `fmt`, no `_format`) as userData bytes."""
    return encode_user_data({"_format": fmt, **data})


def encode_user_data(value):
    """A userData field value (decoded dict, base64, bytes or None) -> bytes or None."""
    if value is None:
        return None
    if isinstance(value, dict):
        fmt = value.get("_format")
        compiled = _USER_DATA.get(fmt)
        if compiled is None:
            raise CodecError(f"userData: unknown _format {fmt!r} (known: {sorted(_USER_DATA)})")
        out = bytearray()
        try:
            compiled.write(value, out)
        except FieldError as exc:
            raise CodecError(f"userData ({fmt}): {exc}") from None
        return bytes(out)
    return bytes_from_json(value)


def decode_subscription(raw: bytes, protocol: str | None = None) -> dict:
    sub = _read_versioned(raw, _SUBSCRIPTION, "ConsumerProtocolSubscription")
    user_data = sub.get("userData")
    if user_data and protocol in _USER_DATA_FORMATS:
        decoded = decode_user_data(base64.b64decode(user_data), protocol)
        if decoded is None:
            sub["_userDataError"] = f"userData does not parse as {protocol} assignor user data; kept as bytes"
        else:
            sub["userData"] = decoded
    return sub


def encode_subscription(sub: dict) -> bytes:
    if isinstance(sub.get("userData"), dict):
        sub = {**sub, "userData": encode_user_data(sub["userData"])}
    return _write_versioned(sub, _SUBSCRIPTION, "ConsumerProtocolSubscription")


def decode_assignment(raw: bytes) -> dict:
    return _read_versioned(raw, _ASSIGNMENT, "ConsumerProtocolAssignment")


def encode_assignment(asg: dict) -> bytes:
    return _write_versioned(asg, _ASSIGNMENT, "ConsumerProtocolAssignment")


def expand_group_members(data: dict) -> None:
    """Replace members' subscription/assignment base64 by decoded objects, in place.

    Only for protocolType "consumer" (as Kafka's DumpLogSegments does).  A blob that does
    not parse stays as base64 with `_subscriptionError` / `_assignmentError` on the member.
    Parsing is strict (exact lengths, -1 as the only null, all bytes accounted for, extra
    bytes of newer versions kept), so a decoded blob always re-encodes to the same bytes;
    the tests check that on every recorded GroupMetadata record.
    """
    if data.get("protocolType") != "consumer":
        return
    protocol = data.get("protocol")
    for member in data.get("members") or ():
        for field, decode in (("subscription", lambda r: decode_subscription(r, protocol)),
                              ("assignment", decode_assignment)):
            text = member.get(field)
            if not isinstance(text, str):
                continue
            try:
                obj = decode(base64.b64decode(text))
            except CodecError as exc:
                member[f"_{field}Error"] = str(exc)
                continue
            member[field] = obj


def collapse_group_members(data: dict) -> dict:
    """The inverse of expand_group_members for encoding: decoded blobs back to bytes."""
    members = data.get("members")
    if not members or not any(isinstance(m, dict) and (isinstance(m.get("subscription"), dict)
                                                       or isinstance(m.get("assignment"), dict))
                              for m in members):
        return data
    new_members = []
    for m in members:
        if isinstance(m, dict):
            m = dict(m)
            if isinstance(m.get("subscription"), dict):
                m["subscription"] = encode_subscription(m["subscription"])
            if isinstance(m.get("assignment"), dict):
                m["assignment"] = encode_assignment(m["assignment"])
        new_members.append(m)
    return {**data, "members": new_members}
