//! Kafka 3.9's server-side `UniformAssignor` (pipelines/assignors/uniform.py `assign_uniform_39`),
//! both builders, on plain indexes. Python keeps the model and the exceptions: for every case
//! where 3.9 throws (or the input is outside what this core handles: a previous-target
//! partition that does not exist, claimed twice, a string that is not valid Unicode), this
//! returns None and the caller runs the Python path, which raises or answers exactly.

use std::cmp::Ordering;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::javahash::{capacity_after_inserts, hash_order, hashset_copy_capacity, JavaSet};

const NONE: usize = usize::MAX;

/// `TopicIdPartition.hashCode()` = 31 * (31 + topicId.hashCode()) + partition, as int32.
fn tip_hash(topic_hash: i32, p: usize) -> u32 {
    31u32.wrapping_mul(31u32.wrapping_add(topic_hash as u32)).wrapping_add(p as u32)
}

/// The problem on indexes: topics are the subscribed existing ones, in first-seen order.
struct Problem<'a> {
    ids: Vec<&'a str>,
    topic_names: Vec<Bound<'a, PyString>>,
    counts: Vec<usize>,
    topic_hash: Vec<i32>,
    /// Per member: its subscribed topics (indexes), in iteration order.
    subs: Vec<Vec<usize>>,
    /// Per member: previous target runs (topic index or NONE for an unsubscribed topic, partitions).
    targets: Vec<Vec<(usize, Vec<i64>)>>,
    /// First partition slot of each topic: slot = base + partition.
    base: Vec<usize>,
}

impl<'a> Problem<'a> {
    fn slot(&self, t: usize, p: usize) -> usize {
        self.base[t] + p
    }
}

/// Interns topic names: index of `name`, adding it (with its count and hash) when it exists.
struct Topics<'a, 'py> {
    names: Vec<&'a str>,
    objs: Vec<Bound<'py, PyString>>,
    counts: Vec<usize>,
    hashes: Vec<i32>,
    existing: &'a Bound<'py, PyDict>,
    topic_hashes: &'a Bound<'py, PyDict>,
}

impl<'a, 'py> Topics<'a, 'py> {
    /// Some(index) for an existing topic, Some(NONE) for an unknown one, None on bad input.
    fn index(&mut self, t: &'a Bound<'py, PyString>) -> PyResult<Option<usize>> {
        let Ok(name) = t.to_str() else { return Ok(None) };
        if let Some(i) = self.names.iter().position(|&x| x == name) {
            return Ok(Some(i));
        }
        let Some(count) = self.existing.get_item(t)? else { return Ok(Some(NONE)) };
        let Some(hash) = self.topic_hashes.get_item(t)? else { return Ok(None) };
        self.names.push(name);
        self.objs.push(t.clone());
        self.counts.push(count.extract()?);
        self.hashes.push(hash.extract()?);
        Ok(Some(self.names.len() - 1))
    }
}

/// Server-side `UniformAssignor` of Kafka 3.9 (see the module doc).
///
/// `member_ids`: members in `GroupSpec.memberIds()` order; `subscriptions`: each member's
/// subscribed topic ids (as names) in iteration order (only the first member's is read for a
/// homogeneous group, so it may be the only one given); `targets`: each member's previous target
/// `[(topic, [p, ...]), ...]` as fed; `counts`: existing topic -> partitions; `topic_hashes`:
/// topic -> `Uuid.hashCode()`. Returns `{member_id: [(topic, p), ...]}` or None.
#[pyfunction]
pub fn uniform_assign<'py>(
    py: Python<'py>,
    member_ids: Vec<Bound<'py, PyString>>,
    subscriptions: Vec<Vec<Bound<'py, PyString>>>,
    targets: Vec<Vec<(Bound<'py, PyString>, Vec<i64>)>>,
    counts: Bound<'py, PyDict>,
    topic_hashes: Bound<'py, PyDict>,
    homogeneous: bool,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let n = member_ids.len();
    if targets.len() != n || subscriptions.is_empty() || (!homogeneous && subscriptions.len() != n) {
        return Err(pyo3::exceptions::PyValueError::new_err("member lists of different lengths"));
    }
    let mut ids = Vec::with_capacity(n);
    for id in &member_ids {
        let Ok(s) = id.to_str() else { return Ok(None) };
        ids.push(s);
    }
    let mut topics = Topics {
        names: Vec::new(),
        objs: Vec::new(),
        counts: Vec::new(),
        hashes: Vec::new(),
        existing: &counts,
        topic_hashes: &topic_hashes,
    };
    let mut subs = Vec::with_capacity(subscriptions.len());
    for list in &subscriptions {
        let mut mine = Vec::with_capacity(list.len());
        for t in list {
            match topics.index(t)? {
                None => return Ok(None),
                Some(NONE) => {} // not an existing topic: the TopicIds view skips it
                Some(i) => mine.push(i),
            }
        }
        subs.push(mine);
    }
    let subscribed_topics = topics.names.len();
    let mut runs = Vec::with_capacity(n);
    for member in &targets {
        let mut mine = Vec::with_capacity(member.len());
        for (t, parts) in member {
            let Ok(name) = t.to_str() else { return Ok(None) };
            // Only subscribed topics matter; others are kept as NONE (skipped by both builders).
            let i = topics.names[..subscribed_topics].iter().position(|&x| x == name).unwrap_or(NONE);
            mine.push((i, parts.clone()));
        }
        runs.push(mine);
    }
    let mut base = Vec::with_capacity(subscribed_topics);
    let mut total = 0usize;
    for &c in &topics.counts {
        base.push(total);
        total += c;
    }
    let problem = Problem {
        ids,
        topic_names: topics.objs,
        counts: topics.counts,
        topic_hash: topics.hashes,
        subs,
        targets: runs,
        base,
    };
    let assignment = if homogeneous { homogeneous_39(&problem) } else { Hetero::new(&problem).build() };
    let Some(assignment) = assignment else { return Ok(None) };
    let out = PyDict::new(py);
    for (m, parts) in assignment {
        let mut tuples = Vec::with_capacity(parts.len());
        for (t, p) in parts {
            tuples.push((&problem.topic_names[t], p).into_pyobject(py)?);
        }
        out.set_item(&member_ids[m], PyList::new(py, tuples)?)?;
    }
    Ok(Some(out))
}

type Assignment = Vec<(usize, Vec<(usize, usize)>)>;

/// A target partition of a subscribed topic, as a checked index (None: not a partition).
fn partition(problem: &Problem, t: usize, p: i64) -> Option<usize> {
    let p = usize::try_from(p).ok()?;
    (p < problem.counts[t]).then_some(p)
}

/// `UniformHomogeneousAssignmentBuilder` (3.9): extra partitions to the first members.
fn homogeneous_39(problem: &Problem) -> Option<Assignment> {
    let n = problem.ids.len();
    let first = &problem.subs[0];
    let hashes: Vec<u32> = first.iter().map(|&t| problem.topic_hash[t] as u32).collect();
    let subscribed: Vec<usize> =
        hash_order(&hashes, hashset_copy_capacity(first.len())).into_iter().map(|i| first[i]).collect();
    if subscribed.is_empty() {
        return Some(Vec::new());
    }
    let mut is_subscribed = vec![false; problem.counts.len()];
    for &t in &subscribed {
        is_subscribed[t] = true;
    }
    // GroupSpec.isPartitionAssigned: in some member's previous target.
    let slots = problem.base.last().map_or(0, |&b| b + problem.counts[problem.counts.len() - 1]);
    let mut assigned = vec![false; slots];
    for member in &problem.targets {
        for (t, parts) in member {
            if *t == NONE {
                continue;
            }
            for &p in parts {
                if let Some(p) = partition(problem, *t, p) {
                    assigned[problem.slot(*t, p)] = true;
                }
            }
        }
    }
    let mut unassigned: Vec<(usize, usize)> = Vec::new();
    let mut total = 0usize;
    for &t in &subscribed {
        for p in 0..problem.counts[t] {
            if !assigned[problem.slot(t, p)] {
                unassigned.push((t, p));
            }
        }
        total += problem.counts[t];
    }
    let (min_quota, mut extra) = (total / n, total % n);
    let mut out: Assignment = Vec::with_capacity(n);
    let mut unfilled: Vec<(usize, usize)> = Vec::new();
    for m in 0..n {
        let mut quota = min_quota;
        if extra > 0 {
            quota += 1;
            extra -= 1;
        }
        let mut kept = Vec::new();
        for (t, parts) in &problem.targets[m] {
            if *t == NONE || !is_subscribed[*t] {
                continue;
            }
            for (i, &p) in parts.iter().enumerate() {
                let p = partition(problem, *t, p)?;
                if i < quota {
                    kept.push((*t, p));
                } else {
                    unassigned.push((*t, p));
                }
            }
            quota -= parts.len().min(quota);
        }
        out.push((m, kept));
        if quota > 0 {
            unfilled.push((m, quota));
        }
    }
    let mut next = 0usize;
    for (m, q) in unfilled {
        let take = q.min(unassigned.len() - next);
        out[m].1.extend_from_slice(&unassigned[next..next + take]);
        next += take;
    }
    (next == unassigned.len()).then_some(out) // else 3.9 throws: the Python path raises it
}

/// `UniformHeterogeneousAssignmentBuilder` as shipped in 3.9.0 (uniform.py `_Hetero39`).
struct Hetero<'a> {
    p: &'a Problem<'a>,
    members_per_topic: Vec<Vec<usize>>,
    in_target: Vec<bool>,
    subscribed: Vec<usize>,
    sub_sets: Vec<Vec<bool>>,
    /// All partitions in `_sort_partitions(HashSet order)`; later iterations filter it.
    all_sorted: Vec<(usize, usize)>,
    unassigned: Vec<bool>,
    unassigned_len: usize,
    size: Vec<usize>,
    max_size: Vec<usize>,
    /// Per member: topic -> partitions, both in insertion order (Python dicts).
    target: Vec<Vec<(usize, Vec<usize>)>>,
    owner: Vec<usize>,
    sorted_members: Vec<bool>,
    moves_by_partition: Vec<Option<(usize, usize)>>,
    /// Per topic: (from, to) -> partitions moved that way.
    moves_by_topic: Vec<Vec<((usize, usize), JavaSet)>>,
}

impl<'a> Hetero<'a> {
    fn new(p: &'a Problem<'a>) -> Self {
        let n = p.ids.len();
        let topics = p.counts.len();
        let mut members_per_topic = vec![Vec::new(); topics];
        let mut in_target = vec![false; n];
        let mut first_seen = Vec::new();
        let mut sub_sets = vec![vec![false; topics]; n];
        let mut max_size = vec![0usize; n];
        for m in 0..n {
            in_target[m] = !p.subs[m].is_empty();
            for &t in &p.subs[m] {
                if members_per_topic[t].is_empty() {
                    first_seen.push(t);
                }
                members_per_topic[t].push(m);
                sub_sets[m][t] = true;
                max_size[m] += p.counts[t];
            }
        }
        // HashSet<Uuid> of subscribed topic ids, grown from the default capacity.
        let hashes: Vec<u32> = first_seen.iter().map(|&t| p.topic_hash[t] as u32).collect();
        let subscribed: Vec<usize> = hash_order(&hashes, capacity_after_inserts(16, first_seen.len()))
            .into_iter()
            .map(|i| first_seen[i])
            .collect();
        let all: Vec<(usize, usize)> =
            subscribed.iter().flat_map(|&t| (0..p.counts[t]).map(move |q| (t, q))).collect();
        let all_hashes: Vec<u32> = all.iter().map(|&(t, q)| tip_hash(p.topic_hash[t], q)).collect();
        let mut all_sorted: Vec<(usize, usize)> =
            hash_order(&all_hashes, capacity_after_inserts(16, all.len())).into_iter().map(|i| all[i]).collect();
        // _sort_partitions: by -(partitions / members) of the topic, members of the topic, partition (stable).
        let key = |&(t, q): &(usize, usize)| {
            let members = members_per_topic[t].len();
            (-(p.counts[t] as f64 / members as f64), members, q)
        };
        all_sorted.sort_by(|a, b| {
            let (ka, kb) = (key(a), key(b));
            ka.0.partial_cmp(&kb.0).unwrap_or(Ordering::Equal).then(ka.1.cmp(&kb.1)).then(ka.2.cmp(&kb.2))
        });
        let slots = p.base.last().map_or(0, |&b| b + p.counts[topics - 1]);
        let mut unassigned = vec![false; slots];
        for &(t, q) in &all {
            unassigned[p.slot(t, q)] = true;
        }
        Hetero {
            p,
            members_per_topic,
            in_target,
            sorted_members: (0..n).map(|m| max_size[m] > 0).collect(),
            subscribed,
            sub_sets,
            all_sorted,
            unassigned_len: all.len(),
            unassigned,
            size: vec![0; n],
            max_size,
            target: vec![Vec::new(); n],
            owner: vec![NONE; slots],
            moves_by_partition: vec![None; slots],
            moves_by_topic: vec![Vec::new(); topics],
        }
    }

    fn slot(&self, (t, q): (usize, usize)) -> usize {
        self.p.slot(t, q)
    }

    fn discard_unassigned(&mut self, s: usize) {
        if self.unassigned[s] {
            self.unassigned[s] = false;
            self.unassigned_len -= 1;
        }
    }

    fn unassigned_sorted(&self) -> Vec<(usize, usize)> {
        self.all_sorted.iter().copied().filter(|&tp| self.unassigned[self.slot(tp)]).collect()
    }

    /// Least (size, member id) among `candidates`.
    fn first_sorted(&self, candidates: impl Iterator<Item = usize>) -> Option<usize> {
        candidates.min_by(|&a, &b| self.size[a].cmp(&self.size[b]).then_with(|| self.p.ids[a].cmp(self.p.ids[b])))
    }

    fn sorted_update(&mut self, m: usize) {
        self.sorted_members[m] = self.size[m] < self.max_size[m];
    }

    fn add(&mut self, (t, q): (usize, usize), m: usize) {
        match self.target[m].iter_mut().find(|(x, _)| *x == t) {
            Some((_, parts)) => {
                if !parts.contains(&q) {
                    parts.push(q);
                }
            }
            None => self.target[m].push((t, vec![q])),
        }
        let s = self.slot((t, q));
        self.owner[s] = m;
        self.size[m] += 1;
        self.sorted_update(m);
        self.discard_unassigned(s);
    }

    fn remove(&mut self, (t, q): (usize, usize), m: usize) {
        if let Some(i) = self.target[m].iter().position(|(x, _)| *x == t) {
            let parts = &mut self.target[m][i].1;
            if let Some(j) = parts.iter().position(|&x| x == q) {
                parts.remove(j);
            }
            if parts.is_empty() {
                self.target[m].remove(i);
            }
        }
        let s = self.slot((t, q));
        if self.owner[s] == m {
            self.owner[s] = NONE;
        }
        self.size[m] = self.size[m].saturating_sub(1);
        self.sorted_update(m);
    }

    fn build(mut self) -> Option<Assignment> {
        if self.subscribed.is_empty() {
            return Some(Vec::new());
        }
        let p = self.p;
        for m in 0..p.ids.len() {
            // assignStickyPartitions
            for (t, parts) in &p.targets[m] {
                if *t == NONE || !self.sub_sets[m][*t] {
                    continue;
                }
                for &q in parts {
                    let q = partition(p, *t, q)?;
                    if self.owner[self.slot((*t, q))] != NONE {
                        return None; // claimed twice: left to the Python path
                    }
                    self.add((*t, q), m);
                }
            }
        }
        for tp in self.unassigned_sorted() {
            // unassignedPartitionsAssignment
            let cands: Vec<usize> =
                self.members_per_topic[tp.0].iter().copied().filter(|&m| self.size[m] < self.max_size[m]).collect();
            if let Some(m) = self.first_sorted(cands.into_iter()) {
                self.add(tp, m);
            }
        }
        self.balance()?;
        Some(
            (0..p.ids.len())
                .filter(|&m| self.in_target[m])
                .map(|m| (m, self.target[m].iter().flat_map(|(t, ps)| ps.iter().map(move |&q| (*t, q))).collect()))
                .collect(),
        )
    }

    fn balance(&mut self) -> Option<()> {
        if self.unassigned_len > 0 {
            return None; // "Some partitions were left unassigned"
        }
        let p = self.p;
        for &t in &self.subscribed {
            let keep = self.members_per_topic[t].len() >= 2;
            for q in 0..p.counts[t] {
                self.unassigned[p.slot(t, q)] = keep;
            }
            if keep {
                self.unassigned_len += p.counts[t];
            }
        }
        for m in 0..p.ids.len() {
            let can = self.size[m] < self.max_size[m]
                || self.target[m].iter().any(|(t, _)| self.members_per_topic[*t].len() >= 2);
            if !can {
                self.sorted_members[m] = false;
            }
        }
        if self.unassigned_len > 0 {
            self.perform_reassignments()?;
        }
        Some(())
    }

    fn is_balanced(&self) -> Option<bool> {
        let members: Vec<usize> = (0..self.p.ids.len()).filter(|&m| self.sorted_members[m]).collect();
        let lo = members.iter().map(|&m| self.size[m]).min()?; // none: NoSuchElementException
        let hi = members.iter().map(|&m| self.size[m]).max()?;
        if lo + 1 >= hi {
            return Some(true);
        }
        let mut largest: Vec<Option<usize>> = vec![None; self.p.counts.len()];
        for &m in &members {
            let count = self.size[m];
            if count == self.max_size[m] {
                continue;
            }
            for &t in &self.p.subs[m] {
                let most = *largest[t].get_or_insert_with(|| {
                    (0..self.p.counts[t])
                        .map(|q| self.owner[self.p.slot(t, q)])
                        .map(|o| if o == NONE { 0 } else { self.size[o] })
                        .max()
                        .unwrap_or(0)
                });
                if count + 1 < most {
                    return Some(false);
                }
            }
        }
        Some(true)
    }

    fn perform_reassignments(&mut self) -> Option<()> {
        loop {
            let mut modified = false;
            let mut occurred = false;
            for tp in self.unassigned_sorted() {
                if occurred && self.is_balanced()? {
                    return Some(());
                }
                occurred = false;
                let members = &self.members_per_topic[tp.0];
                if members.len() <= 1 {
                    return None;
                }
                let owner = self.owner[self.slot(tp)];
                if owner == NONE {
                    return None;
                }
                let least = members.iter().map(|&m| self.size[m]).min()?;
                if self.size[owner] > least + 1 {
                    self.reassign(tp)?;
                    modified = true;
                    occurred = true;
                }
            }
            if !modified {
                return Some(());
            }
        }
    }

    fn reassign(&mut self, tp: (usize, usize)) -> Option<()> {
        let t = tp.0;
        let candidates = (0..self.p.ids.len()).filter(|&m| self.sorted_members[m] && self.sub_sets[m][t]);
        let new_owner = self.first_sorted(candidates)?; // none: "No suitable new owner"
        let old = self.owner[self.slot(tp)];
        let to_move = self.actual_partition_to_move(tp, old, new_owner)?;
        let old_member = self.owner[self.slot(to_move)];
        if old_member == NONE {
            return None;
        }
        self.record_move(to_move, old_member, new_owner)?;
        self.remove(to_move, old_member);
        self.add(to_move, new_owner);
        Some(())
    }

    fn actual_partition_to_move(&self, tp: (usize, usize), old: usize, new: usize) -> Option<(usize, usize)> {
        let by_topic = &self.moves_by_topic[tp.0];
        if by_topic.is_empty() {
            return Some(tp);
        }
        let mut old = old;
        if let Some((from, to)) = self.moves_by_partition[self.slot(tp)] {
            if old != to {
                return None; // "Old owner does not match expected value"
            }
            old = from;
        }
        match by_topic.iter().find(|(pair, _)| *pair == (new, old)) {
            None => Some(tp),
            Some((_, set)) => set.first().map(|s| (tp.0, s - self.p.base[tp.0])),
        }
    }

    fn record_move(&mut self, tp: (usize, usize), old: usize, new: usize) -> Option<()> {
        let s = self.slot(tp);
        if let Some(existing) = self.moves_by_partition[s] {
            self.remove_record(tp, existing);
            if existing.1 == old {
                return None; // 3.9.0: "Mismatch in partition movement record" on any second move
            }
            if existing.0 != new {
                self.add_record(tp, (existing.0, new));
            }
        } else {
            self.add_record(tp, (old, new));
        }
        Some(())
    }

    fn remove_record(&mut self, tp: (usize, usize), pair: (usize, usize)) {
        let s = self.slot(tp);
        self.moves_by_partition[s] = None;
        let by_topic = &mut self.moves_by_topic[tp.0];
        if let Some(i) = by_topic.iter().position(|(x, _)| *x == pair) {
            by_topic[i].1.discard(s);
            if by_topic[i].1.is_empty() {
                by_topic.remove(i);
            }
        }
    }

    fn add_record(&mut self, tp: (usize, usize), pair: (usize, usize)) {
        let s = self.slot(tp);
        self.moves_by_partition[s] = Some(pair);
        let hash = tip_hash(self.p.topic_hash[tp.0], tp.1);
        let by_topic = &mut self.moves_by_topic[tp.0];
        match by_topic.iter_mut().find(|(x, _)| *x == pair) {
            Some((_, set)) => set.add(s, hash),
            None => {
                let mut set = JavaSet::new();
                set.add(s, hash);
                by_topic.push((pair, set));
            }
        }
    }
}
