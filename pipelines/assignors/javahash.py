"""Bit-exact emulation of the Java hashing and hash-table iteration order the assignors depend on.

Kafka's assignors iterate `java.util.HashMap`/`HashSet`s in several places where the order decides
the result (who keeps the extra partition, which partition a move picks). Java's iteration order is a
pure function of the keys' `hashCode()`, the table capacity and insertion history:

* bucket = `(h ^ (h >>> 16)) & (capacity - 1)`; iteration walks buckets in index order and, inside
  a bucket, entries in insertion order (resizes split buckets but keep that relative order);
* capacity starts at 16 (`new HashMap<>()`), `tableSizeFor(n)` for `new HashMap<>(n)`,
  `tableSizeFor(max(size/.75f + 1, 16))` for `new HashSet<>(collection)`, and doubles whenever the size
  exceeds 0.75 * capacity. Removals never shrink it.

Red-black tree bins (8+ colliding keys in a table of 64+) are not emulated; the key counts Kafka
assignors see make them practically unreachable.
"""
from __future__ import annotations

import base64
from operator import mul
from typing import Callable, Hashable, Iterable, Sequence

from . import native

_MASK = 0xFFFFFFFF


def to_int32(v: int) -> int:
    """Java int overflow: the low 32 bits of `v` as a signed int."""
    v &= _MASK
    return v - 0x100000000 if v & 0x80000000 else v


_to_int32 = to_int32

# 31**k mod 2**32 for k = _POW_LEN-1 ... 0: the tail of length n weights the n code units of a string.
_POW_LEN = 256
_POWS_DESC = [pow(31, _POW_LEN - 1 - i, 1 << 32) for i in range(_POW_LEN)]


def string_hash(s: str) -> int:
    """`java.lang.String.hashCode()` over UTF-16 code units, as a signed int32.

    `s[0]*31^(n-1) + ... + s[n-1]` mod 2^32 as one C-level `sum(map(mul, ...))` instead of a Python
    loop per character (member ids are ~50 characters and hashed on every sticky call)."""
    if s.isascii():
        units: Sequence[int] = s.encode("ascii")
    else:
        data = s.encode("utf-16-be", "surrogatepass")
        units = [(data[i] << 8) | data[i + 1] for i in range(0, len(data), 2)]
    n = len(units)
    if n > _POW_LEN:
        h = 0
        for ch in units:
            h = (31 * h + ch) & _MASK
        return _to_int32(h)
    return _to_int32(sum(map(mul, units, _POWS_DESC[_POW_LEN - n:])))


def coordinator_partition(group_id: str, offsets_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: ``Utils.abs(groupId.hashCode()) % n``.

    Kafka's ``Utils.abs`` is Math.abs except that Integer.MIN_VALUE maps to 0 (Math.abs would
    leave it negative)."""
    h = string_hash(group_id)
    return (0 if h == -2**31 else abs(h)) % offsets_partitions


def uuid_hash(msb: int, lsb: int) -> int:
    """`org.apache.kafka.common.Uuid.hashCode()`: fold of `msb ^ lsb`."""
    x = (msb ^ lsb) & 0xFFFFFFFFFFFFFFFF
    return _to_int32((x >> 32) ^ (x & _MASK))


def uuid_from_string(s: str) -> tuple[int, int]:
    """Parse `Uuid.toString()` (base64url, no padding) into signed (msb, lsb)."""
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid (16 bytes base64url expected): {s!r}")
    return (int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True))


def topic_partition_hash(topic: str, partition: int) -> int:
    """`org.apache.kafka.common.TopicPartition.hashCode()`."""
    return _to_int32(31 * (31 + partition) + string_hash(topic))


def topic_id_partition_hash(topic_uuid_hash: int, partition: int) -> int:
    """`org.apache.kafka.server.common.TopicIdPartition.hashCode()` = `Objects.hash(topicId, partitionId)`."""
    return _to_int32(31 * (31 + topic_uuid_hash) + partition)


def spread(h: int) -> int:
    h &= _MASK
    return h ^ (h >> 16)


def table_size_for(n: int) -> int:
    cap = 1
    while cap < n:
        cap <<= 1
    return cap


def capacity_after_inserts(initial: int, max_size: int) -> int:
    """Table capacity once `max_size` entries were present at some point (resize when size > 0.75 cap)."""
    cap = initial
    while max_size > (cap * 3) // 4:
        cap <<= 1
    return cap


def hashset_copy_capacity(size: int) -> int:
    """Capacity of `new HashSet<>(collection)` for a collection of `size` elements."""
    return table_size_for(max(int(size / 0.75) + 1, 16))


def hash_order(keys: Sequence, hashes: Sequence[int], capacity: int) -> list:
    """Iteration order of a Java hash table holding `keys` (given in insertion order)."""
    mask = capacity - 1
    buckets = [(h ^ (h >> 16)) & mask for h in map(_MASK.__and__, hashes)]
    idx = sorted(range(len(keys)), key=buckets.__getitem__)  # stable: insertion order within a bucket
    return [keys[i] for i in idx]


def string_hashes(keys: Sequence[str]) -> list[int]:
    """`String.hashCode()` of each key: the compiled core when built (one call for all keys; ~50-char
    member ids cost ~3 µs each in Python, a fifth of a sticky assign()), else `string_hash`."""
    core = native.java_string_hashes
    if core is not None:
        hashes = core(list(keys))
        if hashes is not None:
            return hashes
    return [string_hash(k) for k in keys]


def string_hashmap_order(keys: Sequence[str], initial_capacity: int = 16) -> list[str]:
    """Iteration order of a `HashMap<String, ?>` filled with `keys` in this order."""
    cap = capacity_after_inserts(initial_capacity, len(keys))
    core = native.java_string_hashmap_order
    if core is not None:
        ordered = core(list(keys), cap)
        if ordered is not None:
            return ordered
    return hash_order(keys, string_hashes(keys), cap)


class JavaHashSet:
    """A hash set that knows its Java iteration order (insertion history + capacity).

    Python dicts keep insertion order and move a re-added key to the end, which is exactly the
    order of entries inside one Java bucket; the bucket index is recomputed from the capacity.
    """

    __slots__ = ("_items", "_cap", "_hashf")

    def __init__(self, hashf: Callable[[Hashable], int], items: Iterable = (), capacity: int = 16):
        self._hashf = hashf
        self._items: dict = {}
        self._cap = capacity
        for it in items:
            self.add(it)

    def add(self, item) -> None:
        if item in self._items:
            return
        self._items[item] = spread(self._hashf(item))
        if len(self._items) > (self._cap * 3) // 4:
            self._cap = capacity_after_inserts(self._cap, len(self._items))

    def add_all(self, items: Sequence, hashes: Iterable[int]) -> None:
        """`add` of each item whose `hashCode()` the caller computed in bulk (no call per item).
        `dict.update` leaves a present item where it is, as `add` does."""
        self._items.update(zip(items, [h ^ (h >> 16) for h in map(_MASK.__and__, hashes)]))
        if len(self._items) > (self._cap * 3) // 4:
            self._cap = capacity_after_inserts(self._cap, len(self._items))

    def discard(self, item) -> None:
        self._items.pop(item, None)

    def present(self, items: Iterable) -> list:
        """The given items that are in the set, in the given order (C-level membership tests)."""
        return list(filter(self._items.__contains__, items))

    def __contains__(self, item) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def ordered(self) -> list:
        mask = self._cap - 1
        items = self._items
        return sorted(items, key=lambda k: items[k] & mask)  # stable: insertion order inside a bucket

    def first(self):
        mask = self._cap - 1
        best = None
        best_b = None
        for k, h in self._items.items():
            b = h & mask
            if best_b is None or b < best_b:
                best, best_b = k, b
        return best


def java_str_key(s: str) -> str:
    """Sort key giving Java `String.compareTo` order (UTF-16 code units) for any string."""
    if s.isascii() or all(ord(c) <= 0xFFFF for c in s):
        return s
    data = s.encode("utf-16-be", "surrogatepass")
    return "".join(chr((data[i] << 8) | data[i + 1]) for i in range(0, len(data), 2))
