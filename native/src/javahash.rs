//! Java's hash tables as far as Kafka's assignors' results depend on them (iteration order of
//! `HashMap`/`HashSet` and `String.hashCode()`), shared by the assignors' cores; the Python side
//! is pipelines/assignors/javahash.py.

/// `java.lang.String.hashCode()`: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, int32.
pub fn java_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

/// Java's `HashMap` bucket spreading of a hash code.
pub fn spread(h: u32) -> u32 {
    h ^ (h >> 16)
}

/// Capacity once `n` entries were added to a default table (16, doubling past 3/4 full).
pub fn capacity_after_inserts(mut cap: usize, n: usize) -> usize {
    while n > cap * 3 / 4 {
        cap <<= 1;
    }
    cap
}

/// Capacity of `new HashSet<>(collection)` of `n` elements (javahash.hashset_copy_capacity).
pub fn hashset_copy_capacity(n: usize) -> usize {
    let want = ((n as f64 / 0.75) as usize + 1).max(16);
    want.next_power_of_two()
}

/// Iteration order of a Java hash table holding `hashes` (insertion order), capacity `cap`:
/// buckets in index order, insertion order within one.
pub fn hash_order(hashes: &[u32], cap: usize) -> Vec<usize> {
    let mask = (cap - 1) as u32;
    let mut idx: Vec<usize> = (0..hashes.len()).collect();
    idx.sort_by_key(|&i| spread(hashes[i]) & mask); // stable: insertion order within a bucket
    idx
}

/// A Java `HashSet` of partition slots that knows its iteration order (javahash.JavaHashSet).
#[derive(Clone)]
pub struct JavaSet {
    items: Vec<(usize, u32)>, // (slot, spread hash) in insertion order
    cap: usize,
}

impl JavaSet {
    pub fn new() -> Self {
        JavaSet { items: Vec::new(), cap: 16 }
    }

    pub fn add(&mut self, slot: usize, hash: u32) {
        if self.items.iter().any(|&(s, _)| s == slot) {
            return;
        }
        self.items.push((slot, spread(hash)));
        self.cap = capacity_after_inserts(self.cap, self.items.len());
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn discard(&mut self, slot: usize) {
        if let Some(i) = self.items.iter().position(|&(s, _)| s == slot) {
            self.items.remove(i);
        }
    }

    /// The first element in iteration order.
    pub fn first(&self) -> Option<usize> {
        let mask = (self.cap - 1) as u32;
        let mut best: Option<(u32, usize)> = None;
        for &(s, h) in &self.items {
            let b = h & mask;
            if best.map_or(true, |(bb, _)| b < bb) {
                best = Some((b, s));
            }
        }
        best.map(|(_, s)| s)
    }
}
