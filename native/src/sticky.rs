//! The general builder of Kafka 3.9's client `AbstractStickyAssignor` (pipelines/assignors/sticky.py
//! `_General`) for groups where no rack-aware assignment applies, on plain indexes. Python keeps
//! the model, decides when it applies and keeps every exception: for any case where Java would
//! throw (or Python would fail), or input outside what this core handles (an owned partition
//! beyond its topic's partition count, a string that is not valid Unicode), this returns None and
//! the caller runs the Python builder, which answers or raises exactly.

use std::collections::{BTreeSet, HashMap};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::javahash::JavaSet;

const NONE: usize = usize::MAX;
const DEFAULT_GENERATION: i64 = -1;

struct General {
    /// Topic of each partition slot and its partition number.
    slot_topic: Vec<usize>,
    base: Vec<usize>,
    counts: Vec<usize>,
    topic_hash: Vec<i32>,
    topic_consumers: Vec<Vec<usize>>,
    consumer_topics: Vec<Vec<usize>>,
    subscribed: Vec<Vec<bool>>,
    max_size: Vec<usize>,
    /// `currentAssignment`: per consumer its partitions (None = not in the map), and the map order.
    current: Vec<Option<Vec<usize>>>,
    order: Vec<usize>,
    pc: Vec<usize>,
    /// Rank of each consumer id in `String.compareTo` order: the TreeSet key is (size, rank).
    rank: Vec<usize>,
    sorted: BTreeSet<(usize, usize, usize)>,
    revocation_required: bool,
    moves_by_partition: HashMap<usize, (usize, usize)>,
    moves_by_topic: Vec<Vec<((usize, usize), JavaSet)>>,
    balanced: Option<bool>,
}

impl General {
    fn size(&self, c: usize) -> Option<usize> {
        self.current[c].as_ref().map(Vec::len)
    }

    fn key(&self, c: usize) -> Option<(usize, usize, usize)> {
        Some((self.size(c)?, self.rank[c], c))
    }

    fn sorted_add(&mut self, c: usize) -> Option<()> {
        let k = self.key(c)?;
        self.sorted.insert(k);
        Some(())
    }

    fn sorted_remove(&mut self, c: usize) {
        if let Some(k) = self.key(c) {
            self.sorted.remove(&k);
        }
    }

    fn tp_hash(&self, slot: usize) -> u32 {
        let t = self.slot_topic[slot];
        let p = slot - self.base[t];
        31u32.wrapping_mul(31u32.wrapping_add(p as u32)).wrapping_add(self.topic_hash[t] as u32)
    }

    fn assign_owned(&mut self) -> Vec<bool> {
        let mut assigned = vec![false; self.pc.len()];
        for i in 0..self.order.len() {
            let c = self.order[i];
            let Some(lst) = self.current[c].take() else { continue };
            let mut keep = Vec::with_capacity(lst.len());
            for s in lst {
                if s == NONE {
                    continue; // a deleted topic: dropped (and not in pc)
                }
                if !self.subscribed[c][self.slot_topic[s]] {
                    self.revocation_required = true; // stays in pc, as in Java
                } else {
                    keep.push(s);
                    assigned[s] = true;
                }
            }
            self.current[c] = Some(keep);
        }
        assigned
    }

    fn least_loaded_taker(&self, t: usize) -> Option<usize> {
        self.sorted.iter().map(|k| k.2).find(|&c| self.subscribed[c][t])
    }

    fn maybe_assign(&mut self, parts: &[usize]) -> Option<()> {
        for &s in parts {
            let t = self.slot_topic[s];
            if self.topic_consumers[t].is_empty() {
                continue;
            }
            if let Some(c) = self.least_loaded_taker(t) {
                self.sorted_remove(c);
                self.current[c].as_mut()?.push(s);
                self.pc[s] = c;
                self.sorted_add(c)?;
            }
        }
        Some(())
    }

    fn can_consumer(&self, c: usize) -> Option<bool> {
        let lst = self.current[c].as_ref()?;
        Some(lst.len() < self.max_size[c] || lst.iter().any(|&s| self.topic_consumers[self.slot_topic[s]].len() >= 2))
    }

    fn compute_balanced(&self) -> Option<bool> {
        let lo = self.sorted.iter().next()?.2; // none: NoSuchElementException
        let hi = self.sorted.iter().next_back()?.2;
        if self.size(lo)? + 1 >= self.size(hi)? {
            return Some(true);
        }
        let mut largest: Vec<Option<usize>> = vec![None; self.counts.len()];
        for k in &self.sorted {
            let c = k.2;
            let count = self.size(c)?;
            if count == self.max_size[c] {
                continue;
            }
            for &t in &self.consumer_topics[c] {
                if largest[t].is_none() {
                    let mut most = 0;
                    for s in self.base[t]..self.base[t] + self.counts[t] {
                        // An unowned partition or an owner outside the balance: Java's NPE path.
                        let o = self.pc[s];
                        most = most.max(if o == NONE { return None } else { self.size(o)? });
                    }
                    largest[t] = Some(most);
                }
                if count + 1 < largest[t]? {
                    return Some(false);
                }
            }
        }
        Some(true)
    }

    fn is_balanced(&mut self) -> Option<bool> {
        if self.balanced.is_none() {
            self.balanced = Some(self.compute_balanced()?);
        }
        self.balanced
    }

    fn perform(&mut self, parts: &[usize], prev: &[(usize, i64)]) -> Option<bool> {
        let mut performed = false;
        loop {
            let mut modified = false;
            for &s in parts {
                if self.is_balanced()? {
                    break;
                }
                let consumer = self.pc[s];
                if consumer == NONE {
                    return None;
                }
                let size = self.size(consumer)?;
                let (prev_owner, _) = prev[s];
                if prev_owner != NONE {
                    let prev_size = self.size(prev_owner)?; // none: Java's NPE
                    if size > prev_size + 1 {
                        self.reassign_to(s, prev_owner)?;
                        performed = true;
                        modified = true;
                        continue;
                    }
                }
                let t = self.slot_topic[s];
                let mut least = usize::MAX;
                for &o in &self.topic_consumers[t] {
                    least = least.min(self.size(o)?);
                }
                if size > least.saturating_add(1) {
                    let new = self.least_loaded_taker(t)?; // none: AssertionError
                    self.reassign_to(s, new)?;
                    performed = true;
                    modified = true;
                }
            }
            if !modified {
                return Some(performed);
            }
        }
    }

    fn reassign_to(&mut self, s: usize, new: usize) -> Option<()> {
        let old = self.pc[s];
        let to_move = self.actual_to_move(s, old, new);
        self.process(to_move, new)
    }

    fn actual_to_move(&self, s: usize, old: usize, new: usize) -> usize {
        let by_topic = &self.moves_by_topic[self.slot_topic[s]];
        if by_topic.is_empty() {
            return s;
        }
        let old = self.moves_by_partition.get(&s).map_or(old, |rec| rec.0);
        match by_topic.iter().find(|(pair, _)| *pair == (new, old)) {
            Some((_, set)) => set.first().unwrap_or(s),
            None => s,
        }
    }

    fn process(&mut self, s: usize, new: usize) -> Option<()> {
        self.balanced = None;
        let old = self.pc[s];
        if old == NONE || self.current[old].is_none() {
            return None;
        }
        self.sorted_remove(old);
        self.sorted_remove(new);
        if let Some(existing) = self.moves_by_partition.get(&s).copied() {
            self.remove_record(s, existing);
            if existing.0 != new {
                self.add_record(s, (existing.0, new));
            }
        } else {
            self.add_record(s, (old, new));
        }
        let lst = self.current[old].as_mut()?;
        if let Some(i) = lst.iter().position(|&x| x == s) {
            lst.remove(i);
        }
        self.current[new].as_mut()?.push(s);
        self.pc[s] = new;
        self.sorted_add(new)?;
        self.sorted_add(old)
    }

    fn remove_record(&mut self, s: usize, pair: (usize, usize)) {
        self.moves_by_partition.remove(&s);
        let by_topic = &mut self.moves_by_topic[self.slot_topic[s]];
        if let Some(i) = by_topic.iter().position(|(p, _)| *p == pair) {
            by_topic[i].1.discard(s);
            if by_topic[i].1.is_empty() {
                by_topic.remove(i);
            }
        }
    }

    fn add_record(&mut self, s: usize, pair: (usize, usize)) {
        self.moves_by_partition.insert(s, pair);
        let hash = self.tp_hash(s);
        let by_topic = &mut self.moves_by_topic[self.slot_topic[s]];
        match by_topic.iter_mut().find(|(p, _)| *p == pair) {
            Some((_, set)) => set.add(s, hash),
            None => {
                let mut set = JavaSet::new();
                set.add(s, hash);
                by_topic.push((pair, set));
            }
        }
    }

    fn balance(&mut self, prev: &[(usize, i64)], unassigned: Vec<usize>, sorted_all: Vec<usize>,
               subs_order: &[usize]) -> Option<()> {
        let initializing = match self.sorted.iter().next_back() {
            Some(k) => self.size(k.2)? == 0,
            None => true,
        };
        self.maybe_assign(&unassigned)?;
        let fixed_topic: Vec<bool> = self.topic_consumers.iter().map(|cs| cs.len() < 2).collect();
        let sorted_all: Vec<usize> = sorted_all.into_iter().filter(|&s| !fixed_topic[self.slot_topic[s]]).collect();
        let unassigned: Vec<usize> = unassigned.into_iter().filter(|&s| !fixed_topic[self.slot_topic[s]]).collect();
        let mut fixed: Vec<(usize, Vec<usize>)> = Vec::new();
        for &c in subs_order {
            if !self.can_consumer(c)? {
                self.sorted_remove(c);
                fixed.push((c, self.current[c].take()?));
                self.order.retain(|&x| x != c);
            }
        }
        let pre: Vec<(usize, Vec<usize>)> =
            self.order.iter().map(|&c| Some((c, self.current[c].clone()?))).collect::<Option<_>>()?;
        let pre_pc = self.pc.clone();
        if !self.revocation_required {
            self.perform(&unassigned, prev)?;
        }
        let performed = self.perform(&sorted_all, prev)?;
        if !initializing && performed {
            let now: Vec<usize> = self.order.iter().map(|&c| self.size(c)).collect::<Option<_>>()?;
            let before: Vec<usize> = pre.iter().map(|(_, l)| l.len()).collect();
            if score(now) >= score(before) {
                for c in 0..self.current.len() {
                    self.current[c] = None;
                }
                self.order.clear();
                for (c, l) in pre {
                    self.current[c] = Some(l);
                    self.order.push(c);
                }
                self.pc = pre_pc;
            }
        }
        for (c, l) in fixed {
            self.current[c] = Some(l);
            self.order.push(c);
        }
        Some(())
    }
}

/// Balance score of an assignment: sum of |size_i - size_j| over pairs.
fn score(mut sizes: Vec<usize>) -> i64 {
    sizes.sort_unstable();
    let n = sizes.len() as i64;
    sizes.iter().enumerate().map(|(i, &s)| s as i64 * (2 * i as i64 - n + 1)).sum()
}

type Parts<'py> = Vec<(Bound<'py, PyString>, i64)>;

/// The general builder (see the module doc): consumers are given in `currentAssignment` order
/// (`owned`: their partitions), `subs_order` lists them (as indexes) in subscription-map order,
/// `subscriptions` their subscribed topics, `member_data` (partitions, generation or None) the
/// previous ownership claims, `counts` the subscribed existing topics (in order) and
/// `topic_hashes` their `String.hashCode()`. Returns `{consumer: [(topic, p), ...]}` in the
/// final map order, or None.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn sticky_general_assign<'py>(
    py: Python<'py>,
    consumer_ids: Vec<Bound<'py, PyString>>,
    owned: Vec<Parts<'py>>,
    subs_order: Vec<usize>,
    subscriptions: Vec<Vec<Bound<'py, PyString>>>,
    member_data: Vec<(Parts<'py>, Option<i64>)>,
    max_gen: i64,
    counts: Vec<(Bound<'py, PyString>, usize)>,
    topic_hashes: Vec<i32>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let n = consumer_ids.len();
    if owned.len() != n || subscriptions.len() != n || member_data.len() != n || subs_order.len() != n
        || topic_hashes.len() != counts.len() || subs_order.iter().any(|&c| c >= n)
    {
        return Err(pyo3::exceptions::PyValueError::new_err("inconsistent sticky builder input"));
    }
    let mut names: Vec<&str> = Vec::with_capacity(counts.len());
    for (t, _) in &counts {
        let Ok(s) = t.to_str() else { return Ok(None) };
        names.push(s);
    }
    let topic_index = |t: &Bound<'py, PyString>| -> Option<Option<usize>> {
        let s = t.to_str().ok()?;
        Some(names.iter().position(|&x| x == s))
    };
    let mut base = Vec::with_capacity(counts.len());
    let mut slot_topic = Vec::new();
    for (t, (_, c)) in counts.iter().enumerate() {
        base.push(slot_topic.len());
        slot_topic.extend(std::iter::repeat(t).take(*c));
    }
    let slots = slot_topic.len();
    // A partition as its slot: NONE for a topic outside `counts`, None (decline) beyond its count.
    let slot_of = |t: &Bound<'py, PyString>, p: i64| -> Option<usize> {
        match topic_index(t)? {
            None => Some(NONE),
            Some(i) => usize::try_from(p).ok().filter(|&p| p < counts[i].1).map(|p| base[i] + p),
        }
    };
    let mut rank: Vec<usize> = (0..n).collect();
    let mut keys: Vec<Vec<u16>> = Vec::with_capacity(n);
    for id in &consumer_ids {
        let Ok(s) = id.to_str() else { return Ok(None) };
        keys.push(s.encode_utf16().collect());
    }
    let mut by_key: Vec<usize> = (0..n).collect();
    by_key.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
    for (r, &c) in by_key.iter().enumerate() {
        rank[c] = r;
    }
    let topics = counts.len();
    let mut topic_consumers = vec![Vec::new(); topics];
    let mut consumer_topics = vec![Vec::new(); n];
    let mut subscribed = vec![vec![false; topics]; n];
    let mut max_size = vec![0usize; n];
    for &c in &subs_order {
        for t in &subscriptions[c] {
            let Some(found) = topic_index(t) else { return Ok(None) };
            if let Some(i) = found {
                consumer_topics[c].push(i);
                topic_consumers[i].push(c);
                subscribed[c][i] = true;
                max_size[c] += counts[i].1;
            }
        }
    }
    let mut current = Vec::with_capacity(n);
    let mut pc = vec![NONE; slots];
    for (c, lst) in owned.iter().enumerate() {
        let mut mine = Vec::with_capacity(lst.len());
        for (t, p) in lst {
            let Some(s) = slot_of(t, *p) else { return Ok(None) };
            if s != NONE {
                pc[s] = c;
            }
            mine.push(s);
        }
        current.push(Some(mine));
    }
    // prepopulateCurrentAssignments: the previous owner (highest older generation) of each partition.
    let mut prev: Vec<(usize, i64)> = vec![(NONE, i64::MIN); slots];
    for &c in &subs_order {
        let (parts, gen) = &member_data[c];
        let gen = match gen {
            Some(g) if *g < max_gen => *g,
            None if max_gen > DEFAULT_GENERATION => DEFAULT_GENERATION,
            _ => continue,
        };
        for (t, p) in parts {
            let Some(found) = topic_index(t) else { return Ok(None) };
            let Some(i) = found else { continue };
            let Some(s) = usize::try_from(*p).ok().filter(|&p| p < counts[i].1).map(|p| base[i] + p) else { continue };
            if prev[s].0 == NONE || gen > prev[s].1 {
                prev[s] = (c, gen);
            }
        }
    }
    let mut topic_order: Vec<usize> = (0..topics).collect();
    let topic_keys: Vec<Vec<u16>> = names.iter().map(|s| s.encode_utf16().collect()).collect();
    topic_order.sort_by(|&a, &b| {
        topic_consumers[a].len().cmp(&topic_consumers[b].len()).then_with(|| topic_keys[a].cmp(&topic_keys[b]))
    });
    let sorted_all: Vec<usize> = topic_order.iter().flat_map(|&t| base[t]..base[t] + counts[t].1).collect();
    let mut g = General {
        slot_topic,
        base,
        counts: counts.iter().map(|(_, c)| *c).collect(),
        topic_hash: topic_hashes,
        topic_consumers,
        consumer_topics,
        subscribed,
        max_size,
        current,
        order: (0..n).collect(),
        pc,
        rank,
        sorted: BTreeSet::new(),
        revocation_required: false,
        moves_by_partition: HashMap::new(),
        moves_by_topic: (0..topics).map(|_| Vec::new()).collect(),
        balanced: None,
    };
    // The owned lists of deleted topics drop out of pc too (they were never put in).
    let assigned = g.assign_owned();
    let unassigned: Vec<usize> = sorted_all.iter().copied().filter(|&s| !assigned[s]).collect();
    for c in 0..n {
        if g.sorted_add(c).is_none() {
            return Ok(None);
        }
    }
    if g.balance(&prev, unassigned, sorted_all, &subs_order).is_none() {
        return Ok(None);
    }
    let out = PyDict::new(py);
    for &c in &g.order {
        let Some(lst) = &g.current[c] else { return Ok(None) };
        let mut tuples = Vec::with_capacity(lst.len());
        for &s in lst {
            let t = g.slot_topic[s];
            tuples.push((&counts[t].0, s - g.base[t]).into_pyobject(py)?);
        }
        out.set_item(&consumer_ids[c], PyList::new(py, tuples)?)?;
    }
    Ok(Some(out))
}
