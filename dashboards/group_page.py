"""One consumer group's page: ownership timeline, episodes, findings and the what-if comparison."""
from __future__ import annotations

from dashboards import figures
from dashboards.data import Caps, GroupData
from dashboards.data import SUMMARY
from dashboards.pages import (NOT_COMPUTED, cards, figure_html, fmt_duration, fmt_idle, fmt_int, fmt_ts, page, table)
from dashboards.safe import text


def _cell(v) -> str:
    return "—" if v is None else text(v)


def _num(v) -> str:
    if v is None:
        return "—"
    return f"{v:,.1f}" if isinstance(v, float) and not v.is_integer() else f"{int(v):,}"


def _shown(kind_rows: list, total, noun: str, pick: str = "latest", extra: str = "") -> str:
    """Says what a capped list leaves out (the lake holds all of it: `rebalance-audit sql`)."""
    if total is None or total <= len(kind_rows):
        return ""
    n, total = f"{len(kind_rows):,}", f"{int(total):,}"
    what = (f"the {n} {noun} {pick}, of {total}" if pick.startswith("with")
            else f"the {pick} {n} of {total} {noun}")
    return (f'<p class="note">Showing {what}{extra}: a page draws a bounded number of rows; '
            "the lake's tables hold them all.</p>")


def render(g: GroupData, missing: set[str], caps: Caps, overview_href: str = "../index.html") -> str:
    s = g.stats
    gid, cluster = g.group_id, g.cluster
    body: list[str] = []

    warn = []
    if s.get("coverage_gaps"):
        warn.append(f"History incomplete: {int(s['coverage_gaps'])} coverage gap(s) (compaction, retention, "
                    "late start or deletion); findings cover only what the input still holds.")
    not_done = sorted(missing & {"rebalance_episodes", "ownership_intervals", "duplicate_windows", "idle_consumers",
                                 "rebalance_storms", "commit_anomalies", "whatif_summary", "skip_windows", "coverage_gaps"})
    if not_done:
        warn.append("Not computed yet: " + ", ".join(not_done) + ".")
    if warn:
        body.append("".join(f'<div class="banner">{text(w)}</div>' for w in warn))

    body.append(cards([
        ("logical rebalances", fmt_int(s.get("rebalances")), False),
        ("never completed", fmt_int(s.get("incomplete_rebalances")), bool(s.get("incomplete_rebalances"))),
        ("time rebalancing", fmt_duration(s.get("rebalancing_ms"), SUMMARY not in missing), False),
        ("partitions stood unconsumed", fmt_duration(s.get("unconsumed_ms"), SUMMARY not in missing), False),
        ("duplicate windows", fmt_int(s.get("duplicate_windows")), bool(s.get("duplicate_windows"))),
        ("records at risk of re-processing", fmt_int(s.get("duplicate_records")), bool(s.get("duplicate_records"))),
        ("skip windows", fmt_int(s.get("skip_windows")), bool(s.get("skip_windows"))),
        ("idle members", fmt_idle(s.get("idle_members"), s.get("transient_idle_members")), bool(s.get("idle_members"))),
        ("storms", fmt_int(s.get("storms")), bool(s.get("storms"))),
        ("commit anomalies", fmt_int(s.get("anomalies")), bool(s.get("anomalies"))),
    ]))

    # Timeline
    sec = ['<section id="timeline-section"><h2>Partition ownership and rebalances</h2>']
    if "ownership_intervals" in missing and "rebalance_episodes" in missing:
        sec.append(f"<p>{NOT_COMPUTED}</p>")
    else:
        fig = figures.timeline_figure(g)
        if fig is None:
            sec.append('<p class="note">No ownership or rebalance history for this group '
                       "(a standalone consumer without commits in range, or an empty group).</p>")
        else:
            sec.append('<p class="note">Bars: which member owned each partition; shaded: rebalance episodes '
                       "(trigger above each mark, details on hover); red dashed: storms; ✕ duplicate windows, "
                       "▼ offset rewinds, ◆ skip windows, □ commit stalls/stops; grey rows: idle members.</p>")
            sec.append(_shown(g.rows("interval"), s.get("ownership_intervals"), "ownership intervals"))
            sec.append(figure_html(fig, "timeline"))
    sec.append("</section>")
    body.append("".join(sec))

    # Commit rate
    sec = ['<section id="commit-rate-section"><h2>Commit rate per partition</h2>']
    if "offset_commits" in missing:
        sec.append(f"<p>{NOT_COMPUTED}</p>")
    else:
        fig = figures.commit_rate_figure(g)
        if fig is None:
            sec.append('<p class="note">No commits that advance an offset.</p>')
        else:
            parts = {(r.get("topic"), r.get("partition")) for r in g.rows("rate")}
            total = s.get("commit_partitions")
            if total is not None and total > len(parts):
                sec.append(f'<p class="note">The {len(parts)} partitions with the most commits, of {int(total):,}.</p>')
            sec.append(figure_html(fig, "commit-rate"))
    sec.append("</section>")
    body.append("".join(sec))

    body.append(_whatif(g, missing))
    body.append(_episodes(g, missing))
    body.append(_simple(g, missing, "duplicate", "duplicate_windows", "Duplicate windows", "duplicates",
                        s.get("duplicate_windows"), "windows",
                        "with the most records at risk", _total(s.get("duplicate_records"), "records at risk in all"),
                        [("handover", False), ("partition", False), ("from", False), ("to", False), ("cause", False),
                         ("start offset", True), ("end estimate", True), ("end bound", True), ("records again", True)],
                        lambda r: [fmt_ts(r.get("handover_ts")), _part(r), _cell(r.get("from_member")), _cell(r.get("to_member")),
                                   _cell(r.get("cause")), _num(r.get("start_offset")), _num(r.get("end_offset_estimate")),
                                   _num(r.get("end_offset_high")), _num(r.get("estimated_records"))]))
    body.append(_simple(g, missing, "skip", "skip_windows", "Skip windows", "skips", s.get("skip_windows"), "windows",
                        "with the most records", _total(s.get("skip_records"), "records in all"),
                        [("commit", False), ("partition", False), ("member", False), ("cause", False),
                         ("from offset", True), ("to offset", True), ("records", True)],
                        lambda r: [fmt_ts(r.get("commit_ts")), _part(r), _cell(r.get("member_id")), _cell(r.get("cause")),
                                   _num(r.get("start_offset")), _num(r.get("end_offset")), _num(r.get("records"))]))
    body.append(_simple(g, missing, "idle", "idle_consumers", "Idle members", "idle", s.get("idle_spans"), "idle spans",
                        "longest", "",
                        [("member", False), ("client", False), ("generation", True), ("from", False), ("to", False),
                         ("duration", True), ("cause", False)],
                        lambda r: [_cell(r.get("member_id")), _cell(r.get("client_id")), _num(r.get("generation")),
                                   fmt_ts(r.get("from_ts")), fmt_ts(r.get("to_ts")),
                                   "—" if r.get("duration_ms") is None else fmt_duration(r["duration_ms"]),
                                   _cell(r.get("cause")) + (" (transient)" if r.get("transient") else "")]))
    body.append(_simple(g, missing, "storm", "rebalance_storms", "Rebalance storms", "storms", s.get("storms"), "storms",
                        "with the most time rebalancing", "",
                        [("started", False), ("ended", False), ("rebalances", True), ("time rebalancing", True),
                         ("dominant trigger", False), ("members", False)],
                        lambda r: [fmt_ts(r.get("started_at")), fmt_ts(r.get("ended_at")), _num(r.get("episodes")),
                                   "—" if r.get("time_rebalancing_ms") is None else fmt_duration(r["time_rebalancing_ms"]),
                                   _cell(r.get("dominant_trigger")),
                                   text(", ".join(r.get("flapping_members") or [])) or "—"]))
    body.append(_simple(g, missing, "anomaly", "commit_anomalies", "Commit anomalies", "anomalies", s.get("anomalies"),
                        "anomalies",
                        "longest", "",
                        [("kind", False), ("partition", False), ("from", False), ("to", False), ("span", True),
                         ("offset", True), ("to offset", True), ("member", False)],
                        lambda r: [_cell(r.get("kind")), _part(r), fmt_ts(r.get("started_at")), fmt_ts(r.get("ended_at")),
                                   "—" if r.get("span_ms") is None else fmt_duration(r["span_ms"]),
                                   _num(r.get("offset_from")), _num(r.get("offset_to")), _cell(r.get("member_id"))]))
    body.append(_simple(g, missing, "lag", "consumer_lag", "Consumer lag", "lag", s.get("lag_rows"), "samples",
                        "latest", "",
                        [("sampled", False), ("partition", False), ("log end", True), ("committed", True),
                         ("committed at", False), ("lag", True)],
                        lambda r: [fmt_ts(r.get("sampled_at")), _part(r), _num(r.get("end_offset")),
                                   _num(r.get("committed_offset")), fmt_ts(r.get("committed_at")), _num(r.get("lag"))],
                        empty="None: lag is sampled by live ingestion (ingest kafka), and segment files alone hold "
                              "no log-end offsets."))
    body.append(_simple(g, missing, "gap", "coverage_gaps", "Coverage gaps", "gaps", s.get("coverage_gaps"), "gaps",
                        "latest", "",
                        [("kind", False), ("partition", False), ("from", False), ("to", False), ("detail", False)],
                        lambda r: [_cell(r.get("kind")), _part(r) if r.get("topic") else "—", fmt_ts(r.get("from_ts")),
                                   fmt_ts(r.get("to_ts")), _cell(r.get("detail"))]))

    sub = (f'cluster <b>{text(cluster)}</b> · {text(s.get("protocol_kind") or "unknown kind")} · '
           f'<a href="{overview_href}">← all groups</a>')
    return page(f"{text(gid)} · rebalance-audit", text(gid), sub, "".join(body), root="../")


def _part(r: dict) -> str:
    return text(f"{r.get('topic')}-{r.get('partition')}")


def _total(v, noun: str) -> str:
    return "" if v is None else f" ({int(v):,} {noun})"


def _simple(g, missing, kind, table_name, title, table_id, total, noun, pick, extra, headers, row_fn,
            empty: str = "None.") -> str:
    out = [f'<section id="{table_id}-section"><h2>{text(title)}</h2>']
    if table_name in missing:
        out.append(f"<p>{NOT_COMPUTED}</p>")
    else:
        rows = g.rows(kind)
        if not rows:
            out.append(f'<p class="note">{text(empty)}</p>')
        else:
            out.append(_shown(rows, total, noun, pick, extra))
            out.append(table(table_id, headers, [row_fn(r) for r in rows]))
    out.append("</section>")
    return "".join(out)


def _episodes(g: GroupData, missing) -> str:
    out = ['<section id="episodes-section"><h2>Rebalance episodes</h2>']
    if "rebalance_episodes" in missing:
        out.append(f"<p>{NOT_COMPUTED}</p>")
    else:
        rows = g.rows("episode")
        if not rows:
            out.append('<p class="note">None.</p>')
        else:
            out.append(_shown(rows, g.stats.get("generations"), "episodes"))
            clients = _client_ids(g)
            headers = [("generation", False), ("started", False), ("completed", False), ("duration", True),
                       ("unconsumed", True), ("lag at start", True), ("trigger", False), ("member", False),
                       ("reason", False), ("members", True), ("moved", True), ("revoked", True)]
            out.append(table("episodes", headers, [[
                f"{_cell(r.get('from_generation'))} → {_cell(r.get('to_generation'))}",
                fmt_ts(r.get("started_at")),
                fmt_ts(r.get("completed_at")) if r.get("completed_at") is not None else "<b>never</b>",
                "—" if r.get("duration_ms") is None else fmt_duration(r["duration_ms"]),
                "—" if r.get("unconsumed_ms") is None else fmt_duration(r["unconsumed_ms"]),
                _lag_at_start(r),
                _cell(r.get("trigger")), _cell(_member(r.get("trigger_member"), clients)), _cell(r.get("reason")),
                f"{_num(r.get('members_before'))} → {_num(r.get('members_after'))}",
                _num(r.get("partitions_moved")), _num(r.get("partitions_revoked")),
            ] for r in rows]))
    out.append("</section>")
    return "".join(out)


def _client_ids(g: GroupData) -> dict[str, str]:
    """member id → client id, from the page's ownership and idle rows: a KIP-848 member id is
    a bare UUID, and the client id is what an SRE knows the consumer by."""
    out: dict[str, str] = {}
    for kind in ("interval", "idle"):
        for r in g.rows(kind):
            if r.get("member_id") and r.get("client_id"):
                out.setdefault(r["member_id"], r["client_id"])
    return out


def _member(member_id: str | None, clients: dict[str, str]) -> str | None:
    return None if member_id is None else figures.member_label(member_id, clients.get(member_id))


def _lag_at_start(r: dict) -> str:
    """The group's lag when the rebalance started, and how long before it that sample was
    taken (live ingestions sample the log ends once per run)."""
    if r.get("lag_at_start") is None:
        return "—"
    return (f"{_num(r['lag_at_start'])} "
            f'<span class="note">({fmt_duration(r["started_at"] - r["lag_sampled_at"])} before)</span>')


# (what-if column, its column for the recorded history, what one unit less is called)
BENEFITS = (("stw_partition_seconds", "actual_stw_partition_seconds", "stop-the-world partition-seconds"),
            ("dup_exposure_records", "actual_dup_exposure_records", "records exposed to re-processing"),
            ("moved", "actual_moved", "partition moves"))


def whatif_benefits(real: dict, rows: list[dict]) -> list[str]:
    """One line per other assignor, most stop-the-world time saved first, then records
    exposed to re-processing: what switching would change, by the replay model, e.g.
    "cooperative-sticky: 53 fewer stop-the-world partition-seconds, 420 fewer records
    exposed to re-processing, 12 fewer partition moves (modelled)"."""
    def gain(r: dict, col: str, actual: str) -> float | None:
        a, b = real.get(actual), r.get(col)
        return None if a is None or b is None else float(a) - float(b)

    scored = []
    for r in rows:
        if r.get("assignor") == r.get("real_assignor"):
            continue
        parts = []
        for col, actual, noun in BENEFITS:
            d = gain(r, col, actual)
            if d is None or round(d, 1) == 0:
                continue
            n = f"{abs(d):,.0f}" if abs(d) >= 10 or d == int(d) else f"{abs(d):,.1f}"
            parts.append(f"{n} {'fewer' if d > 0 else 'more'} {noun}")
        line = f"{r.get('assignor')}: " + (", ".join(parts) if parts else "no change") + " (modelled)"
        key = tuple(-(gain(r, col, actual) or 0.0) for col, actual, _ in BENEFITS)
        scored.append((key, str(r.get("assignor")), line))
    return [line for _, _, line in sorted(scored)]


def _whatif(g: GroupData, missing) -> str:
    out = ['<section id="whatif-section"><h2>What other assignors would have done</h2>']
    if "whatif_summary" in missing:
        out.append(f"<p>{NOT_COMPUTED}</p></section>")
        return "".join(out)
    rows = g.rows("whatif")
    if not rows:
        out.append('<p class="note">No replayable history (no membership records for this group).</p></section>')
        return "".join(out)
    # One history at a time reads best; the latest is the one people are asking about. A
    # group converted between the classic and the consumer protocol has one per segment.
    def history(r: dict) -> tuple[int, int]:
        return (r.get("incarnation") or 0, r.get("segment") or 0)

    latest = max(history(r) for r in rows)
    rows = sorted((r for r in rows if history(r) == latest), key=lambda r: str(r.get("assignor")))
    if latest[0]:
        out.append(f'<p class="note">Latest incarnation of the group ({latest[0]}).</p>')
    if latest[1]:
        out.append(f'<p class="note">Since the group last changed protocol (to {text(rows[0].get("group_kind"))}): '
                   "earlier protocol phases are replayed on their own, in <code>whatif_summary</code>.</p>")
    real = rows[0]
    rows = [r for r in rows if r.get("assignor") != figures.ACTUAL]
    out.append(f'<p class="note">The group used <b>{text(real.get("real_assignor") or "?")}</b>; '
               "each assignor replays the same members, subscriptions and partition counts with its protocol's real "
               "behaviour (eager revokes everything; cooperative needs a second round). Every figure in this "
               "section is the replay model's, for the recorded assignments too (“as recorded, modelled”), so they "
               "compare like with like; what really happened is in the tiles above and the episodes below.</p>")
    ranking = whatif_benefits(real, rows)
    if ranking:
        out.append('<p class="note">Switching, ranked by the model’s benefit:</p><ol id="whatif-ranking">'
                   + "".join(f"<li>{text(line)}</li>" for line in ranking) + "</ol>")
    fig = figures.whatif_figure(rows)
    if fig is not None:
        out.append(figure_html(fig, "whatif"))
    headers = [("assignor", False), ("protocol", False), ("rounds", True), ("moved", True), ("revoked", True),
               ("stop-the-world partition-s", True), ("worst balance", True), ("final balance", True),
               ("idle member-rounds", True), ("duplicate exposure (records)", True), ("notes", False)]
    body = [[
        "<b>as recorded, modelled</b>", "—", _num(real.get("actual_rounds")), _num(real.get("actual_moved")),
        _num(real.get("actual_revoked")), _num(real.get("actual_stw_partition_seconds")),
        _num(real.get("actual_max_balance")), "—", _num(real.get("actual_idle_member_rounds")),
        _num(real.get("actual_dup_exposure_records")), "",
    ]]
    for r in rows:
        note = r.get("notes") or ""
        if r.get("errors"):
            note = f"{r['errors']} round(s) refused by the assignor. {note}"
        if r.get("divergences"):
            note = f"replay diverges from the recorded assignment in {r['divergences']} round(s). {note}"
        body.append([
            text(r.get("assignor")) + (" (used)" if r.get("assignor") == r.get("real_assignor") else ""),
            _cell(r.get("protocol")), _num(r.get("rounds")), _num(r.get("moved")), _num(r.get("revoked")),
            _num(r.get("stw_partition_seconds")), _num(r.get("max_balance")), _num(r.get("final_balance")),
            _num(r.get("idle_member_rounds")), _num(r.get("dup_exposure_records")), text(note.strip()),
        ])
    out.append(table("whatif-table", headers, body))
    out.append("</section>")
    return "".join(out)
