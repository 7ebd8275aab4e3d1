"""Which framed batches hold believable offsets.

A batch's BaseOffset lies outside its checksum, so a flipped bit there goes unnoticed by
the CRC (an offset near 2^48 in a segment of a few thousand). A batch is accepted when:
* its offsets fit in int64 and in its segment: no lower than the base offset in the file
  name, and at most 2^31-1 past it (Kafka rolls a segment before an offset relative to its
  base overflows an int32, and the cleaner groups segments under the same rule);
* its offsets come after those of the last batch accepted in the file (a batch repeating
  them is reported as a duplicate);
* it belongs to the longest run of batches in increasing offset order among itself and
  the next LOOKAHEAD frames: a base offset shifted up runs past the batches after it, and
  copies of later batches met early are outnumbered by the originals. On a tie the batch
  read first keeps its offsets and the other one is reported (when two checksummed
  batches claim the same offsets, nothing tells which base offset is the damaged one),
  except that a batch found right after damaged bytes loses ties: its BaseOffset is the
  first field after the damage, and damage often runs into it.
Intact segments never meet the last rule: their batches are in strictly increasing offset
order, which is checked once per batch as it is read. What stays undetectable: a base
offset moved within its segment's window without crossing a neighbour's offsets.
"""
from __future__ import annotations

from collections import deque
from typing import Iterable, Iterator

from .framing import Damaged, Frame

INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1
LOOKAHEAD = 16  # frames read past the one judged

Verdict = tuple["Frame | Damaged", "str | None", "int | None", "int | None"]


def judge(frames: Iterable[Frame | Damaged], segment_base: int | None) -> Iterator[Verdict]:
    """(frame, problem, first, last) for every frame in file order. `problem` is None for
    an accepted batch, whose `first` is then the lowest offset its records may have;
    otherwise `first`/`last` are the offsets the frame covers (None where unknown)."""
    frames = iter(frames)
    ahead: deque[Frame | Damaged] = deque()  # the next LOOKAHEAD frames after the one judged
    disorder: deque[Frame] = deque()  # batches in `ahead` not after the batch read before them
    hi = INT64_MAX if segment_base is None else min(INT64_MAX, segment_base + INT32_MAX)
    floor = -1 if segment_base is None else segment_base - 1  # last offset accepted so far
    prev: Frame | None = None  # last batch accepted
    last_read: Frame | None = None  # last batch read from the framing
    after_damage = False  # whether the frame before the one judged held damaged bytes

    def read_ahead() -> None:
        nonlocal last_read
        while len(ahead) <= LOOKAHEAD:
            f = next(frames, None)
            if f is None:
                return
            if isinstance(f, Frame):
                if f.last > hi or (last_read is not None and f.base <= last_read.last):
                    disorder.append(f)
                last_read = f
            ahead.append(f)

    def candidates() -> list[Frame]:
        """The batches ahead that could follow the last one accepted."""
        return [f for f in ahead if isinstance(f, Frame) and floor < f.base and f.last <= hi]

    while True:
        read_ahead()
        if not ahead:
            return
        frame = ahead.popleft()
        if disorder and disorder[0] is frame:
            disorder.popleft()
        if isinstance(frame, Damaged):
            known = prev is not None or segment_base is not None
            yield _damaged(frame, floor + 1 if known else frame.base, candidates())
            after_damage = True
            continue
        if floor < frame.base and frame.last <= hi:
            # In order with everything ahead (the common case), or in the longest run.
            problem = _outnumbered(frame, candidates(), after_damage) if disorder else None
        else:
            problem = _out_of_place(frame, floor, hi, prev, segment_base)
        after_damage = False
        if problem is not None:
            yield frame, problem, int64_or_none(frame.base), int64_or_none(frame.last)
            continue
        yield frame, None, floor + 1, frame.last
        floor, prev = frame.last, frame


def int64_or_none(value: int | None) -> int | None:
    return value if value is not None and -INT64_MAX - 1 <= value <= INT64_MAX else None


def _damaged(frame: Damaged, first: int | None, resumed: list[Frame]) -> Verdict:
    """Damaged bytes cover the offsets from the first one not yet read up to the next
    believable batch."""
    first = int64_or_none(first)
    last = resumed[0].base - 1 if resumed else None
    if first is not None and last is not None and first > last:
        return frame, f"{frame.info} (no offsets are missing: the bytes held none)", None, None
    return frame, frame.info, first, last


def _out_of_place(f: Frame, floor: int, hi: int, prev: Frame | None, segment_base: int | None) -> str:
    """What rules the batch out on its own offsets: outside the window, or not after the
    last batch accepted."""
    if f.last > hi:
        if f.last > INT64_MAX:
            return f"implausible offsets: base offset {f.base} + last offset delta {f.last - f.base} overflows int64"
        return (f"implausible offsets {f.base}-{f.last}: more than 2^31-1 past the segment's base offset "
                f"{segment_base} (Kafka rolls a segment before that; a damaged base offset?)")
    if prev is not None:
        if (f.base, f.last) == (prev.base, prev.last):
            return f"duplicate batch: offsets {f.base}-{f.last} again (first read at byte {prev.pos})"
        return (f"implausible offsets {f.base}-{f.last}: not after the batch at byte {prev.pos}, "
                f"which reached offset {floor}")
    if segment_base is not None:
        return (f"implausible offsets {f.base}-{f.last}: below the segment's base offset {segment_base} "
                f"(from its file name)")
    return f"implausible offsets {f.base}-{f.last}: negative base offset"


def _outnumbered(f: Frame, after: list[Frame], resynced: bool) -> str | None:
    """Why `f` is left out of the longest run of batches in increasing offset order among
    itself and `after`, if it is. On a tie it stays (the batch read first wins), unless it
    was `resynced`: found right after damaged bytes."""
    run = [f, *after]
    longest = [0] * len(run)  # longest[i]: the longest run starting with run[i]
    for i in range(len(run) - 1, -1, -1):
        longest[i] = 1 + max((longest[j] for j in range(i + 1, len(run)) if run[j].base > run[i].last), default=0)
    best = max(longest)
    rival = max(longest[1:], default=0)
    if longest[0] == best and not (resynced and rival == best):
        return None
    j = longest.index(best, 1)
    return (f"implausible offsets {f.base}-{f.last}: out of order with the {best} batches in order after them "
            f"(from byte {run[j].pos}, offsets from {run[j].base}; a damaged base offset or a misplaced batch?)")
