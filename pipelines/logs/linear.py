"""Regular expressions that run in linear time, with Python's `re` results.

Coordinator lines carry untrusted text (group, member and client ids) between the fixed words
of each format, so the formats need several unbounded `.+` groups. Python's backtracking
`re` tries every way of splitting a line between them: a crafted 40 k-character line that
almost matches took seconds (quadratic with two such groups, worse with three). RE2 (the
`google-re2` package) never backtracks: time is linear in the line's length, whatever it
holds.

RE2 gives the same groups as Python's `re` for these patterns (leftmost-first: greedy and
lazy groups end where a backtracking engine would end them), once the Python meanings that
RE2 spells otherwise are written out here:

- `\\d`, `\\w`, `\\s` (and `\\S`) match Unicode digits, word and space characters in Python but
  ASCII only in RE2: they become explicit classes built from Python's own `str.isdecimal`,
  `str.isalnum` and `str.isspace`, so both engines agree on every code point (RE2's Unicode
  tables are newer than Python 3.11's: `\\p{L}` would not do);
- `$` matches before a final newline in Python: it becomes `(?:\\n?\\z)`;
- flags become inline flags.

Anything else the translation does not know (look-arounds, back-references, `\\b`) raises
when the pattern is first used (every format is, by tests/test_logs_formats.py), so no pattern
silently changes meaning. `tests/test_logs_fuzz.py` compares both engines on real and mutated
lines.
"""
from __future__ import annotations

import array
import functools
import re
import sys
from typing import Any

import re2

__all__ = ["compile", "translate"]

# Escapes that mean the same character in both engines.
_SAME = set(".^$*+?()[]{}|\\-/`'\"=:;,<>!@#%&~ _")


@functools.lru_cache(maxsize=1)
def _every_code_point() -> str:
    """Every code point but the surrogates (not UTF-8: RE2 never sees them), built through
    UTF-32 (a tenth of the time of joining chr() of each)."""
    cps = array.array("I", range(0xD800))
    cps.extend(range(0xE000, sys.maxunicode + 1))
    return cps.tobytes().decode("utf-32-le" if sys.byteorder == "little" else "utf-32-be")


@functools.lru_cache(maxsize=None)
def _ranges(cls: str) -> str:
    """The code points Python's `re` puts in class `cls` (`\\d`, `\\w` or `\\s`), as RE2 ranges,
    found with Python's own `re` over every code point."""
    everything = _every_code_point()
    parts = []
    for m in re.finditer(cls + "+", everything):
        # A run that spans the left-out surrogates would hold them too in its range,
        # which changes nothing, as no UTF-8 text holds one.
        lo, hi = ord(m.group()[0]), ord(m.group()[-1])
        parts.append(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
    return "".join(parts)


def _class_escape(ch: str, inside: bool) -> str:
    """RE2 text for Python escape `\\ch`, inside a `[...]` class or not."""
    if ch in "dws":
        body = _ranges("\\" + ch)
        return body if inside else f"[{body}]"
    if ch in "DWS" and not inside:
        return f"[^{_ranges(chr(92) + ch.lower())}]"
    if ch in _SAME or (inside and ch == "]"):
        return "\\" + ch
    if ch in "ntrfv":
        return "\\" + ch
    raise ValueError(f"escape \\{ch} has no linear translation here")


def translate(pattern: str, flags: int = 0) -> str:
    """RE2 syntax for a Python pattern, with Python's meaning (see the module's doc)."""
    out = []
    if flags & ~(re.DOTALL | re.IGNORECASE):
        raise ValueError(f"unsupported flags {flags!r}")
    prefix = ("s" if flags & re.DOTALL else "") + ("i" if flags & re.IGNORECASE else "")
    if prefix:
        out.append(f"(?{prefix})")
    i, n, inside = 0, len(pattern), False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            out.append(_class_escape(pattern[i + 1], inside))
            i += 2
            continue
        if inside:
            if ch == "]":
                inside = False
            elif ch == "[":
                raise ValueError("nested class")
            out.append(ch)
        elif ch == "[":
            inside = True
            out.append(ch)
            # `[^]...]` / `[]...]`: a leading `]` is a literal in Python.
            if pattern.startswith("^", i + 1):
                out.append("^")
                i += 1
            if pattern.startswith("]", i + 1):
                out.append("\\]")
                i += 1
        elif ch == "$":
            out.append(r"(?:\n?\z)")
        elif ch == "(" and pattern.startswith("(?", i) and not pattern.startswith(("(?:", "(?P<"), i):
            raise ValueError(f"group {pattern[i:i + 4]!r} has no linear translation here")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


class _Fallback:
    """Python's `re` for text RE2 cannot take (lone surrogates, which are not UTF-8: they
    never come from a file or a lake table, only from a caller's own string), bounded in
    length so that even then no line takes long."""

    LIMIT = 4096

    def __init__(self, python: re.Pattern):
        self.py = python

    def call(self, name: str, text: str):
        return getattr(self.py, name)(text) if len(text) <= self.LIMIT else None


class LinearMatch:
    """The groups of one match (what the parser reads of a match: `groupdict`, `group`)."""

    __slots__ = ("_groups",)

    def __init__(self, groups: dict):
        self._groups = groups

    def groupdict(self) -> dict:
        return dict(self._groups)

    def group(self, name):
        return self._groups[name]


# The package's `re2.compile` wraps each call in a Python generator that maps every offset
# back to characters (about 20 us a call, 20 times Python's `re` on a short line); its C++
# binding, called directly, takes 2-4 us, and group texts are cut from the UTF-8 bytes.
_ANCHORS = {"match": re2._Anchor.ANCHOR_START, "search": re2._Anchor.UNANCHORED,
            "fullmatch": re2._Anchor.ANCHOR_BOTH}


class LinearPattern:
    """`match`, `search` and `fullmatch` of a Python pattern, in linear time.

    Compiled at first use: a process that parses a few kinds of line (a Spark worker, one
    `parse-logs`) builds only the patterns it needs, and importing the parser stays cheap."""

    __slots__ = ("pattern", "flags", "_re2", "_names", "_fallback")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = pattern
        self.flags = flags
        self._re2: Any = None  # re2._re2.RE2 once compiled (no type stubs)

    def _compile(self) -> None:
        compiled = re2._re2.RE2(translate(self.pattern, self.flags).encode("utf-8"), re2.Options())
        if not compiled.ok():
            raise ValueError(f"RE2 refused {self.pattern!r}: {compiled.error()}")
        names = {k.decode(): i for k, i in compiled.NamedCapturingGroups()}
        python = re.compile(self.pattern, self.flags)
        if names != python.groupindex:  # pragma: no cover - a translation bug
            raise AssertionError(f"groups differ for {self.pattern!r}")
        self._names = tuple(sorted(names.items(), key=lambda kv: kv[1]))
        self._fallback = _Fallback(python)
        self._re2 = compiled

    def _run(self, how: str, text: str):
        if self._re2 is None:
            self._compile()
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            m = self._fallback.call(how, text)
            return None if m is None else LinearMatch(m.groupdict())
        spans = self._re2.Match(_ANCHORS[how], data, 0, len(data))
        if spans[0][0] < 0:
            return None
        return LinearMatch({name: None if spans[i][0] < 0 else data[spans[i][0]:spans[i][1]].decode("utf-8")
                            for name, i in self._names})

    def match(self, text: str) -> LinearMatch | None:
        return self._run("match", text)

    def search(self, text: str) -> LinearMatch | None:
        return self._run("search", text)

    def fullmatch(self, text: str) -> LinearMatch | None:
        return self._run("fullmatch", text)

    def __repr__(self) -> str:
        return f"linear.compile({self.pattern!r})"


def compile(pattern: str, flags: int = 0) -> LinearPattern:  # noqa: A001 - mirrors re.compile
    return LinearPattern(pattern, flags)
