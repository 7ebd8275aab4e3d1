"""The schema interpreter: turns a struct schema (pipelines.codec.schemas) at one version
into a reader and a writer, once.

Readers take `(buf, pos)` and return `(dict, new_pos)`; writers take `(dict, bytearray)`
and append.  Each struct is a flat list of steps; consecutive fixed-width fields share
one precomputed `struct.Struct`, so the per-record path is a few C calls plus dict
stores.  The wire rules are Kafka's (clients/.../protocol/types/Type.java and the message
generator):

* non-flexible: string = int16 length, bytes = int32 length, array = int32 count, -1 = null;
  nullable struct = int8 marker (-1 null, 1 present);
* flexible: compact string/bytes/array = unsigned varint N+1 (0 = null), and every struct
  ends with a tagged-field section (count, then tag, size, payload per field).

Decoded output is JSON-ready: field names in Kafka's JSON (lowerCamel), bytes as base64,
uuids as Kafka's `Uuid.toString()` (base64url, no padding).  Tagged fields appear in a
decoded dict exactly when they were present in the bytes, and are written exactly when
their key is present, so re-encoding reproduces the bytes; unknown tags are kept under
`_unknownTaggedFields` as `[{"tag": n, "data": base64}]`.
"""
from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Callable
from typing import Any


# Kafka's limit for every string, compact or not: the generated writers throw "'x' field is
# too long to be serialized" above 0x7fff bytes and the readers reject longer lengths.
MAX_STRING_BYTES = 0x7FFF
UNKNOWN_TAGS_KEY = "_unknownTaggedFields"

_FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "float64": "d"}
_SIZES = {"b": 1, "h": 2, "i": 4, "q": 8, "H": 2, "d": 8}
_PRIMITIVES = set(_FIXED) | {"bool", "uuid", "string", "bytes"}
_S_H = struct.Struct(">h")
_S_I = struct.Struct(">i")
_S_B = struct.Struct(">b")

# A struct's (or value's) reader: (buf, pos) -> (value, new pos); its writer appends to out.
Reader = Callable[[Any, int], tuple[Any, int]]
Writer = Callable[[Any, bytearray], None]


class FieldError(Exception):
    """Internal: a failure with the path of the field it happened in and, when reading, the
    byte offset (in the key or value being read) where that field starts."""

    def __init__(self, path: str, msg: str, at: int | None = None):
        super().__init__(path, msg)
        self.path = path
        self.msg = msg
        self.at = at

    def __str__(self):
        text = f"field {self.path}: {self.msg}" if self.path else self.msg
        return text if self.at is None else f"{text} (at byte {self.at})"


# What malformed bytes raise while a reader runs: a field the schema rejects, a value that
# ends early (struct.error from unpack_from, IndexError from a varint), text that is not
# UTF-8. Anything else out of a reader is a bug in the codec and must fail loudly, not be
# quarantined as a corrupt record.
MALFORMED = (FieldError, struct.error, IndexError, UnicodeDecodeError)


def _prefix(name: str, exc: Exception, at: int | None = None) -> FieldError:
    if isinstance(exc, FieldError):
        where = exc.at if exc.at is not None else at  # the innermost field's offset is the precise one
        if not exc.path:
            return FieldError(name, exc.msg, where)
        sep = "" if exc.path.startswith("[") else "."
        return FieldError(f"{name}{sep}{exc.path}", exc.msg, where)
    if isinstance(exc, (struct.error, IndexError)):
        return FieldError(name, "truncated: value ends before this field", at)
    if isinstance(exc, UnicodeDecodeError):
        return FieldError(name, f"string is not valid UTF-8 ({exc.reason})", at)
    return FieldError(name, str(exc), at)


# --- version ranges --------------------------------------------------------------------

def parse_versions(text) -> tuple[int, int] | None:
    """Kafka version range text ("0+", "3+", "1", "0-4", "none") -> (lo, hi) or None."""
    if text is None or text == "none":
        return None
    text = str(text)
    if text.endswith("+"):
        return int(text[:-1]), 1 << 15
    if "-" in text:
        lo, hi = text.split("-")
        return int(lo), int(hi)
    return int(text), int(text)


def in_versions(text, version: int) -> bool:
    r = parse_versions(text)
    return r is not None and r[0] <= version <= r[1]


def camel(name: str) -> str:
    """Kafka's FieldSpec.camelCaseName(): first letter lowered (JSON converter names)."""
    return name[:1].lower() + name[1:]


# --- varints and helpers ---------------------------------------------------------------

def read_uvarint(buf, pos):
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:
            raise FieldError("", "unsigned varint longer than 5 bytes")


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0 or value > 0xFFFFFFFF:
        raise FieldError("", f"length/count {value} does not fit an unsigned varint")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uuid_to_str(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def uuid_from_str(text) -> bytes:
    if not isinstance(text, str) or len(text) != 22:
        raise FieldError("", f"uuid must be a 22-character base64url string, got {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError) as exc:
        raise FieldError("", f"invalid uuid {text!r}: {exc}") from None
    if len(raw) != 16:
        raise FieldError("", f"invalid uuid {text!r}")
    return raw


def b64(raw) -> str:
    return base64.b64encode(raw).decode("ascii")


def bytes_from_json(value) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise FieldError("", f"invalid base64: {exc}") from None
    raise FieldError("", f"expected base64 string or bytes, got {type(value).__name__}")


# --- value readers: (buf, pos) -> (value, pos) -----------------------------------------

def _check_end(buf, end, what):
    if end > len(buf):
        raise FieldError("", f"truncated: {what} needs {end - len(buf)} more byte(s)")


def _str_from(buf, pos, end):
    try:
        return buf[pos:end].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FieldError("", f"string is not valid UTF-8 ({exc.reason} at byte {pos + exc.start})") from None


def _make_len_reader(flexible: bool, int32: bool):
    """Returns read_len(buf, pos) -> (n or -1 for null, pos)."""
    if flexible:
        def read_len(buf, pos):
            n, pos = read_uvarint(buf, pos)
            return n - 1, pos
    elif int32:
        def read_len(buf, pos):
            return _S_I.unpack_from(buf, pos)[0], pos + 4
    else:
        def read_len(buf, pos):
            return _S_H.unpack_from(buf, pos)[0], pos + 2
    return read_len


def _make_len_writer(flexible: bool, int32: bool):
    if flexible:
        def write_len(out, n):
            write_uvarint(out, n + 1)
    elif int32:
        def write_len(out, n):
            out += _S_I.pack(n)
    else:
        def write_len(out, n):
            out += _S_H.pack(n)
    return write_len


def make_value_codec(spec: dict, version: int, flexible: bool, tagged_ctx: bool = False):
    """(reader, writer) for one field's value at `version`.

    reader(buf, pos) -> (value, pos); writer(value, out) appends.  `tagged_ctx` is set for
    a tagged field's payload, where a nullable struct uses the varint marker 0/1.
    """
    type_ = spec["type"]
    nullable_ok = in_versions(spec.get("nullableVersions"), version)

    if type_.startswith("[]"):
        return _make_array_codec(spec, type_[2:], version, flexible, nullable_ok)
    if type_ in _FIXED:
        st = struct.Struct(">" + _FIXED[type_])
        size = st.size
        unpack, pack = st.unpack_from, st.pack

        def read_fixed(buf, pos):
            return unpack(buf, pos)[0], pos + size

        def write_fixed(value, out):
            try:
                out += pack(value)
            except struct.error:
                raise FieldError("", f"{value!r} does not fit {type_}") from None
        return read_fixed, write_fixed
    if type_ == "bool":
        def read_bool(buf, pos):
            b = buf[pos]
            if b > 1:
                raise FieldError("", f"bool byte {b} is neither 0 nor 1")
            return b == 1, pos + 1

        def write_bool(value, out):
            if not isinstance(value, bool):
                raise FieldError("", f"expected bool, got {value!r}")
            out.append(1 if value else 0)
        return read_bool, write_bool
    if type_ == "uuid":
        def read_uuid(buf, pos):
            end = pos + 16
            _check_end(buf, end, "uuid")
            return uuid_to_str(buf[pos:end]), end

        def write_uuid(value, out):
            out += uuid_from_str(value)
        return read_uuid, write_uuid
    if type_ == "string":
        return _make_string_codec(flexible, nullable_ok)
    if type_ == "bytes":
        return _make_bytes_codec(flexible, nullable_ok)
    # A struct-typed field.
    sub = compile_struct(spec["fields"], version, flexible, spec["type"])
    if not nullable_ok:
        return sub.read, sub.write
    if tagged_ctx:
        def read_tagged_nullable_struct(buf, pos):
            marker = buf[pos]
            if marker == 0:
                return None, pos + 1
            if marker != 1:
                raise FieldError("", f"nullable struct marker {marker} (expected 0 or 1)")
            return sub.read(buf, pos + 1)

        def write_tagged_nullable_struct(value, out):
            if value is None:
                out.append(0)
            else:
                out.append(1)
                sub.write(value, out)
        return read_tagged_nullable_struct, write_tagged_nullable_struct

    def read_nullable_struct(buf, pos):
        marker = _S_B.unpack_from(buf, pos)[0]
        if marker < 0:
            return None, pos + 1
        return sub.read(buf, pos + 1)

    def write_nullable_struct(value, out):
        if value is None:
            out += b"\xff"
        else:
            out.append(1)
            sub.write(value, out)
    return read_nullable_struct, write_nullable_struct


def _make_string_codec(flexible, nullable_ok):
    read_len = _make_len_reader(flexible, False)
    write_len = _make_len_writer(flexible, False)

    def read_string(buf, pos):
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable_ok:
                return None, pos
            raise FieldError("", "non-nullable string was serialized as null" if n == -1
                             else f"invalid string length {n}")
        if n > MAX_STRING_BYTES:
            raise FieldError("", f"string length {n} exceeds Kafka's limit of {MAX_STRING_BYTES}")
        end = pos + n
        _check_end(buf, end, f"string of {n} bytes")
        return _str_from(buf, pos, end), end

    def write_string(value, out):
        if value is None:
            if not nullable_ok:
                raise FieldError("", "null is not allowed for this non-nullable string")
            write_len(out, -1)
            return
        if not isinstance(value, str):
            raise FieldError("", f"expected a string, got {type(value).__name__}")
        raw = value.encode("utf-8")
        if len(raw) > MAX_STRING_BYTES:
            raise FieldError("", f"string of {len(raw)} UTF-8 bytes is too long: "
                                 f"Kafka's limit is {MAX_STRING_BYTES}")
        write_len(out, len(raw))
        out += raw
    return read_string, write_string


def _make_bytes_codec(flexible, nullable_ok):
    read_len = _make_len_reader(flexible, True)
    write_len = _make_len_writer(flexible, True)

    def read_bytes(buf, pos):
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable_ok:
                return None, pos
            raise FieldError("", "non-nullable bytes were serialized as null" if n == -1
                             else f"invalid bytes length {n}")
        end = pos + n
        _check_end(buf, end, f"bytes of length {n}")
        return b64(buf[pos:end]), end

    def write_bytes(value, out):
        if value is None:
            if not nullable_ok:
                raise FieldError("", "null is not allowed for these non-nullable bytes")
            write_len(out, -1)
            return
        raw = bytes_from_json(value)
        if len(raw) > 0x7FFFFFFF:
            raise FieldError("", f"{len(raw)} bytes exceed the int32 length limit")
        write_len(out, len(raw))
        out += raw
    return read_bytes, write_bytes


def _make_array_codec(spec, elem_type, version, flexible, nullable_ok):
    read_len = _make_len_reader(flexible, True)
    write_len = _make_len_writer(flexible, True)
    if elem_type in _FIXED:
        code = _FIXED[elem_type]
        esize = _SIZES[code]
        cache: dict[int, struct.Struct] = {}

        def read_elems(buf, pos, n):
            st = cache.get(n)
            if st is None:
                st = struct.Struct(f">{n}{code}")
                if n < 64:
                    cache[n] = st
            return list(st.unpack_from(buf, pos)), pos + n * esize

        def write_elems(values, out):
            try:
                out += struct.pack(f">{len(values)}{code}", *values)
            except struct.error as exc:
                raise FieldError("", f"array element does not fit {elem_type}: {exc}") from None
        min_size = esize
    else:
        if elem_type in _PRIMITIVES:
            elem_read, elem_write = make_value_codec({"type": elem_type}, version, flexible)
        else:
            sub = compile_struct(spec["fields"], version, flexible, elem_type)
            elem_read, elem_write = sub.read, sub.write

        def read_elems(buf, pos, n):
            items = []
            append = items.append
            for i in range(n):
                try:
                    item, pos = elem_read(buf, pos)
                except MALFORMED as exc:  # annotate with the element index
                    raise _prefix(f"[{i}]", exc, pos) from None
                append(item)
            return items, pos

        def write_elems(values, out):
            for i, item in enumerate(values):
                try:
                    elem_write(item, out)
                except Exception as exc:
                    raise _prefix(f"[{i}]", exc) from None
        min_size = 1

    def read_array(buf, pos):
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable_ok:
                return None, pos
            raise FieldError("", "non-nullable array was serialized as null" if n == -1
                             else f"invalid array length {n}")
        # Every element needs at least min_size bytes: reject absurd counts before looping.
        if pos + n * min_size > len(buf):
            raise FieldError("", f"truncated: array of {n} elements does not fit the "
                                 f"{len(buf) - pos} remaining bytes")
        return read_elems(buf, pos, n)

    def write_array(values, out):
        if values is None:
            if not nullable_ok:
                raise FieldError("", "null is not allowed for this non-nullable array")
            write_len(out, -1)
            return
        if not isinstance(values, (list, tuple)):
            raise FieldError("", f"expected a list, got {type(values).__name__}")
        write_len(out, len(values))
        write_elems(values, out)
    return read_array, write_array


# --- structs ---------------------------------------------------------------------------

_MISSING = object()


class CompiledStruct:
    """Reader/writer of one struct at one version."""

    __slots__ = ("name", "read", "write", "field_names", "tagged_names")
    name: str
    read: Reader
    write: Writer
    field_names: tuple[str, ...]
    tagged_names: tuple[str, ...]


def compile_struct(fields: list[dict], version: int, flexible: bool, name: str) -> CompiledStruct:
    write_steps: list[tuple[str, object]] = []
    allowed: set[str] = set()
    foreign: dict[str, tuple[bool, object]] = {}   # fields of other versions: (ignorable, default)
    tags: dict[int, tuple[str, object]] = {}        # tag -> (json name, payload reader)
    tag_writers: list[tuple[int, str, object]] = []
    run: list[tuple[str, str, object]] = []         # pending fixed-width fields: (name, code, default)
    field_names: list[str] = []
    plan: list[tuple] = []                          # what the generated reader does, in order

    def flush_run():
        if not run:
            return
        names = tuple(n for n, _, _ in run)
        defaults = tuple(d for _, _, d in run)
        st = struct.Struct(">" + "".join(c for _, c, _ in run))
        pack = st.pack
        label = ", ".join(names)

        def write_run(d, out):
            vals = [d.get(n, dflt) for n, dflt in zip(names, defaults)]
            for n, v in zip(names, vals):
                if v is _MISSING:
                    raise FieldError(n, "missing (no default)")
            try:
                out += pack(*vals)
            except struct.error as exc:
                raise FieldError(label, f"value out of range: {exc}") from None
        write_steps.append((label, write_run))
        plan.append(("run", names, st))
        run.clear()

    for spec in fields:
        jname = camel(spec["name"])
        if not in_versions(spec["versions"], version):
            foreign[jname] = (bool(spec.get("ignorable")), spec.get("default", _MISSING))
            continue
        allowed.add(jname)
        default = spec.get("default", _MISSING)
        if flexible and in_versions(spec.get("taggedVersions"), version):
            reader, writer = make_value_codec(spec, version, flexible, tagged_ctx=True)
            tags[spec["tag"]] = (jname, reader)
            tag_writers.append((spec["tag"], jname, writer))
            continue
        field_names.append(jname)
        code = _FIXED.get(spec["type"])
        if code is not None:
            run.append((jname, code, default))
            continue
        flush_run()
        reader, writer = make_value_codec(spec, version, flexible)
        if spec["type"] == "string":
            plan.append(("string", jname, in_versions(spec.get("nullableVersions"), version)))
        else:
            plan.append(("call", jname, reader))

        def write_step(d, out, _n=jname, _w=writer, _dflt=default):
            v = d.get(_n, _dflt)
            if v is _MISSING:
                raise FieldError("", "missing (no default)")
            _w(v, out)
        write_steps.append((jname, write_step))
    flush_run()

    if flexible:
        plan.append(("call_tags", "<tagged fields>", _make_tag_reader(tags)))
        write_steps.append(("<tagged fields>", _make_tag_writer(tag_writers)))
        allowed.add(UNKNOWN_TAGS_KEY)
    allowed.update(tags[t][0] for t in tags)

    def write(d, out):
        if not isinstance(d, dict):
            raise FieldError("", f"expected an object for {name}, got {type(d).__name__}")
        extra = d.keys() - allowed
        if extra:
            _check_extra(extra, d, foreign, name, version)
        label = name
        try:
            for label, step in write_steps:
                step(d, out)
        except Exception as exc:
            raise _prefix(label, exc) from None

    cs = CompiledStruct()
    cs.name, cs.read, cs.write = name, _generate_reader(plan, flexible, name), write
    cs.field_names, cs.tagged_names = tuple(field_names), tuple(tags[t][0] for t in sorted(tags))
    return cs


def _check_extra(extra, d, foreign, name, version):
    """Keys that this version does not write: fine if codec metadata (`_x`), or a field of
    another version that is ignorable or at its default (Kafka's rule); else an error."""
    for key in sorted(extra):
        if key.startswith("_"):
            continue
        if key in foreign:
            ignorable, default = foreign[key]
            if ignorable or d[key] == default or (default is _MISSING and not d[key]):
                continue
            raise FieldError(key, f"not in {name} version {version} and not ignorable")
        raise FieldError(key, f"unknown field for {name} version {version}")


def _make_tag_reader(tags):
    def read_tags(buf, pos, d):
        n, pos = read_uvarint(buf, pos)
        if n == 0:
            return pos
        unknown = None
        seen = set()
        for _ in range(n):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            _check_end(buf, end, f"tagged field {tag} of {size} bytes")
            if tag in seen:
                raise FieldError("", f"tagged field {tag} appears twice")
            seen.add(tag)
            known = tags.get(tag)
            if known is None:
                if unknown is None:
                    unknown = []
                unknown.append({"tag": tag, "data": b64(buf[pos:end])})
            else:
                jname, reader = known
                try:
                    value, used = reader(buf[:end], pos)
                except MALFORMED as exc:
                    raise _prefix(jname, exc, pos) from None
                if used != end:
                    raise FieldError(jname, f"tagged field {tag} declares {size} bytes but its "
                                            f"value uses {used - pos}")
                d[jname] = value
            pos = end
        if unknown is not None:
            d[UNKNOWN_TAGS_KEY] = unknown
        return pos
    return read_tags


def _make_tag_writer(tag_writers):
    def write_tags(d, out):
        entries = []
        for tag, jname, writer in tag_writers:
            if jname in d:
                payload = bytearray()
                try:
                    writer(d[jname], payload)
                except Exception as exc:
                    raise _prefix(jname, exc) from None
                entries.append((tag, payload))
        unknown = d.get(UNKNOWN_TAGS_KEY)
        if unknown:
            known_tags = {t for t, _ in entries} | {t for t, _, _ in tag_writers}
            for item in unknown:
                try:
                    tag = item["tag"]
                    payload = bytes_from_json(item["data"])
                except (KeyError, TypeError) as exc:
                    raise FieldError(UNKNOWN_TAGS_KEY, f"entries need 'tag' and 'data': {exc}") from None
                if not isinstance(tag, int) or tag < 0 or tag in known_tags:
                    raise FieldError(UNKNOWN_TAGS_KEY, f"tag {tag!r} is invalid or clashes with a known field")
                known_tags.add(tag)
                entries.append((tag, payload))
        write_uvarint(out, len(entries))
        if not entries:
            return
        entries.sort(key=lambda e: e[0])
        for tag, payload in entries:
            write_uvarint(out, tag)
            write_uvarint(out, len(payload))
            out += payload
    return write_tags


# --- generated readers -----------------------------------------------------------------
# Writers are step lists (encoding is not on the hot path); each struct's reader is one
# straight-line Python function generated from its plan (fixed-width runs as one
# precomputed struct unpack, strings inline, everything else through the closures).  The
# source is built only from our schema table, never from record data.

def _generate_reader(plan, flexible, name):
    ns = {"FieldError": FieldError, "MALFORMED": MALFORMED, "_prefix": _prefix, "_h": _S_H.unpack_from,
          "read_uvarint": read_uvarint, "MAX": MAX_STRING_BYTES}
    lines = ["def read(buf, pos):", "    d = {}", "    _f = %r" % name, "    _p = pos", "    try:"]
    add = lines.append
    for i, item in enumerate(plan):
        kind = item[0]
        if kind == "run":
            _, names, st = item
            ns[f"_s{i}"] = st.unpack_from
            add(f"        _f = {', '.join(names)!r}")
            add("        _p = pos")
            targets = "".join(f"d[{n!r}], " for n in names)
            add(f"        {targets}= _s{i}(buf, pos)")
            add(f"        pos += {st.size}")
        elif kind == "string":
            _, jname, nullable_ok = item
            add(f"        _f = {jname!r}")
            add("        _p = pos")
            if flexible:
                add("        n, pos = read_uvarint(buf, pos)")
                add("        n -= 1")
            else:
                add("        n = _h(buf, pos)[0]")
                add("        pos += 2")
            add("        if n < 0:")
            if nullable_ok:
                add("            if n != -1: raise FieldError('', f'invalid string length {n}')")
                add(f"            d[{jname!r}] = None")
            else:
                add("            raise FieldError('', 'non-nullable string was serialized as null' if n == -1 "
                    "else f'invalid string length {n}')")
            add("        else:")
            add("            if n > MAX: raise FieldError('', f\"string length {n} exceeds Kafka's limit of {MAX}\")")
            add("            end = pos + n")
            add("            if end > len(buf): raise FieldError('', f'truncated: string of {n} bytes needs '"
                " f'{end - len(buf)} more byte(s)')")
            add(f"            d[{jname!r}] = buf[pos:end].decode('utf-8')")
            add("            pos = end")
        elif kind == "call":
            _, jname, reader = item
            ns[f"_r{i}"] = reader
            add(f"        _f = {jname!r}")
            add("        _p = pos")
            add(f"        d[{jname!r}], pos = _r{i}(buf, pos)")
        else:  # call_tags
            _, label, reader = item
            ns[f"_r{i}"] = reader
            add(f"        _f = {label!r}")
            add("        _p = pos")
            add(f"        pos = _r{i}(buf, pos, d)")
    add("    except MALFORMED as exc:")
    add("        raise _prefix(_f, exc, _p) from None")
    add("    return d, pos")
    exec(compile("\n".join(lines), f"<codec reader {name}>", "exec"), ns)
    return ns["read"]
