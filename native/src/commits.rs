//! Silver's hot path: the `offset_commits` columns of a batch of bronze offset commits
//! (key types 0 and 1, value versions 0-4), which are nearly every row silver decodes.
//!
//! Like the JSON lines in lib.rs it is an accelerator, never a second decoder: a row it
//! does not handle, or that does not check out (a malformed byte, a string that is not
//! UTF-8, an unknown tagged field, a time the Python path would not turn into the same
//! microsecond), gets `ok = 0` and the caller decodes it in Python
//! (pipelines/silver/records.py `offset_commit_rows`), which also reports the error. Every
//! other row holds exactly the values that function gives; tests/test_silver_native.py
//! holds the two paths equal.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::{offset_commit_tags, Bytes};

/// The largest commit or expiry time (ms) whose `datetime.fromtimestamp(ms / 1000.0)` is
/// exactly `ms * 1000` microseconds: below 2^33 s the float's rounding error stays under
/// half a microsecond. Later times (past the year 2242) are left to Python.
const EXACT_MS: i64 = (1i64 << 33) * 1000;

/// A column of variable-length strings as Arrow lays it out: int32 end offsets and bytes.
struct Strings {
    offsets: Vec<u8>,
    data: Vec<u8>,
}

impl Strings {
    fn new(n: usize) -> Self {
        let mut offsets = Vec::with_capacity((n + 1) * 4);
        offsets.extend_from_slice(&0i32.to_le_bytes());
        Strings { offsets, data: Vec::new() }
    }

    /// Appends `raw` to the current row if it is UTF-8.
    fn push(&mut self, raw: &[u8]) -> Option<()> {
        std::str::from_utf8(raw).ok()?;
        self.data.extend_from_slice(raw);
        Some(())
    }

    /// Ends the current row, keeping the first `keep` bytes of the data (a row given up on
    /// drops what it pushed). `None` past Arrow's 2 GiB of a string column.
    fn close(&mut self, keep: usize) -> Option<()> {
        self.data.truncate(keep);
        self.offsets.extend_from_slice(&i32::try_from(keep).ok()?.to_le_bytes());
        Some(())
    }
}

/// One decoded commit: the fields `offset_commit_rows` reads from the key and value.
struct Commit<'a> {
    group: &'a [u8],
    topic: &'a [u8],
    partition: i32,
    /// None: a tombstone (the value is null).
    value: Option<Value<'a>>,
}

struct Value<'a> {
    version: i16,
    offset: i64,
    leader_epoch: i32,
    metadata: &'a [u8],
    commit_ms: i64,
    expire_ms: i64,
}

/// A non-flexible `string` (int16 length, not null).
fn string<'a>(r: &mut Bytes<'a>) -> Option<&'a [u8]> {
    let n = r.i16()?;
    if n < 0 {
        return None;
    }
    r.take(n as usize)
}

/// An OffsetCommitKey of type 0 or 1, filling `key` exactly.
fn key(raw: &[u8]) -> Option<(&[u8], &[u8], i32)> {
    let mut r = Bytes { buf: raw, pos: 0, end: raw.len() };
    let record_type = r.i16()?;
    if record_type != 0 && record_type != 1 {
        return None;
    }
    let group = string(&mut r)?;
    let topic = string(&mut r)?;
    let partition = r.i32()?;
    (r.pos == raw.len()).then_some((group, topic, partition))
}

/// An OffsetCommitValue v0-v4 filling `raw` exactly; in v4 no tagged field but topicId.
fn value(raw: &[u8]) -> Option<Value<'_>> {
    let mut r = Bytes { buf: raw, pos: 0, end: raw.len() };
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return None;
    }
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = if version >= 4 {
        let n = r.uvarint()?;
        if n == 0 || n - 1 > 0x7FFF {
            return None;
        }
        r.take((n - 1) as usize)?
    } else {
        string(&mut r)?
    };
    let commit_ms = r.i64()?;
    let expire_ms = if version == 1 { r.i64()? } else { -1 };
    if version >= 4 {
        offset_commit_tags(&mut r)?;
    }
    if commit_ms >= EXACT_MS || expire_ms >= EXACT_MS {
        return None;
    }
    (r.pos == raw.len()).then_some(Value { version, offset, leader_epoch, metadata, commit_ms, expire_ms })
}

/// The `i`-th entry of an Arrow binary column's int32 offsets, as a byte range of `data`.
fn slot<'a>(offsets: &[u8], data: &'a [u8], i: usize) -> Option<&'a [u8]> {
    let at = |j: usize| -> Option<usize> {
        let b = offsets.get(j * 4..j * 4 + 4)?;
        usize::try_from(i32::from_le_bytes(b.try_into().ok()?)).ok()
    };
    let (start, end) = (at(i)?, at(i + 1)?);
    data.get(start..end)
}

fn commit<'a>(key_raw: &'a [u8], value_raw: Option<&'a [u8]>) -> Option<Commit<'a>> {
    let (group, topic, partition) = key(key_raw)?;
    let value = match value_raw {
        None => None,
        Some(raw) => Some(value(raw)?),
    };
    Some(Commit { group, topic, partition, value })
}

/// The columns of `n` offset commits given as Arrow binary columns (`key_offsets`,
/// `value_offsets`: n + 1 int32 offsets from the array's first row; `value_valid`: one
/// byte per row, 0 for a null value).
///
/// Returns, each as little-endian bytes of n rows: `ok` (u8: 1 decoded here, 0 for
/// Python), `group` and `topic` (int32 offsets + UTF-8 data), `partition` (i32), `offset`
/// (i64), `leader_epoch` (i32, as written), `metadata` (offsets + data), `commit_ms`,
/// `expire_ms` (i64, -1 where the version has none), `version` (i16). A tombstone's value
/// fields are zero; the caller masks them with `value_valid`, and every row with `ok`.
#[pyfunction]
pub fn offset_commit_columns<'py>(
    py: Python<'py>,
    key_offsets: &[u8],
    key_data: &[u8],
    value_offsets: &[u8],
    value_data: &[u8],
    value_valid: &[u8],
) -> PyResult<Bound<'py, PyTuple>> {
    let n = value_valid.len();
    let mut ok = Vec::with_capacity(n);
    let (mut group, mut topic, mut metadata) = (Strings::new(n), Strings::new(n), Strings::new(n));
    let mut partition = Vec::with_capacity(n * 4);
    let mut offset = Vec::with_capacity(n * 8);
    let mut leader_epoch = Vec::with_capacity(n * 4);
    let mut commit_ms = Vec::with_capacity(n * 8);
    let mut expire_ms = Vec::with_capacity(n * 8);
    let mut version = Vec::with_capacity(n * 2);
    for (i, &valid) in value_valid.iter().enumerate() {
        let value_raw = if valid == 0 { Some(None) } else { slot(value_offsets, value_data, i).map(Some) };
        let marks = (group.data.len(), topic.data.len(), metadata.data.len());
        let decoded = slot(key_offsets, key_data, i)
            .zip(value_raw)
            .and_then(|(k, v)| commit(k, v))
            .and_then(|c| {
                group.push(c.group)?;
                topic.push(c.topic)?;
                if let Some(v) = &c.value {
                    metadata.push(v.metadata)?;
                }
                Some(c)
            });
        let kept = |s: &Strings, mark: usize| if decoded.is_some() { s.data.len() } else { mark };
        let (g, t, m) = (kept(&group, marks.0), kept(&topic, marks.1), kept(&metadata, marks.2));
        group.close(g).zip(topic.close(t)).zip(metadata.close(m))
            .ok_or_else(|| PyValueError::new_err("a string column of the batch passes 2 GiB"))?;
        ok.push(u8::from(decoded.is_some()));
        let (p, v) = match &decoded {
            Some(c) => (c.partition, c.value.as_ref()),
            None => (0, None),
        };
        partition.extend_from_slice(&p.to_le_bytes());
        offset.extend_from_slice(&v.map_or(0, |v| v.offset).to_le_bytes());
        leader_epoch.extend_from_slice(&v.map_or(-1, |v| v.leader_epoch).to_le_bytes());
        commit_ms.extend_from_slice(&v.map_or(-1, |v| v.commit_ms).to_le_bytes());
        expire_ms.extend_from_slice(&v.map_or(-1, |v| v.expire_ms).to_le_bytes());
        version.extend_from_slice(&v.map_or(-1, |v| v.version).to_le_bytes());
    }
    let columns: [&[u8]; 13] = [
        &ok, &group.offsets, &group.data, &topic.offsets, &topic.data, &partition, &offset, &leader_epoch,
        &metadata.offsets, &metadata.data, &commit_ms, &expire_ms, &version,
    ];
    PyTuple::new(py, columns.iter().map(|c| PyBytes::new(py, c)))
}
