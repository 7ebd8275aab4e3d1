"""Untrusted text shown on a terminal: control and bidi characters made visible.

Group, member, client and topic names come from whoever runs the consumers. Printed raw, an
ESC starts a terminal escape sequence (colours, cursor moves, a changed window title), a NUL
or CR hides what came before it, and U+202E (right-to-left override) shows `gnp.exe` for
`exe.png`. On a terminal they are shown as escapes instead (`\\x1b`, `\\x00`, `\\u202e`), and a
backslash as `\\\\` so an escape is never ambiguous; the data itself (lake tables, output to
a file or pipe) is never changed.

Escaped: the Unicode categories Cc (C0 and C1 controls, DEL), Cf (format: bidi embeddings,
overrides and isolates, zero-width characters, the BOM), Zl and Zp (line and paragraph
separators), Cs (lone surrogates) and Cn (unassigned: a later Unicode may make them any of
these).
"""
from __future__ import annotations

import unicodedata

_ESCAPED = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"})
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\"}


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    cp = ord(ch)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    return f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def _dangerous(ch: str) -> bool:
    return unicodedata.category(ch) in _ESCAPED


def terminal_safe(text: str) -> str:
    """`text` with every character of the categories above (and `\\`) written as an escape."""
    # Fast path: str.isprintable() is False for every escaped category (and for spaces other
    # than ' ', which are harmless and kept), so most text is returned as it is.
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_escape(ch) if ch == "\\" or _dangerous(ch) else ch for ch in text)


def _json_escape(ch: str) -> str:
    cp = ord(ch)
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    cp -= 0x10000  # a JSON string spells a character past the BMP as a UTF-16 surrogate pair
    return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"


def json_terminal_safe(line: str) -> str:
    """A JSON text with the escaped categories written as JSON `\\u` escapes: the same JSON
    value (a reader gets the very same strings), nothing raw on the terminal. JSON's own
    backslash escapes are left as they are."""
    if line.isprintable():
        return line
    return "".join(_json_escape(ch) if _dangerous(ch) else ch for ch in line)
