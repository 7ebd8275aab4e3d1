"""Write the whole report: overview pages, one page per group, shared plotly.js and CSS.

    from dashboards.report import write_report
    result = write_report(lake, "report/")      # result.index -> report/index.html

Layout of the folder:

    index.html, overview-2.html, ...   groups ranked by rebalances, `page_size` per page
    groups/<slug>-<hash>.html          one per (cluster, group id)
    plotly.min.js, report.css          written once, referenced by every page

Three Spark queries produce everything (see `dashboards.data`): each aggregates in Spark
and brings only its bounded result to the driver as Arrow; pages are then rendered one
group at a time from those tables (rows are decoded per group). Group pages left over
from an earlier run (a group no longer in the lake) are removed; the index is written
last, so a reader who opens it sees a finished report.

A report is a function of the lake tables it reads: `.inputs.json` beside the index keeps
their Delta versions (`stages.REPORT.versions`, the positions every stage computes; and the
page settings). It is kept there, not in the lake's positions ledger, because the pages are
files outside the lake (one lake may feed several report folders) and the state must move
with them: it is removed before pages change and written last. A run that finds the tables
at those versions keeps the report as it is without starting a Spark job (a scheduled run on a quiet cluster).
When some changed, only the groups with rows in the files added or removed since are
recomputed (every query is per group): their headline rows replace theirs in the kept
ones (`.stats.parquet`), their pages are rewritten, the overview is rewritten from the
merged rows. If the merged figures give other caps than before (every page may change), or
the change cannot be told (a table appeared, a removed file was vacuumed), the whole report
is rewritten. Bump `REPORT_FORMAT` when the pages change, so existing reports are rewritten.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from plotly.offline import get_plotlyjs

from dashboards import figures, group_page
from dashboards.data import SUMMARY, Caps, LakeTables, ReportData, load, load_changed
from dashboards.pages import CSS, NOT_COMPUTED, cards, figure_html, fmt_duration, fmt_idle, fmt_int, fmt_ts, page, pager, table
from dashboards.safe import page_name, text
from pipelines import stages

GROUPS_DIR = "groups"
TOP_GROUPS = 25
INPUTS_FILE = ".inputs.json"
STATS_FILE = ".stats.parquet"
REPORT_FORMAT = 2  # 2: the overview says what it covers; ids spell invisible characters out


@dataclass
class ReportResult:
    out_dir: Path
    index: Path
    groups: int
    overview_pages: int
    missing_tables: list[str] = field(default_factory=list)
    driver_rows: dict[str, int] = field(default_factory=dict)  # rows each query brought to the driver
    unchanged: bool = False  # the lake tables were as at the last report: kept as it was
    rewritten_groups: int | None = None  # pages rewritten by an incremental update (None: all)


REPORT_DIR_ENV = "REBALANCE_AUDIT_REPORT_DIR"


def default_out_dir(lake_root: str) -> Path:
    """$REBALANCE_AUDIT_REPORT_DIR, else `report/` beside a local lake folder (./lake ->
    ./report), else ./report (a lake in an object store: the pages are opened from disk)."""
    env = os.environ.get(REPORT_DIR_ENV)
    if env:
        return Path(env)
    root = str(lake_root)
    if root.startswith("file://"):
        root = root[len("file://"):]
    if "://" not in root:
        return Path(root).resolve().parent / "report"
    return Path("report")


def overview_name(n: int) -> str:
    return "index.html" if n == 1 else f"overview-{n}.html"


def _write(path: Path, content: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(content, encoding="utf-8")
    os.replace(tmp, path)


def _static(out: Path) -> None:
    js = out / "plotly.min.js"
    bundle = get_plotlyjs()
    # Same bundle already there (a re-run): leave it, its mtime and any open tab alone.
    if not js.is_file() or js.stat().st_size != len(bundle.encode("utf-8")):
        _write(js, bundle)
    _write(out / "report.css", CSS)


def _inputs(lake, page_size: int, caps: Caps) -> dict:
    """What a report is made of: its tables' Delta versions (-1: absent), which tables those
    are (their ids: two lakes in one folder share its `report/`, and may well be at the same
    versions), and its settings."""
    versions = stages.REPORT.versions(lake)
    return {"format": REPORT_FORMAT, "page_size": page_size, "caps": dataclasses.asdict(caps),
            "tables": {n: versions.get(n, -1) for n in stages.REPORT.watched()},
            "table_ids": {n: lake.table_id(n) for n in versions}}


def _state(out: Path) -> dict | None:
    """What the report in `out` was written from, or None (no report, or an unfinished one)."""
    try:
        kept = json.loads((out / INPUTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    needed = ("inputs", "groups", "overview_pages", "missing_tables", "caps_effective")
    if not isinstance(kept, dict) or any(k not in kept for k in needed) or not isinstance(kept["inputs"], dict) \
            or "tables" not in kept["inputs"]:
        return None  # damaged, or written by another version: the report is written whole
    return kept if (out / overview_name(1)).is_file() else None


def _changed_groups(lake, before: dict[str, int], now: dict[str, int]) -> list[tuple[str, str]] | None:
    """The (cluster, group_id) pairs with rows in the files added or removed since the
    versions `before` (one Spark job over those files only), or None when that cannot be
    told (`Stage.changes`: a table appeared or vanished; here also a removed file that was
    vacuumed since). -1: a table absent."""
    from pyspark.sql import functions as F

    changes = stages.REPORT.changes(
        lake, {t: v for t, v in before.items() if v >= 0}, {t: v for t, v in now.items() if v >= 0},
        follows_rewrite=lambda _, removed: all(lake.file_exists(f) for f in removed))
    if changes.rebuild:
        return None
    parts = [lake.rows_of_files(name, {**added, **removed}).select("cluster", "group_id")
             for name, (added, removed) in changes.files.items()]
    if not parts:
        return []
    union = parts[0]
    for p in parts[1:]:
        union = union.unionByName(p)
    rows = union.where(F.col("group_id").isNotNull()).distinct().collect()
    return [(r["cluster"], r["group_id"]) for r in rows]


def _incremental(lake, out: Path, kept: dict | None, inputs: dict, tables: LakeTables,
                 caps: Caps) -> tuple[ReportData, list[tuple[str, str]]] | None:
    """The data of an incremental update of the report in `out` (see the module doc), with
    the changed groups; None when the whole report must be written."""
    import pyarrow.parquet as pq

    if kept is None or not (out / STATS_FILE).is_file():
        return None
    before = kept["inputs"]
    if any(before.get(k) != inputs[k] for k in ("format", "page_size", "caps", "table_ids")):
        return None
    try:
        previous, previous_caps = pq.read_table(out / STATS_FILE), Caps(**kept["caps_effective"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # kept state unreadable (damaged, or from another version): write it whole
    keys = _changed_groups(lake, before["tables"], inputs["tables"])
    if keys is None or len(keys) > max(1, kept["groups"] // 2):
        return None  # half the groups or more: the whole report costs about the same
    data = load_changed(tables, caps, keys, previous, previous_caps)
    return None if data is None else (data, keys)


def write_report(lake, out_dir: str | os.PathLike, page_size: int = 100, caps: Caps = Caps(),  # noqa: B008 - a frozen dataclass, never mutated
                 force: bool = False) -> ReportResult:
    """Write the report of `lake` into `out_dir`; kept as it is when its inputs did not
    change since it was written (`force` rewrites it anyway)."""
    if page_size < 1:
        raise ValueError("page_size must be at least 1")
    out = Path(out_dir)
    inputs = _inputs(lake, page_size, caps)
    kept = None if force else _state(out)
    if kept is not None and kept.get("inputs") == inputs:
        return ReportResult(out, out / overview_name(1), kept["groups"], kept["overview_pages"],
                            kept["missing_tables"], unchanged=True)
    (out / GROUPS_DIR).mkdir(parents=True, exist_ok=True)
    _static(out)
    tables = LakeTables.read(lake)
    missing = set(tables.missing)
    changed = _incremental(lake, out, kept, inputs, tables, caps)
    data = load(tables, caps) if changed is None else changed[0]
    # The state is removed first: a crash while pages are rewritten leaves a report that the
    # next run rewrites whole.
    (out / INPUTS_FILE).unlink(missing_ok=True)

    written: set[str] = set()
    for g in data.group_pages():
        name = page_name(g.cluster, g.group_id)
        _write(out / GROUPS_DIR / name, group_page.render(g, missing, data.caps))
        written.add(name)
    if changed is None:
        for stale in (out / GROUPS_DIR).glob("*.html"):
            if stale.name not in written:
                stale.unlink()
    else:
        for cluster, group_id in changed[1]:  # a changed group with no rows left is gone
            if page_name(cluster, group_id) not in written:
                (out / GROUPS_DIR / page_name(cluster, group_id)).unlink(missing_ok=True)
    result = _write_overview(out, tables, data, page_size, lake, data.groups)
    result.driver_rows = data.driver_rows()
    result.rewritten_groups = None if changed is None else len(written)
    _write_stats(out, data)
    # Written last: a crash before this leaves a report that the next run rewrites.
    _write(out / INPUTS_FILE, json.dumps({"inputs": inputs, "groups": result.groups,
                                          "overview_pages": result.overview_pages,
                                          "missing_tables": sorted(result.missing_tables),
                                          "caps_effective": dataclasses.asdict(data.caps)}, sort_keys=True))
    return result


def _write_stats(out: Path, data: ReportData) -> None:
    """Every group's headline row, kept for the next incremental update."""
    import pyarrow.parquet as pq

    path = out / STATS_FILE
    if data.stats is None:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(data.stats, tmp)
    os.replace(tmp, path)


def _write_overview(out: Path, tables: LakeTables, data: ReportData, page_size: int, lake, n_groups: int) -> ReportResult:
    pages_total = max(1, -(-n_groups // page_size))
    totals = {"rebalances": 0, "rebalancing_ms": 0, "duplicate_windows": 0, "duplicate_records": 0,
              "idle_members": 0, "transient_idle_members": 0, "storms": 0, "incomplete_rebalances": 0}
    clusters: set[str] = set()
    first_page: list[dict] = []
    current: list[dict] = []
    page_no, rank = 1, 0
    unknown_time = 0  # groups that rebalanced for a time no log says
    for row in data.overview_rows():
        rank += 1
        row["rank"] = rank
        clusters.add(row["cluster"])
        for k in totals:
            totals[k] += row.get(k) or 0
        if row.get("rebalancing_ms") is None and row.get("generations"):
            unknown_time += 1
        current.append(row)
        if len(current) == page_size:
            if page_no == 1:
                first_page = current
            else:
                _write(out / overview_name(page_no), _overview_page(current, page_no, pages_total, None, tables, lake, clusters))
            page_no += 1
            current = []
    if current:
        if page_no == 1:
            first_page = current
        else:
            _write(out / overview_name(page_no), _overview_page(current, page_no, pages_total, None, tables, lake, clusters))
    summary = (totals, unknown_time, rank, len(clusters))
    index = out / overview_name(1)
    _write(index, _overview_page(first_page, 1, pages_total, summary, tables, lake, clusters, data.coverage()))
    # Overview pages of an earlier, longer report would link to pages that no longer exist.
    for p in out.glob("overview-*.html"):
        try:
            if int(p.stem.split("-", 1)[1]) > pages_total:
                p.unlink()
        except ValueError:
            pass
    return ReportResult(out, index, n_groups, pages_total, sorted(tables.missing))


def _total_rebalancing(totals: dict, unknown: int) -> str:
    """The known time rebalancing, and how many groups' (`unknown`) time is unknown on top of it."""
    if unknown and not totals["rebalancing_ms"]:
        return fmt_duration(None, computed=True)
    known = fmt_duration(totals["rebalancing_ms"])
    return f"{known} + {unknown:,} group(s) unknown" if unknown else known


# The clusters listed by name on the overview; past this many the rest are counted.
COVERAGE_ROWS = 50


def _time_range(coverage: list[dict]) -> str:
    """'offset commits from A to B (UTC)' over every cluster, or that there are none."""
    firsts = [c["first_commit_ms"] for c in coverage if c["first_commit_ms"] is not None]
    lasts = [c["last_commit_ms"] for c in coverage if c["last_commit_ms"] is not None]
    if not firsts:
        return "no offset commits in the lake"
    return f"offset commits from {fmt_ts(min(firsts))} to {fmt_ts(max(lasts))} UTC"


def _coverage_section(coverage: list[dict]) -> str:
    """Which clusters the report covers, and the time each one's offset commits span."""
    shown = coverage[:COVERAGE_ROWS]
    rows = [[text(c["cluster"]), fmt_int(c["groups"]), fmt_ts(c["first_commit_ms"]), fmt_ts(c["last_commit_ms"])]
            for c in shown]
    more = (f'<p class="note">and {len(coverage) - len(shown):,} more clusters (ranked with the others below).</p>'
            if len(coverage) > len(shown) else "")
    return ('<section id="coverage-section"><h2>What this report covers</h2>'
            '<p class="note">Each cluster of the lake, its consumer groups, and the first and last offset commit '
            "the lake holds of them (UTC): findings outside that time are not in this report.</p>"
            + table("coverage", [("cluster", False), ("groups", True), ("first offset commit", False),
                                 ("last offset commit", False)], rows) + more + "</section>")


def _overview_page(rows, page_no, pages_total, summary, tables: LakeTables, lake, clusters,
                   coverage: list[dict] | None = None) -> str:
    missing = set(tables.missing)
    body = []
    gold_missing = sorted(m for m in missing if m not in ("member_assignments", "consumer_group_epochs"))
    if gold_missing:
        body.append(f'<div class="banner">Not computed yet: {text(", ".join(gold_missing))}. '
                    "Run <code>rebalance-audit run</code> to compute them; their columns read "
                    "“not computed” below.</div>")
    if summary is not None:
        totals, unknown_time, n, n_clusters = summary
        done = SUMMARY not in missing  # every figure below is a group_summary column

        def figure(v: str) -> str:
            return v if done else NOT_COMPUTED

        body.append(cards([
            ("consumer groups", f"{n:,}", False),
            ("clusters", f"{n_clusters:,}", False),
            ("logical rebalances", figure(fmt_int(totals["rebalances"])), False),
            ("never completed", figure(fmt_int(totals["incomplete_rebalances"])), bool(totals["incomplete_rebalances"])),
            ("time rebalancing", figure(_total_rebalancing(totals, unknown_time)), False),
            ("duplicate windows", figure(fmt_int(totals["duplicate_windows"])), bool(totals["duplicate_windows"])),
            ("records at risk of re-processing", figure(fmt_int(totals["duplicate_records"])),
             bool(totals["duplicate_records"])),
            ("idle members", figure(fmt_idle(totals["idle_members"], totals["transient_idle_members"])),
             bool(totals["idle_members"])),
            ("storms", figure(fmt_int(totals["storms"])), bool(totals["storms"])),
        ]))
        if coverage:
            body.append(_coverage_section(coverage))
        top = [r for r in rows[:TOP_GROUPS] if r.get("rebalances")]
        if top:
            body.append(f'<section id="top-section"><h2>Most rebalanced groups (top {len(top)})</h2>'
                        + figure_html(figures.overview_figure(top, len(clusters)), "top-groups") + "</section>")
    nav = pager(page_no, pages_total, overview_name)
    headers = [("#", True), ("group", False), ("cluster", False), ("kind", False), ("rebalances", True),
               ("never completed", True), ("time rebalancing", True), ("duplicate windows", True),
               ("records at risk", True), ("skip windows", True), ("idle members", True), ("storms", True),
               ("commit anomalies", True), ("coverage gaps", True)]
    body_rows = []
    for r in rows:
        href = f"{'groups'}/{page_name(r['cluster'], r['group_id'])}"
        body_rows.append([
            str(r["rank"]), f'<a href="{text(href)}">{text(r["group_id"])}</a>', text(r["cluster"]),
            text(r.get("protocol_kind") or "—"), fmt_int(r.get("rebalances")), fmt_int(r.get("incomplete_rebalances")),
            fmt_duration(r.get("rebalancing_ms"), SUMMARY not in missing), fmt_int(r.get("duplicate_windows")),
            fmt_int(r.get("duplicate_records")),
            fmt_int(r.get("skip_windows")), fmt_idle(r.get("idle_members"), r.get("transient_idle_members")),
            fmt_int(r.get("storms")),
            fmt_int(r.get("anomalies")), fmt_int(r.get("coverage_gaps")),
        ])
    body.append('<section id="groups-section"><h2>Consumer groups, ranked by rebalances</h2>'
                '<p class="note">Ranked by logical rebalances (start-up and shut-down excluded), then time spent '
                "rebalancing, then records at risk of re-processing.</p>"
                + nav + (table("groups", headers, body_rows) if body_rows else '<p class="note">No consumer groups in the lake.</p>')
                + nav + "</section>")
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    sub = f"lake {text(getattr(lake, 'root', lake))} · generated {generated}"
    if coverage:
        sub += " · " + _time_range(coverage)
    if pages_total > 1:
        sub += f" · page {page_no} of {pages_total}"
    return page("rebalance-audit report", "Consumer group rebalances", sub, "".join(body))
