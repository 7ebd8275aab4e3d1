"""Untrusted strings (group, member and client ids, hosts, reasons, topics) made safe for pages.

Every string that came from Kafka passes through one of these before it reaches a page:
`text`/`attr` for HTML (invisible characters spelled out as on the terminal), `plot_text`
for anything plotly renders (plotly draws labels, legend entries and hover text as a small
HTML dialect, so a raw `<b>` or `<a href>` in a group id would be interpreted), `page_name` for the file name (and so the URL) of a group's
page: a readable slug plus a hash of the exact (cluster, group id), so two ids that slug
alike never share a page and no id can climb out of the report folder.
"""
from __future__ import annotations

import hashlib
import html
import re

from pipelines.visible import visible

_SLUG_DROP = re.compile(r"[^a-z0-9._-]+")
_SLUG_MAX = 40


def text(value) -> str:
    """HTML text or attribute value (quotes escaped too, so the same call is safe in both),
    with control, bidi and zero-width characters spelled as escapes (`pipelines.visible`):
    a browser would otherwise reorder the text around a U+202E or show two different ids alike."""
    if value is None:
        return ""
    return html.escape(visible(str(value)), quote=True)


attr = text


def plot_text(value) -> str:
    """Text plotly renders (labels, legends, hover text: a small HTML dialect). It decodes
    &lt; &gt; &amp; back to characters but shows &quot; and &#x27; as written (seen in the
    browser test), so only those three are escaped: without a `<` no tag can form, and a
    quote is then just a character."""
    if value is None:
        return ""
    return html.escape(visible(str(value)), quote=False)


def group_hash(cluster: str, group_id: str) -> str:
    """sha256 of cluster NUL group_id (hex). The Spark side computes the same key
    (`dashboards.data.group_key_col`), so pages can be streamed in key order."""
    return hashlib.sha256(f"{cluster}\0{group_id}".encode("utf-8", "surrogatepass")).hexdigest()


def slug(value: str) -> str:
    s = _SLUG_DROP.sub("-", str(value).lower()).strip("-.")
    return s[:_SLUG_MAX].rstrip("-.") or "group"


def page_name(cluster: str, group_id: str) -> str:
    """File name of a group's page: ASCII only, no path separators, unique per (cluster, group)."""
    return f"{slug(group_id)}-{group_hash(cluster, group_id)[:16]}.html"
