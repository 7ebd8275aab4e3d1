//! The assignor cores live in their own modules (assignors.rs, uniform.rs), silver's
//! offset-commit columns in commits.rs; this file is the
//! hot path of `rebalance-audit decode`: the JSON lines of one record batch (v2) whose
//! records are all offset commits (key types 0 and 1, value versions 0-4), which is nearly
//! every batch of a `__consumer_offsets` segment.
//!
//! It is an accelerator, never a second decoder: it returns the very text the Python path
//! writes (pipelines/segments/jsonlines.py `LineEncoder`), or `None` for anything it does
//! not handle or that does not check out (a header, a group metadata record, an unknown
//! tagged field, any malformed byte), and the caller then decodes the batch in Python,
//! which reports the error with its reason. So every rule here is one the Python reader
//! (pipelines/segments/reader.py `_v2_records_into`) and the codec
//! (pipelines/codec/compiler.py, schemas.py) also apply, and only ever a stricter one.
//! The tests hold the two paths equal over the recordings, every value version and
//! mutated batches.

use pyo3::prelude::*;

mod assignors;
mod commits;
mod javahash;
mod sticky;
mod uniform;

/// Reads within `buf[..end]`; every read past `end` is `None` (the caller falls back).
struct Bytes<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Bytes<'a> {
    fn u8(&mut self) -> Option<u8> {
        if self.pos >= self.end {
            return None;
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let stop = self.pos.checked_add(n)?;
        if stop > self.end {
            return None;
        }
        let out = &self.buf[self.pos..stop];
        self.pos = stop;
        Some(out)
    }

    fn be<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N).map(|s| s.try_into().expect("take returned N bytes"))
    }

    fn i16(&mut self) -> Option<i16> {
        self.be::<2>().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Option<i32> {
        self.be::<4>().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Option<i64> {
        self.be::<8>().map(i64::from_be_bytes)
    }

    /// Zig-zag varlong (Kafka's ByteUtils.readVarlong), at most 10 bytes; a value past
    /// 64 bits is `None` where Python would carry on with a big int and fail later.
    fn varlong(&mut self) -> Option<i64> {
        let mut raw: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            let bits = u64::from(b & 0x7F);
            if shift == 63 && bits > 1 {
                return None;
            }
            raw |= bits << shift;
            if b < 0x80 {
                return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
    }

    /// Unsigned varint of the flexible versions (compact lengths, tags), at most 5 bytes.
    fn uvarint(&mut self) -> Option<u64> {
        let mut value: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            value |= u64::from(b & 0x7F) << shift;
            if b < 0x80 {
                return Some(value);
            }
            shift += 7;
            if shift > 28 {
                return None;
            }
        }
    }
}

/// Python's `json.dumps` of a str with `ensure_ascii` (what `json_text` writes): `"`, `\`
/// and the five short escapes, every other character outside printable ASCII as a
/// lowercase `\uXXXX`, astral ones as a surrogate pair. `None` for bytes that are not UTF-8.
fn push_json_str(out: &mut String, raw: &[u8]) -> Option<()> {
    let text = std::str::from_utf8(raw).ok()?;
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    push_u_escape(out, *unit);
                }
            }
        }
    }
    out.push('"');
    Some(())
}

fn push_u_escape(out: &mut String, unit: u16) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[usize::from((unit >> shift) & 0xF)] as char);
    }
}

fn push_int(out: &mut String, n: i64) {
    use std::fmt::Write;
    write!(out, "{n}").expect("writing to a String cannot fail");
}

/// Kafka's `Uuid.toString()`: URL-safe base64 without padding (22 characters).
fn push_uuid(out: &mut String, raw: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    out.push('"');
    for chunk in raw.chunks(3) {
        let mut group = [0u8; 3];
        group[..chunk.len()].copy_from_slice(chunk);
        let n = (u32::from(group[0]) << 16) | (u32::from(group[1]) << 8) | u32::from(group[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 0x3F) as usize] as char);
        }
    }
    out.push('"');
}

/// A non-flexible `string` (int16 length; a null is an error for these fields).
fn push_string(out: &mut String, r: &mut Bytes) -> Option<()> {
    let n = r.i16()?;
    if n < 0 {
        return None;
    }
    push_json_str(out, r.take(n as usize)?)
}

/// A flexible `string` (unsigned varint length + 1; 0 is a null, an error here), at most
/// Kafka's 0x7fff bytes.
fn push_compact_string(out: &mut String, r: &mut Bytes) -> Option<()> {
    let n = r.uvarint()?;
    if n == 0 || n - 1 > 0x7FFF {
        return None;
    }
    push_json_str(out, r.take((n - 1) as usize)?)
}

/// `{"type":T,"data":{"group":..,"topic":..,"partition":N}}` of an OffsetCommitKey.
fn push_key(out: &mut String, key: &[u8]) -> Option<()> {
    let mut r = Bytes { buf: key, pos: 0, end: key.len() };
    let record_type = r.i16()?;
    if record_type != 0 && record_type != 1 {
        return None;
    }
    out.push_str("{\"type\":");
    push_int(out, i64::from(record_type));
    out.push_str(",\"data\":{\"group\":");
    push_string(out, &mut r)?;
    out.push_str(",\"topic\":");
    push_string(out, &mut r)?;
    out.push_str(",\"partition\":");
    push_int(out, i64::from(r.i32()?));
    out.push_str("}}");
    (r.pos == key.len()).then_some(())
}

/// The tagged fields of an OffsetCommitValue v4: none, or only topicId (tag 0, a 16-byte
/// uuid), whose bytes it returns. Anything else (unknown tags, which the Python path keeps
/// as base64) is `None`: left to Python.
fn offset_commit_tags<'a>(r: &mut Bytes<'a>) -> Option<Option<&'a [u8]>> {
    match r.uvarint()? {
        0 => Some(None),
        1 => {
            let (tag, size) = (r.uvarint()?, r.uvarint()?);
            if tag != 0 || size != 16 {
                return None;
            }
            Some(Some(r.take(16)?))
        }
        _ => None,
    }
}

/// `{"version":V,"data":{...}}` of an OffsetCommitValue v0-v4, fields in schema order.
fn push_value(out: &mut String, value: &[u8]) -> Option<()> {
    let mut r = Bytes { buf: value, pos: 0, end: value.len() };
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return None;
    }
    out.push_str("{\"version\":");
    push_int(out, i64::from(version));
    out.push_str(",\"data\":{\"offset\":");
    push_int(out, r.i64()?);
    if version >= 3 {
        out.push_str(",\"leaderEpoch\":");
        push_int(out, i64::from(r.i32()?));
    }
    out.push_str(",\"metadata\":");
    if version >= 4 {
        push_compact_string(out, &mut r)?;
    } else {
        push_string(out, &mut r)?;
    }
    out.push_str(",\"commitTimestamp\":");
    push_int(out, r.i64()?);
    if version == 1 {
        out.push_str(",\"expireTimestamp\":");
        push_int(out, r.i64()?);
    }
    if version >= 4 {
        if let Some(topic_id) = offset_commit_tags(&mut r)? {
            out.push_str(",\"topicId\":");
            push_uuid(out, topic_id);
        }
    }
    out.push_str("}}");
    (r.pos == value.len()).then_some(())
}

/// The JSON lines (each ending in `\n`) of the `count` records in `buf[pos..end]`, a v2
/// batch's records section, or `None` where the Python path must decode the batch.
///
/// `head`, `mid`, `producer` and `tail` are the batch's facts as `LineEncoder` writes
/// them around each record's own fields; the other arguments are the batch header's.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn offset_commit_lines(
    buf: &[u8],
    pos: usize,
    end: usize,
    count: i64,
    base_offset: i64,
    last_delta: i64,
    base_ts: i64,
    max_ts: i64,
    log_append: bool,
    base_seq: i64,
    head: &str,
    mid: &str,
    producer: &str,
    tail: &str,
) -> Option<String> {
    if count <= 0 || end > buf.len() || pos > end {
        return None;
    }
    let mut r = Bytes { buf, pos, end };
    let mut out = String::with_capacity((end - pos) * 4 + count as usize * (head.len() + tail.len() + 160));
    let mut prev_delta: i64 = -1;
    for _ in 0..count {
        let length = r.varlong()?;
        if length < 6 {
            return None;
        }
        let rec_end = r.pos.checked_add(usize::try_from(length).ok()?)?;
        if rec_end > end {
            return None;
        }
        let mut rec = Bytes { buf, pos: r.pos, end: rec_end };
        rec.u8()?; // record attributes: unused
        let ts_delta = rec.varlong()?;
        let offset_delta = rec.varlong()?;
        let key_len = rec.varlong()?;
        if key_len < 0 {
            return None; // a null key: the Python path reports it
        }
        let key = rec.take(usize::try_from(key_len).ok()?)?;
        let value_len = rec.varlong()?;
        let value = if value_len < 0 { None } else { Some(rec.take(usize::try_from(value_len).ok()?)?) };
        if rec.u8()? != 0 || rec.pos != rec_end {
            return None; // headers, or fields that do not fill the declared length
        }
        if !(prev_delta < offset_delta && offset_delta <= last_delta) {
            return None;
        }
        prev_delta = offset_delta;
        let timestamp = if log_append { max_ts } else { base_ts.checked_add(ts_delta)? };
        let offset = base_offset.checked_add(offset_delta)?;
        let sequence = if base_seq < 0 {
            -1
        } else if base_seq > i64::from(i32::MAX) - offset_delta {
            offset_delta - (i64::from(i32::MAX) - base_seq) - 1 // DefaultRecordBatch.incrementSequence
        } else {
            base_seq + offset_delta
        };

        out.push_str(head);
        out.push_str("\"offset\":");
        push_int(&mut out, offset);
        out.push_str(",\"timestamp\":");
        push_int(&mut out, timestamp);
        out.push_str(mid);
        out.push_str("\"key\":");
        push_key(&mut out, key)?;
        out.push_str(",\"value\":");
        match value {
            None => out.push_str("null"),
            Some(v) => push_value(&mut out, v)?,
        }
        out.push_str(producer);
        out.push_str("\"sequence\":");
        push_int(&mut out, sequence);
        out.push_str(tail);
        out.push('\n');
        r.pos = rec_end;
    }
    (r.pos == end).then_some(out)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(offset_commit_lines, m)?)?;
    m.add_function(wrap_pyfunction!(commits::offset_commit_columns, m)?)?;
    m.add_function(wrap_pyfunction!(assignors::java_string_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(assignors::java_string_hashmap_order, m)?)?;
    m.add_function(wrap_pyfunction!(assignors::server_range_assign, m)?)?;
    m.add_function(wrap_pyfunction!(assignors::sticky_user_data, m)?)?;
    m.add_function(wrap_pyfunction!(uniform::uniform_assign, m)?)?;
    m.add_function(wrap_pyfunction!(sticky::sticky_general_assign, m)?)?;
    Ok(())
}
