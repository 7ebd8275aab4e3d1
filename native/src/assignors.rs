//! Hot cores of the partition assignors (pipelines/assignors): small pure functions over plain
//! lists, called where the Python per-element overhead dominates a call that Kafka's Java does
//! in microseconds. Python keeps the model, the validation and the fallback: every function
//! returns `None` for input it does not handle (a string that is not valid Unicode scalar
//! values, e.g. a lone surrogate), and the caller then runs the pure-Python path, which the
//! tests hold equal to this one over the assignor vectors.

use std::cmp::Ordering;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::javahash::{hash_order, java_hash};

/// `String.compareTo`: lexicographic over UTF-16 code units (differs from `str` order only
/// for characters outside the Basic Multilingual Plane).
fn java_cmp(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        return a.cmp(b);
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

/// `String.hashCode()` of every string, or None if one is not valid Unicode (lone surrogate).
#[pyfunction]
pub fn java_string_hashes(strings: Vec<Bound<'_, PyString>>) -> Option<Vec<i32>> {
    strings.iter().map(|s| s.to_str().ok().map(java_hash)).collect()
}

/// `AbstractPartitionAssignor.MemberInfo.compareTo`: static members first by instance id,
/// then the others by member id.
fn member_info_cmp(a: (&str, Option<&str>), b: (&str, Option<&str>)) -> Ordering {
    match (a.1, b.1) {
        (Some(x), Some(y)) => java_cmp(x, y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => java_cmp(a.0, b.0),
    }
}

/// One subscribed, existing topic: its name object, partition count and subscribers (member
/// indexes, in MemberInfo order once sorted).
struct TopicSubscribers<'py> {
    name: Bound<'py, PyString>,
    partitions: usize,
    members: Vec<usize>,
}

/// Server-side `RangeAssignor` (Kafka 3.9): per subscribed existing topic, in the order the
/// members (map order) list them, the subscribers sorted in MemberInfo order take contiguous
/// ranges, the first `P % C` one partition more.
///
/// `member_ids`, `instance_ids`, `member_topics`: the members in map iteration order;
/// `topics`: existing topic -> partition count. Returns `{member_id: [(topic, p), ...]}` for
/// every member (map order), or None for strings it does not handle.
#[pyfunction]
pub fn server_range_assign<'py>(
    py: Python<'py>,
    member_ids: &Bound<'py, PyList>,
    instance_ids: &Bound<'py, PyList>,
    member_topics: &Bound<'py, PyList>,
    topics: &Bound<'py, PyDict>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    // Lists are read by index (no Vec extraction: pyo3's goes through the iterator protocol,
    // which profiled as a quarter of this call).
    let member_ids: Vec<Bound<'py, PyString>> =
        member_ids.iter().map(|x| x.downcast_into::<PyString>().map_err(PyErr::from)).collect::<PyResult<_>>()?;
    let instance_ids: Vec<Option<Bound<'py, PyString>>> = instance_ids
        .iter()
        .map(|x| if x.is_none() { Ok(None) } else { x.downcast_into::<PyString>().map(Some).map_err(PyErr::from) })
        .collect::<PyResult<_>>()?;
    let member_topics: Vec<Bound<'py, PyList>> =
        member_topics.iter().map(|x| x.downcast_into::<PyList>().map_err(PyErr::from)).collect::<PyResult<_>>()?;
    let n = member_ids.len();
    if instance_ids.len() != n || member_topics.len() != n {
        return Err(pyo3::exceptions::PyValueError::new_err("member lists of different lengths"));
    }
    let mut keys: Vec<(&str, Option<&str>)> = Vec::with_capacity(n);
    for (id, inst) in member_ids.iter().zip(&instance_ids) {
        let Ok(id) = id.to_str() else { return Ok(None) };
        let inst = match inst {
            Some(s) => match s.to_str() {
                Ok(s) => Some(s),
                Err(_) => return Ok(None),
            },
            None => None,
        };
        keys.push((id, inst));
    }
    let mut ranked: Vec<usize> = (0..n).collect();
    ranked.sort_by(|&a, &b| member_info_cmp(keys[a], keys[b])); // stable, as Java's sort

    // Topics in first-met order (members in map order, each one's subscriptions). A group has a
    // handful of topics: a linear scan of the names beats hashing each one.
    let mut table: Vec<TopicSubscribers<'py>> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut topic_of: Vec<Vec<usize>> = Vec::with_capacity(n); // per member: its topics' table slots
    for subs in &member_topics {
        let mut slots = Vec::with_capacity(subs.len());
        for t in subs.iter() {
            let t = t.downcast_into::<PyString>()?;
            let Ok(name) = t.to_str() else { return Ok(None) };
            if let Some(slot) = names.iter().position(|x| x == name) {
                slots.push(slot);
                continue;
            }
            let Some(count) = topics.get_item(&t)? else { continue }; // not an existing topic
            names.push(name.to_owned());
            table.push(TopicSubscribers { name: t.clone(), partitions: count.extract()?, members: Vec::new() });
            slots.push(table.len() - 1);
        }
        topic_of.push(slots);
    }
    for &m in &ranked {
        for &slot in &topic_of[m] {
            let subscribers = &mut table[slot].members;
            if subscribers.last() != Some(&m) {
                subscribers.push(m); // a topic listed twice by one member counts once
            }
        }
    }

    let mut assigned: Vec<Vec<Bound<'py, PyTuple>>> = vec![Vec::new(); n];
    for topic in &table {
        let c = topic.members.len();
        let (base, extra) = (topic.partitions / c, topic.partitions % c);
        let mut p = 0usize;
        for (i, &m) in topic.members.iter().enumerate() {
            let end = p + base + usize::from(i < extra);
            for q in p..end {
                assigned[m].push((&topic.name, q).into_pyobject(py)?);
            }
            p = end;
        }
    }
    let out = PyDict::new(py);
    for (id, parts) in member_ids.iter().zip(assigned) {
        out.set_item(id, PyList::new(py, parts)?)?;
    }
    Ok(Some(out))
}

/// Big-endian reader over user data; every read past the end is `None`.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Option<i32> {
        self.take(4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// The well-formed case of `StickyAssignor` user data (`STICKY_ASSIGNOR_USER_DATA_V1`, or V0
/// when the generation does not fit): `([(topic, partition), ...], generation or None)`, or
/// None for anything else (null or negative lengths, truncation, invalid UTF-8), which the
/// Python path (pipelines/assignors/sticky.py `decode_sticky_user_data`) then decides.
#[pyfunction]
pub fn sticky_user_data<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Option<(Bound<'py, PyList>, Option<i32>)>> {
    let mut r = Reader { buf: data, pos: 0 };
    let Some(topics) = r.i32().and_then(|n| usize::try_from(n).ok()) else { return Ok(None) };
    let mut parts: Vec<Bound<'py, PyTuple>> = Vec::new();
    for _ in 0..topics {
        let Some(len) = r.i16().and_then(|n| usize::try_from(n).ok()) else { return Ok(None) };
        let Some(name) = r.take(len).and_then(|b| std::str::from_utf8(b).ok()) else { return Ok(None) };
        let name = PyString::new(py, name);
        let Some(count) = r.i32().and_then(|n| usize::try_from(n).ok()) else { return Ok(None) };
        if count > (data.len() - r.pos) / 4 {
            return Ok(None);
        }
        for _ in 0..count {
            let p = r.i32().expect("length checked above");
            parts.push((&name, p).into_pyobject(py)?);
        }
    }
    let generation = r.i32(); // V1; absent = V0
    Ok(Some((PyList::new(py, parts)?, generation)))
}

/// Iteration order of a Java `HashMap<String, ?>` of capacity `capacity` filled with `keys` in
/// this order (javahash.string_hashmap_order): buckets in index order, insertion order within
/// one. None if a key is not valid Unicode (lone surrogate).
#[pyfunction]
pub fn java_string_hashmap_order<'py>(
    py: Python<'py>,
    keys: Vec<Bound<'py, PyString>>,
    capacity: usize,
) -> PyResult<Option<Bound<'py, PyList>>> {
    if !capacity.is_power_of_two() {
        return Err(pyo3::exceptions::PyValueError::new_err("capacity must be a power of two"));
    }
    let mut hashes = Vec::with_capacity(keys.len());
    for k in &keys {
        let Ok(s) = k.to_str() else { return Ok(None) };
        hashes.push(java_hash(s) as u32);
    }
    Ok(Some(PyList::new(py, hash_order(&hashes, capacity).into_iter().map(|i| &keys[i]))?))
}
