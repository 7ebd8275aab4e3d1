"""HTML of the report pages. Everything from Kafka is escaped with `dashboards.safe`.

Pages are plain HTML with a shared stylesheet (`report.css`) and one shared
`plotly.min.js`, both written once at the top of the report folder; group pages live in
`groups/` and reference them with `../`. Figures are embedded as plotly JSON (plotly's
serializer escapes `<`, `>` and `/`, so no string can close the script element).
"""
from __future__ import annotations

from datetime import datetime, timezone

import plotly.io as pio

from dashboards.safe import attr, text

CSS = """
body{font-family:"DejaVu Sans",Arial,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#1f3a5f;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:22px;font-weight:600;overflow-wrap:anywhere}
header .sub{opacity:.8;font-size:13px;margin-top:4px;overflow-wrap:anywhere}
header a{color:#cfe3ff}
main{padding:16px 24px;max-width:1500px}
section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:12px 16px;margin:0 0 16px}
h2{font-size:17px;margin:0 0 8px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:16px}
.card{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:8px 14px;min-width:120px}
.card .v{font-size:22px;font-weight:600}.card .k{font-size:12px;color:#666}
.card.warn .v{color:#b3261e}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:4px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{background:#f3f5f8;position:sticky;top:0}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
td.id{overflow-wrap:anywhere;max-width:420px;min-width:11em}
.nc{color:#888;font-style:italic}
.note{color:#555;font-size:13px;margin:4px 0 8px}
.banner{background:#fff4e5;border:1px solid #f0c36d;border-radius:6px;padding:8px 12px;margin-bottom:16px;font-size:14px}
.pager{margin:10px 0;font-size:14px}.pager a,.pager span{margin-right:8px}
.pager span.cur{font-weight:700}
"""

NOT_COMPUTED = '<span class="nc">not computed</span>'


def fmt_int(v) -> str:
    return NOT_COMPUTED if v is None else f"{int(v):,}"


UNKNOWN = '<span class="nc">unknown</span>'


def fmt_idle(lasting, transient) -> str:
    """Idle members, and the members only transiently idle (a cooperative handover, KIP-848
    reconciliation) beside them: labelled apart, never left out."""
    if lasting is None:
        return NOT_COMPUTED
    return f"{int(lasting):,}" + (f" (+{int(transient):,} transient)" if transient else "")


def fmt_duration(ms, computed: bool = False) -> str:
    """A duration in ms; None reads "unknown" where its table was `computed` (the value is
    not known, e.g. no coordinator log was loaded), else "not computed"."""
    if ms is None:
        return UNKNOWN if computed else NOT_COMPUTED
    s = ms / 1000
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def fmt_ts(ms) -> str:
    if ms is None:
        return "—"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def page(title: str, heading: str, sub: str, body: str, root: str = "") -> str:
    """A whole page. `title`, `heading` and `sub` must already be escaped."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{title}</title><link rel=\"stylesheet\" href=\"{root}report.css\">"
        f"<script src=\"{root}plotly.min.js\"></script></head><body>"
        f"<header><h1>{heading}</h1><div class=\"sub\">{sub}</div></header><main>{body}</main></body></html>\n"
    )


def figure_html(fig: dict, div_id: str) -> str:
    # validate=False: the figures are built as plain dicts (see dashboards.figures).
    return pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id, validate=False,
                       config={"displaylogo": False, "responsive": True})


def cards(items: list[tuple[str, str, bool]]) -> str:
    """(label, value html, warn) cards. Labels are ours; values already formatted/escaped."""
    return '<div class="cards">' + "".join(
        f'<div class="card{" warn" if warn else ""}"><div class="v">{value}</div><div class="k">{text(label)}</div></div>'
        for label, value, warn in items) + "</div>"


def table(table_id: str, headers: list[tuple[str, bool]], rows: list[list[str]]) -> str:
    """headers: (label, numeric); cells are HTML already escaped by the caller."""
    head = "".join(f'<th class="n">{text(h)}</th>' if num else f"<th>{text(h)}</th>" for h, num in headers)
    body = []
    for r in rows:
        cells = []
        for (h, num), c in zip(headers, r):
            cls = "n" if num else ("id" if h in ("group", "member", "from", "to", "reason", "members", "detail") else "")
            cells.append(f'<td class="{cls}">{c}</td>' if cls else f"<td>{c}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table id="{attr(table_id)}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def pager(current: int, total: int, name_of) -> str:
    """Links to every overview page (a window around the current one when there are many)."""
    if total <= 1:
        return ""
    pages = sorted({1, total, *range(max(1, current - 3), min(total, current + 3) + 1)})
    out, prev = ['<nav class="pager">'], 0
    if current > 1:
        out.append(f'<a href="{attr(name_of(current - 1))}">‹ previous</a>')
    for p in pages:
        if p - prev > 1:
            out.append("<span>…</span>")
        out.append(f'<span class="cur">{p}</span>' if p == current else f'<a href="{attr(name_of(p))}">{p}</a>')
        prev = p
    if current < total:
        out.append(f'<a href="{attr(name_of(current + 1))}">next ›</a>')
    out.append(f"<span>page {current} of {total}</span></nav>")
    return "".join(out)
