"""Untrusted text made visible: control, bidi and other invisible characters spelled as escapes.

Group, member, client and topic names come from whoever runs the consumers. Shown raw, an
ESC starts a terminal escape sequence (colours, cursor moves, a changed window title), a NUL
or CR hides what came before it, U+202E (right-to-left override) shows `gnp.exe` for
`exe.png`, and a zero-width space makes two different group ids look the same, on a terminal
and on a web page alike. Wherever such a string is shown to a person (the `sql` command's
terminal output, the report's pages) these characters are spelled as escapes (`\\x1b`,
`\\x00`, `\\u202e`), and a backslash as `\\\\` so an escape is never ambiguous. The data itself
(lake tables, output to a file or pipe) is never changed.

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


def invisible(ch: str) -> bool:
    """Is `ch` one of the characters escaped here (see the module's docstring)?"""
    return unicodedata.category(ch) in _ESCAPED


def visible(text: str) -> str:
    """`text` with every character of the categories above (and `\\`) written as an escape."""
    # Fast path: str.isprintable() is False for every escaped category (and for spaces other
    # than ' ', which are harmless and kept), so most text is returned as it is.
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_escape(ch) if ch == "\\" or invisible(ch) else ch for ch in text)
