"""Untrusted text shown on a terminal: `terminal_safe` for plain text, `json_terminal_safe`
for JSON lines. Which characters are escaped and how is `pipelines.visible`'s rule, the same
the report's pages use."""
from __future__ import annotations

from pipelines.visible import invisible, visible

terminal_safe = visible


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
    return "".join(_json_escape(ch) if invisible(ch) else ch for ch in line)
