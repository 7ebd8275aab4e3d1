"""Plotly figures of the report. Every Kafka string goes through `safe.plot_text` first.

Figures take plain rows (dicts with epoch-millisecond times, as `dashboards.data` streams
them) and return plotly figure *dicts* ({"data": [...], "layout": {...}}), which `pages`
embeds without plotly's Python-side validation: building `graph_objects` validates every
property and copies the shape list on each `add_vrect`, which made a 100-episode page take
seconds; the dict is exactly what plotly.js receives either way.
"""
from __future__ import annotations

from datetime import datetime, timezone

from dashboards.safe import plot_text

# Colour-blind safe qualitative palette (Okabe-Ito, then Tableau 10) for owners.
OWNER_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#4E79A7",
                 "#F28E2B", "#59A14F", "#B07AA1", "#9C755F", "#76B7B2", "#EDC948", "#FF9DA7", "#BAB0AC")
MAX_OWNER_TRACES = 24
MAX_ANNOTATED_EPISODES = 12
MAX_LABELLED_STORMS = 4

_AXIS = dict(gridcolor="#ececec", zerolinecolor="#d0d0d0", linecolor="#d0d0d0", automargin=True)
_LAYOUT = dict(font=dict(family="DejaVu Sans, Arial, sans-serif", size=12, color="#2a3f5f"),
               paper_bgcolor="white", plot_bgcolor="white",
               margin=dict(l=10, r=10, t=40, b=10), hoverlabel=dict(align="left"))


def _titles(titles: list[str], domains: list[tuple[float, float]]) -> list[dict]:
    """Subplot titles, as make_subplots places them (centred above each x domain)."""
    return [dict(text=t, x=(a + b) / 2, y=1.0, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
                 showarrow=False, font=dict(size=14)) for t, (a, b) in zip(titles, domains)]


def _domains(n: int, gap: float) -> list[tuple[float, float]]:
    w = (1 - gap * (n - 1)) / n
    return [(i * (w + gap), i * (w + gap) + w) for i in range(n)]


def iso(ms) -> str | None:
    """Epoch ms → an ISO string plotly reads as a date (UTC, millisecond precision)."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def short(value, n: int = 48) -> str:
    s = "" if value is None else str(value)
    return s if len(s) <= n else s[: n - 1] + "…"


def member_label(member_id: str, client_id: str | None) -> str:
    """How a member is named in a legend: a classic member id already starts with its client
    id (`consumer-1-<uuid>`); a KIP-848 member id is a bare UUID, so its client id comes first
    and a prefix of the UUID tells apart members with the same client id. Raw text: escape it."""
    if not client_id or member_id.startswith(client_id):
        return member_id
    return f"{client_id} ({member_id[:8]}…)"


def group_label(cluster: str, group_id: str, clusters: int) -> str:
    return group_id if clusters <= 1 else f"{group_id} · {cluster}"


def overview_figure(top: list[dict], clusters: int) -> dict:
    """The most rebalanced groups: rebalances and time spent rebalancing, side by side."""
    labels = [plot_text(short(group_label(r["cluster"], r["group_id"], clusters))) for r in top]
    full = [plot_text(group_label(r["cluster"], r["group_id"], clusters)) for r in top]
    # The category axis needs unique labels; two ids shortened alike get a visible suffix.
    seen: dict[str, int] = {}
    for i, lab in enumerate(labels):
        if lab in seen:
            labels[i] = f"{lab} ({i + 1})"
        seen[labels[i]] = i
    d = _domains(2, 0.04)
    data = [
        dict(type="bar", y=labels, x=[r.get("rebalances") or 0 for r in top], orientation="h", name="rebalances",
             marker=dict(color="#0072B2"), customdata=full, xaxis="x", yaxis="y",
             hovertemplate="%{customdata}<br>%{x} rebalances<extra></extra>"),
        dict(type="bar", y=labels, x=[round((r.get("rebalancing_ms") or 0) / 1000, 1) for r in top], orientation="h",
             name="time rebalancing", marker=dict(color="#E69F00"), customdata=full, xaxis="x2", yaxis="y2",
             hovertemplate="%{customdata}<br>%{x} s rebalancing<extra></extra>"),
    ]
    yaxis = dict(_AXIS, autorange="reversed", type="category")
    layout = dict(_LAYOUT, height=max(260, 60 + 22 * len(top)), showlegend=False, bargap=0.25,
                  xaxis=dict(_AXIS, domain=d[0], anchor="y"), xaxis2=dict(_AXIS, domain=d[1], anchor="y2"),
                  yaxis=dict(yaxis, anchor="x"), yaxis2=dict(yaxis, anchor="x2", matches="y", showticklabels=False),
                  annotations=_titles(["logical rebalances", "time rebalancing (s)"], d))
    return dict(data=data, layout=layout)


def _row_label(topic, partition) -> str:
    return plot_text(f"{topic}-{partition}") if topic is not None else "(no partition)"


def timeline_figure(g) -> dict | None:
    """Who owned which partition when (one bar per ownership interval, one colour per member),
    with rebalance episodes shaded and annotated, storms, duplicate windows, rewinds, skips
    and idle members marked on the same time axis."""
    intervals = g.rows("interval")
    episodes = g.rows("episode")
    if not intervals and not episodes:
        return None
    times = [x for r in intervals for x in (r.get("from_ts"), r.get("to_ts")) if x is not None]
    times += [x for r in episodes for x in (r.get("started_at"), r.get("completed_at")) if x is not None]
    end_of_data = max(times) if times else 0
    traces: list[dict] = []
    shapes: list[dict] = []
    notes: list[dict] = []

    # Ownership: one trace per member, the busiest first; beyond MAX_OWNER_TRACES the rest
    # share one grey trace so the legend stays readable.
    by_owner: dict[str, list[dict]] = {}
    for r in intervals:
        owner = r.get("member_id") or ("standalone consumer" if r.get("owner_kind") == "standalone" else "(unknown owner)")
        by_owner.setdefault(owner, []).append(r)
    owners = sorted(by_owner, key=lambda m: (-len(by_owner[m]), m))
    shown, rest = owners[:MAX_OWNER_TRACES], owners[MAX_OWNER_TRACES:]

    def named(m: str) -> str:
        rows = by_owner[m]
        if not rows[0].get("member_id"):  # a standalone consumer's or an unknown owner's row
            return m
        return member_label(m, next((r.get("client_id") for r in rows if r.get("client_id")), None))

    groups = [(named(m), by_owner[m], OWNER_COLOURS[i % len(OWNER_COLOURS)]) for i, m in enumerate(shown)]
    if rest:
        groups.append((f"{len(rest)} other members", [r for m in rest for r in by_owner[m]], "#999999"))
    rows_order: list[str] = []
    for name, rows, colour in groups:
        ys, base, width, hover = [], [], [], []
        for r in rows:
            start = r.get("from_ts")
            if start is None:
                continue
            stop = r.get("to_ts")
            label = _row_label(r.get("topic"), r.get("partition"))
            ys.append(label)
            base.append(iso(start))
            width.append(max((stop if stop is not None else end_of_data) - start, 1))
            hover.append("<br>".join([
                f"<b>{label}</b>",
                f"member: {plot_text(r.get('member_id'))}",
                f"client: {plot_text(r.get('client_id'))} @ {plot_text(r.get('client_host'))}",
                *([f"instance: {plot_text(r['group_instance_id'])}"] if r.get("group_instance_id") else []),
                f"generations {r.get('start_generation', '?')} → {r.get('end_generation', '?')}",
                f"{iso(start)} → {iso(stop) if stop is not None else 'still owned at end of data'}",
            ]))
        trace = dict(type="bar", y=ys, x=width, base=base, orientation="h", name=plot_text(short(name, 60)),
                     marker=dict(color=colour, line=dict(width=0)), hovertext=hover, hoverinfo="text",
                     legendgroup="owners")
        if name == groups[0][0]:
            trace["legendgrouptitle"] = dict(text="owner (member)")
        traces.append(trace)

    # Partitions in natural order (topic, then partition number), not order of appearance.
    parts = sorted({(str(r.get("topic")), r.get("partition") if r.get("partition") is not None else -1, _row_label(r.get("topic"), r.get("partition")))
                    for r in intervals if r.get("from_ts") is not None})
    rows_order.extend(label for _, _, label in parts if label not in rows_order)

    def marks(kind: str, rows: list[dict], tcol: str, name: str, symbol: str, colour: str, hover_fn):
        pts = [r for r in rows if r.get(tcol) is not None]
        if not pts:
            return
        traces.append(dict(
            type="scatter", x=[iso(r[tcol]) for r in pts], y=[_row_label(r.get("topic"), r.get("partition")) for r in pts],
            mode="markers", name=name, marker=dict(symbol=symbol, size=11, color=colour, line=dict(width=1, color="#222")),
            hovertext=[hover_fn(r) for r in pts], hoverinfo="text"))

    dups = g.rows("duplicate")
    marks("duplicate", [r for r in dups if r.get("cause") != "offset_rewind"], "handover_ts", "duplicate window", "x",
          "#D62728", lambda r: "<br>".join([
              "<b>duplicate window</b>", f"cause: {plot_text(r.get('cause'))}",
              f"{plot_text(r.get('from_member'))} → {plot_text(r.get('to_member'))}",
              f"offsets {r.get('start_offset')} … {r.get('end_offset_estimate')} (≤ {r.get('end_offset_high')})",
              f"≈ {r.get('estimated_records')} records again"]))
    rewinds = [dict(r, _t=r.get("handover_ts")) for r in dups if r.get("cause") == "offset_rewind"]
    rewinds += [dict(r, _t=r.get("started_at")) for r in g.rows("anomaly") if r.get("kind") == "rewind"]
    marks("rewind", rewinds, "_t", "offset rewind", "triangle-down", "#9467BD", lambda r: "<br>".join([
        "<b>offset rewind</b>", f"from {r.get('end_offset_estimate', r.get('offset_from'))} back to "
        f"{r.get('start_offset', r.get('offset_to'))}", f"member: {plot_text(r.get('to_member') or r.get('member_id'))}"]))
    marks("skip", g.rows("skip"), "commit_ts", "skip window", "diamond", "#FF7F0E", lambda r: "<br>".join([
        "<b>skip window</b>", f"cause: {plot_text(r.get('cause'))}", f"offsets {r.get('start_offset')} … {r.get('end_offset')}",
        f"{r.get('records')} records possibly never processed", f"member: {plot_text(r.get('member_id'))}"]))
    other = [r for r in g.rows("anomaly") if r.get("kind") != "rewind"]
    marks("anomaly", other, "started_at", "commit stall / stop", "square-open", "#7F7F7F", lambda r: "<br>".join([
        f"<b>commit {plot_text(r.get('kind'))}</b>", f"{iso(r.get('started_at'))} → {iso(r.get('ended_at'))}",
        f"at offset {r.get('offset_from')}", f"member: {plot_text(r.get('member_id'))}"]))

    # Idle members: a bar on their own row, in grey.
    idle = [r for r in g.rows("idle") if r.get("from_ts") is not None]
    if idle:
        ys = [plot_text("idle · " + short(member_label(r.get("member_id") or "", r.get("client_id")), 40)) for r in idle]
        traces.append(dict(
            type="bar", y=ys, base=[iso(r["from_ts"]) for r in idle],
            x=[max((r.get("to_ts") or end_of_data) - r["from_ts"], 1) for r in idle], orientation="h",
            name="idle member", marker=dict(color="#C7C7C7", line=dict(width=0)), hoverinfo="text",
            hovertext=["<br>".join(["<b>idle member</b>", plot_text(r.get("member_id")),
                                    f"generation {r.get('generation')}", f"cause: {plot_text(r.get('cause'))}"]) for r in idle]))
        rows_order.extend(y for y in ys if y not in rows_order)

    # Rebalance episodes: shaded spans, a marker row with full details, and a text
    # annotation (trigger) when there are few enough to read.
    eps = [r for r in episodes if (r.get("started_at") or r.get("completed_at")) is not None]
    if eps:
        row = "⟳ rebalances"
        traces.append(dict(
            type="scatter", x=[iso(r.get("started_at") or r.get("completed_at")) for r in eps], y=[row] * len(eps), mode="markers",
            name="rebalance episode", marker=dict(symbol="line-ns-open", size=14, color="#E69F00", line=dict(width=2)),
            hoverinfo="text", hovertext=[_episode_hover(r) for r in eps]))
        rows_order.insert(0, row)
        for r in eps:
            s, e = r.get("started_at"), r.get("completed_at")
            if s is not None and e is not None and e > s:
                shapes.append(dict(type="rect", xref="x", yref="paper", x0=iso(s), x1=iso(e), y0=0, y1=1,
                                   fillcolor="#E69F00", opacity=0.15, line=dict(width=0), layer="below"))
            elif e is None and s is not None:
                shapes.append(dict(type="line", xref="x", yref="paper", x0=iso(s), x1=iso(s), y0=0, y1=1,
                                   line=dict(color="#D62728", dash="dot", width=1)))
        if len(eps) <= MAX_ANNOTATED_EPISODES:
            for r in eps:
                notes.append(dict(x=iso(r.get("started_at") or r.get("completed_at")), y=row, yshift=12, showarrow=False,
                                  text=plot_text(short(r.get("trigger") or "?", 24)), font=dict(size=10, color="#8a5a00"),
                                  textangle=-30))
    storms = [r for r in g.rows("storm") if r.get("started_at") is not None]
    for r in storms:
        x0, x1 = iso(r["started_at"]), iso(r.get("ended_at") or r["started_at"])
        shapes.append(dict(type="rect", xref="x", yref="paper", x0=x0, x1=x1, y0=0, y1=1, fillcolor="#D62728",
                           opacity=0.08, line=dict(color="#D62728", width=1, dash="dash"), layer="below"))
        # Labels of many storms would print over each other; the storms table lists them all.
        if len(storms) <= MAX_LABELLED_STORMS:
            notes.append(dict(x=x0, y=1, xref="x", yref="paper", xanchor="left", yanchor="bottom", showarrow=False,
                              text=plot_text(f"storm: {r.get('episodes')} rebalances"), font=dict(color="#D62728")))

    height = min(max(320, 120 + 18 * len(rows_order)), 2400)
    layout = dict(_LAYOUT, height=height, barmode="overlay", bargap=0.25, shapes=shapes, annotations=notes,
                  legend=dict(orientation="v", x=1.01, y=1, font=dict(size=11)),
                  xaxis=dict(_AXIS, type="date", title=dict(text="time (UTC)")),
                  yaxis=dict(_AXIS, type="category", categoryorder="array", categoryarray=rows_order,
                             autorange="reversed"))
    return dict(data=traces, layout=layout)


def _episode_hover(r: dict) -> str:
    dur = r.get("duration_ms")
    return "<br>".join([
        f"<b>generation {r.get('from_generation', '?')} → {r.get('to_generation', '?')}</b>"
        + (" (never completed)" if r.get("completed_at") is None else ""),
        f"trigger: {plot_text(r.get('trigger'))}",
        *([f"member: {plot_text(r['trigger_member'])}"] if r.get("trigger_member") else []),
        *([f"reason: {plot_text(short(r['reason'], 120))}"] if r.get("reason") else []),
        f"members {r.get('members_before', '?')} → {r.get('members_after', '?')}, "
        f"{r.get('partitions_moved', 0)} partitions moved, {r.get('partitions_revoked', 0)} revoked",
        f"duration: {'?' if dur is None else f'{dur / 1000:.1f} s'}",
    ])


def commit_rate_figure(g) -> dict | None:
    """Records committed per second, one line per partition (the group's busiest ones)."""
    rows = [r for r in g.rows("rate") if r.get("rate") is not None]
    if not rows:
        return None
    by_part: dict[tuple, list[dict]] = {}
    for r in rows:
        by_part.setdefault((r.get("topic"), r.get("partition")), []).append(r)
    traces = []
    for (topic, part), pts in sorted(by_part.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
        pts.sort(key=lambda r: r["t"])
        traces.append(dict(
            type="scatter", x=[iso(r["t"]) for r in pts], y=[round(r["rate"], 2) for r in pts], mode="lines",
            name=_row_label(topic, part), line=dict(width=1.5, shape="hv"),
            hovertemplate="%{fullData.name}<br>%{x}<br>%{y} records/s<extra></extra>"))
    layout = dict(_LAYOUT, height=320, xaxis=dict(_AXIS, type="date", title=dict(text="time (UTC)")),
                  yaxis=dict(_AXIS, title=dict(text="records/s committed"), rangemode="tozero"))
    return dict(data=traces, layout=layout)


ACTUAL = "actual"  # whatif_summary's row for what really happened (its figures are also in actual_*)

WHATIF_METRICS = (("moved", "actual_moved", "partitions moved"),
                  ("stw_partition_seconds", "actual_stw_partition_seconds", "stop-the-world partition-seconds"),
                  ("max_balance", "actual_max_balance", "worst balance (max − min)"))


def whatif_figure(rows: list[dict]) -> dict | None:
    """Each assignor's replay next to what happened: moves, stop-the-world, balance."""
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: (r.get("incarnation") or 0, r.get("segment") or 0, str(r.get("assignor"))))
    real = rows[0]
    rows = [r for r in rows if r.get("assignor") != ACTUAL]
    names = ["as recorded (modelled)"] + [plot_text(r.get("assignor")) for r in rows]
    d = _domains(3, 0.08)
    traces, layout = [], dict(_LAYOUT, height=340, bargap=0.3, showlegend=False,
                              annotations=_titles([m[2] for m in WHATIF_METRICS], d))
    for i, (col, actual_col, title) in enumerate(WHATIF_METRICS, start=1):
        values = [real.get(actual_col)] + [r.get(col) for r in rows]
        colours = ["#222222"] + ["#56B4E9" if r.get("assignor") != r.get("real_assignor") else "#0072B2" for r in rows]
        ax = "" if i == 1 else str(i)
        traces.append(dict(type="bar", x=names, y=[v if v is not None else 0 for v in values], marker=dict(color=colours),
                           name=title, xaxis=f"x{ax}", yaxis=f"y{ax}",
                           hovertemplate="%{x}<br>%{y}<extra>" + title + "</extra>"))
        layout[f"xaxis{ax}"] = dict(_AXIS, domain=d[i - 1], anchor=f"y{ax}", tickangle=-30, type="category")
        layout[f"yaxis{ax}"] = dict(_AXIS, anchor=f"x{ax}", rangemode="tozero")
    return dict(data=traces, layout=layout)
