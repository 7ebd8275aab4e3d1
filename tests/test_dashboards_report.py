"""The SRE report, built from every recording and opened in a real headless Chromium.

The lake is tests/recordings_lake.py's (each recording its own cluster), with gold (and
what-if, where that job exists) computed into it. Expected counts come from the lake's
tables, read with Spark independently of the report's own queries. Screenshots go to
test-artifacts/dashboards/.
"""
from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from dashboards.browser import Browser, find_chromium
from dashboards.data import Caps
from dashboards.replicate import copy_groups
from dashboards.report import write_report
from dashboards.safe import page_name
from pipelines.lake import Lake
from rebalance_audit.cli import main
from tests.recordings_lake import findings_lake, spark  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts" / "dashboards"
HOSTILE_GROUP = "<img src=x onerror=alert(1)>"
HOSTILE_CLIENT = '"><script>alert(2)</script>'
# Tags for plotly's HTML dialect, then a right-to-left override (the rest would show reversed)
# and a terminal escape: the pages spell the last two out, as `sql` does on a terminal.
HOSTILE_MEMBER_PREFIX = "<b>m</b>\u202e\x1b[31m"

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="chromium missing: run scripts/setup-browser.sh")


@pytest.fixture(scope="module")
def gold_lake(findings_lake):  # noqa: F811
    return findings_lake


@pytest.fixture(scope="module")
def report(gold_lake, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return write_report(gold_lake, out, page_size=500)


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


def _groups(lake: Lake) -> set[tuple[str, str]]:
    keys = None
    for t in ("group_generations", "offset_commits", "consumer_group_epochs"):
        if lake.exists(t):
            df = lake.read(t).select("cluster", "group_id")
            keys = df if keys is None else keys.unionByName(df)
    return {(r.cluster, r.group_id) for r in keys.distinct().collect()}


def _plots(b: Browser) -> dict:
    return b.evaluate("""Object.fromEntries(Array.from(document.querySelectorAll('.js-plotly-plot'))
        .map(d => [d.id, {traces: d.data.length, names: d.data.map(t => t.name)}]))""")


def _rows(b: Browser, table_id: str) -> int:
    return b.evaluate(f"document.querySelectorAll('table#{table_id} tbody tr').length")


def _assert_clean(load) -> None:
    assert load.problems == [], load.problems


def test_overview_in_browser(report, gold_lake, browser):
    load = browser.open(report.index)
    _assert_clean(load)
    groups = _groups(gold_lake)
    assert report.groups == len(groups)
    assert _rows(browser, "groups") == len(groups)
    plots = _plots(browser)
    assert plots["top-groups"]["traces"] == 2
    browser.screenshot(ARTIFACTS / "overview.png")

    # Every group is linked, by its safe file name, to a page that exists.
    hrefs = browser.evaluate("Array.from(document.querySelectorAll('table#groups a')).map(a => a.getAttribute('href'))")
    assert sorted(hrefs) == sorted(f"groups/{page_name(c, g)}" for c, g in groups)
    assert all((report.out_dir / h).is_file() for h in hrefs)
    # plotly.js is one file beside the pages, not inlined and not fetched from anywhere.
    assert (report.out_dir / "plotly.min.js").stat().st_size > 1_000_000
    assert report.index.stat().st_size < 200_000

    # What the report covers: each cluster, its groups, and the span of its offset commits
    # as the lake holds them (read with delta-rs, not through the report's own query).
    commits = gold_lake.read_arrow("offset_commits", columns=["cluster", "offset", "record_ts", "is_deletion"]).to_pylist()
    span: dict[str, list] = {}
    for r in commits:
        if r["offset"] is not None and not r["is_deletion"]:
            t = r["record_ts"].strftime("%Y-%m-%d %H:%M:%S")
            lo, hi = span.get(r["cluster"], (t, t))
            span[r["cluster"]] = [min(lo, t), max(hi, t)]
    clusters = sorted({c for c, _ in groups})
    assert [tuple(_cells(browser, "coverage", i)) for i in range(4)] == [
        tuple(clusters), tuple(str(sum(1 for c2, _ in groups if c2 == c)) for c in clusters),
        tuple(span.get(c, ["—"])[0] for c in clusters), tuple(span.get(c, ["—", "—"])[1] for c in clusters)]
    sub = browser.evaluate("document.querySelector('.sub').textContent")
    first, last = min(v[0] for v in span.values()), max(v[1] for v in span.values())
    assert f"offset commits from {first} to {last} UTC" in sub, sub


def _episode_counts(lake: Lake):
    e = lake.read("rebalance_episodes")
    real = e.where(~F.coalesce(F.col("empty_transition"), F.lit(False)))
    return {(r.cluster, r.group_id): r.n for r in real.groupBy("cluster", "group_id")
            .agg(F.countDistinct("incarnation", "logical_rebalance_id").alias("n")).collect()}


def test_group_page_in_browser(report, gold_lake, browser):
    counts = _episode_counts(gold_lake)
    (cluster, group), n_rebalances = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    page = report.out_dir / "groups" / page_name(cluster, group)
    load = browser.open(page)
    _assert_clean(load)
    browser.screenshot(ARTIFACTS / "group.png")

    assert browser.evaluate("document.querySelector('h1').textContent") == group
    # The overview's card and the lake agree on the number of logical rebalances.
    card = browser.evaluate("""Array.from(document.querySelectorAll('.card'))
        .find(c => c.querySelector('.k').textContent === 'logical rebalances').querySelector('.v').textContent""")
    assert int(card.replace(",", "")) == n_rebalances

    def rows(t):
        return gold_lake.read(t).where((F.col("cluster") == cluster) & (F.col("group_id") == group))

    members = {r.member_id for r in rows("ownership_intervals").select("member_id").distinct().collect() if r.member_id}
    plots = _plots(browser)
    owners = [n for n in plots["timeline"]["names"] if n in members]
    assert sorted(owners) == sorted(members)  # one bar trace per member that owned something
    episodes = rows("rebalance_episodes").count()
    assert _rows(browser, "episodes") == min(episodes, Caps().episodes)
    assert "rebalance episode" in plots["timeline"]["names"]
    dups = rows("duplicate_windows").count()
    if dups:
        assert _rows(browser, "duplicates") == min(dups, Caps().windows)
    storms = rows("rebalance_storms").count()
    assert _rows(browser, "storms") == storms
    assert plots["commit-rate"]["traces"] >= 1
    parts = {f"{r.topic}-{r.partition}" for r in rows("offset_commits").select("topic", "partition").distinct().collect()}
    assert set(plots["commit-rate"]["names"]) <= parts
    if gold_lake.exists("whatif_summary"):
        assignors = rows("whatif_summary").select("incarnation", "assignor").distinct().collect()
        latest = max(r.incarnation or 0 for r in assignors)
        n = sum(1 for r in assignors if (r.incarnation or 0) == latest and r.assignor != "actual")
        assert plots["whatif"]["traces"] == 3
        assert _rows(browser, "whatif-table") == n + 1  # + the recorded history, modelled
        # What switching would change, most stop-the-world time saved first, as the lake's
        # what-if rows say (read here with Spark, not through the report's query).
        rows_ = [r for r in rows("whatif_summary").collect() if (r.incarnation or 0) == latest
                 and r.assignor not in ("actual", r.real_assignor)]

        def saved_(a, b):
            return 0.0 if a is None or b is None else float(a) - float(b)

        saved = sorted(rows_, key=lambda r: (-saved_(r.actual_stw_partition_seconds, r.stw_partition_seconds),
                                             -saved_(r.actual_dup_exposure_records, r.dup_exposure_records),
                                             -saved_(r.actual_moved, r.moved), r.assignor))
        ranking = browser.evaluate("Array.from(document.querySelectorAll('#whatif-ranking li')).map(li => li.textContent)")
        assert [line.split(":")[0] for line in ranking] == [r.assignor for r in saved]
        assert all(line.endswith("(modelled)") for line in ranking)


def test_spark_and_python_agree_on_group_keys(spark):  # noqa: F811
    """Pages are streamed in the order of a key Spark computes; the file name uses Python's."""
    from dashboards.data import group_key_col
    from dashboards.safe import group_hash

    ids = [("c", HOSTILE_GROUP), ("prod", "\u00e9v\u00e9nements-\U0001f600"), ("", "")]
    got = spark.createDataFrame(ids, "cluster string, group_id string").select(group_key_col().alias("k")).collect()
    assert [r.k for r in got] == [group_hash(c, g) for c, g in ids]


def test_every_group_page_renders(report, browser):
    """Each page loads cleanly: no console error, every figure drawn."""
    pages = sorted((report.out_dir / "groups").glob("*.html"))
    assert len(pages) == report.groups
    for p in pages:
        load = browser.open(p)
        assert load.problems == [], (p.name, load.problems)


@pytest.fixture(scope="module")
def hostile_report(gold_lake, tmp_path_factory):
    """One recording's group under hostile ids, in a lake where the what-if and skip tables
    were never computed and no episode's duration is known (as without a coordinator log);
    the report is written by the command line."""
    counts = _episode_counts(gold_lake)
    cluster, group = max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]
    dst = Lake(tmp_path_factory.mktemp("hostile-lake"), spark=gold_lake.spark)
    tables = [t for t in gold_lake.tables() if t not in ("whatif_summary", "whatif_episodes", "skip_windows")]
    copy_groups(gold_lake, dst, tables=tables, groups=[(cluster, group)],
                rename=lambda gid, i: F.lit(HOSTILE_GROUP),
                strings={"client_id": lambda c: F.lit(HOSTILE_CLIENT),
                         "member_id": lambda c: F.concat(F.lit(HOSTILE_MEMBER_PREFIX), c),
                         "trigger_member": lambda c: F.concat(F.lit(HOSTILE_MEMBER_PREFIX), c),
                         "duration_ms": lambda c: F.lit(None).cast("long"),
                         # group_summary's figures of those durations: unknown too.
                         "rebalancing_ms": lambda c: F.lit(None).cast("long"),
                         "unconsumed_ms": lambda c: F.lit(None).cast("long")})
    out = tmp_path_factory.mktemp("hostile-report")
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = main(["report", "--lake", str(dst.root), "--out", str(out)])
    return rc, stdout.getvalue(), stderr.getvalue(), out, cluster, dst


def test_report_command(hostile_report, tmp_path):
    rc, stdout, stderr, out, _, _ = hostile_report
    assert rc == 0, stderr
    assert Path(stdout.strip()) == (out / "index.html").resolve()
    assert "not computed yet: skip_windows, whatif_summary" in stderr
    assert "1 groups" in stderr
    # No lake there: bad usage, one line, exit 2.
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["report", "--lake", str(tmp_path / "nothing"), "--out", str(tmp_path / "r")]) == 2
    assert "no lake at" in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1


def test_hostile_ids_render_as_text(hostile_report, browser):
    rc, _, stderr, out, cluster, _ = hostile_report
    assert rc == 0, stderr
    load = browser.open(out / "index.html")
    _assert_clean(load)
    assert load.dialogs == []
    assert browser.evaluate("document.querySelectorAll('img, [onerror]').length") == 0
    cell = browser.evaluate("document.querySelector('table#groups tbody tr a').textContent")
    assert cell == HOSTILE_GROUP
    visible = browser.evaluate("document.body.innerText")
    assert HOSTILE_GROUP in visible
    # Rebalances of a time nobody logged read "unknown", not "0.0 s".
    assert _cells(browser, "groups", 6) == ["unknown"]
    assert _card(browser, "time rebalancing") == "unknown"
    browser.screenshot(ARTIFACTS / "hostile-overview.png")

    name = page_name(cluster, HOSTILE_GROUP)
    assert re.fullmatch(r"[a-z0-9._-]+\.html", name)
    assert sorted(p.name for p in (out / "groups").iterdir()) == [name]
    load = browser.open(out / "groups" / name)
    _assert_clean(load)
    assert browser.evaluate("document.querySelector('h1').textContent") == HOSTILE_GROUP
    assert _card(browser, "time rebalancing") == "unknown"
    assert browser.evaluate("document.querySelectorAll('img, [onerror]').length") == 0
    # Plotly draws legend entries from its HTML dialect: the member ids show their tags as text.
    # A member id that does not start with its client id (as KIP-848's UUIDs) is named by
    # its client id, then the start of its member id.
    legend = browser.evaluate("Array.from(document.querySelectorAll('#timeline .legendtext')).map(t => t.textContent)")
    assert any(t.startswith(HOSTILE_CLIENT[:20]) and "(<b>m</b>…)" in t for t in legend), legend
    assert browser.evaluate("document.querySelectorAll('#timeline .legendtext b').length") == 0
    hover = browser.evaluate("document.getElementById('timeline').data.flatMap(t => t.hovertext || []).join('\\n')")
    assert HOSTILE_CLIENT not in hover and "&lt;script&gt;" in hover
    # The member ids' right-to-left override and terminal escape are spelled out, never raw.
    assert "member: &lt;b&gt;m&lt;/b&gt;\\u202e\\x1b[31m" in hover
    shown = browser.evaluate("document.body.innerText") + "".join(legend) + hover
    assert "\u202e" not in shown and "\x1b" not in shown
    browser.screenshot(ARTIFACTS / "hostile-group.png")

    # Tables never computed say so instead of failing.
    for section in ("whatif-section", "skips-section"):
        assert "not computed" in browser.evaluate(f"document.getElementById('{section}').innerText")
    assert "not computed" not in browser.evaluate("document.getElementById('duplicates-section').innerText")


def test_asset_metadata_links_to_the_report(hostile_report, tmp_path, monkeypatch):
    from dagster import materialize

    from assets.report import sre_report
    from assets.resources import LakeResource, SparkResource

    lake = hostile_report[5]
    monkeypatch.setenv("REBALANCE_AUDIT_REPORT_DIR", str(tmp_path / "asset-report"))
    result = materialize([sre_report], resources={"lake": LakeResource(root=str(lake.root)),
                                                  "spark": SparkResource(master="local[2]")})
    assert result.success
    meta = result.asset_materializations_for_node("sre_report")[0].metadata
    index = (tmp_path / "asset-report" / "index.html").resolve()
    assert meta["report"].value == index.as_uri()
    assert index.is_file() and meta["groups"].value == 1


def test_empty_lake_says_not_computed(tmp_path, browser, spark):  # noqa: F811
    result = write_report(Lake(tmp_path / "empty-lake", spark=spark), tmp_path / "report")
    assert result.groups == 0 and "rebalance_episodes" in result.missing_tables
    load = browser.open(result.index)
    _assert_clean(load)
    text = browser.evaluate("document.body.innerText")
    assert "Not computed yet" in text and "No consumer groups in the lake" in text


def test_fit_cap_cuts_only_the_biggest_groups():
    from dashboards.data import fit_cap

    # Under budget: the cap stands.
    assert fit_cap([1, 5, 100], cap=50, budget=1000) == 50
    # 1 + 5 + 24 = 30 rows fit a budget of 30; 25 would make 31.
    assert fit_cap([1, 5, 100], cap=50, budget=30) == 24
    # Many groups: never below the floor, even past the budget.
    assert fit_cap([100] * 1000, cap=50, budget=10, floor=10) == 10
    assert fit_cap([None, 0], cap=5, budget=0) == 5


def _card(b: Browser, label: str) -> str:
    """The value of the headline card labelled `label`."""
    return b.evaluate("Array.from(document.querySelectorAll('.card')).filter(c => c.querySelector('.k')"
                      f".textContent === {json.dumps(label)}).map(c => c.querySelector('.v').textContent)[0]")


def _cells(b: Browser, table_id: str, col: int) -> list[str]:
    return b.evaluate(f"Array.from(document.querySelectorAll('table#{table_id} tbody tr'))"
                      f".map(r => r.children[{col}].textContent)")


def test_bounded_pages_keep_the_top_rows_and_say_so(gold_lake, browser, tmp_path):
    """With tiny caps and budgets, each page holds the top rows of each finding (most records
    at risk first), the latest episodes, and states the lake's full totals."""
    dups = gold_lake.read("duplicate_windows")
    per_group = {(r.cluster, r.group_id): r.n for r in dups.groupBy("cluster", "group_id").agg(F.count("*").alias("n")).collect()}
    (cluster, group), n_dups = max(per_group.items(), key=lambda kv: (kv[1], kv[0]))
    assert n_dups > 1, "the recordings have a group with several duplicate windows"
    eps = gold_lake.read("rebalance_episodes").where((F.col("cluster") == cluster) & (F.col("group_id") == group))
    n_eps = eps.count()
    caps = Caps(windows=1, episodes=3, budget_episodes=3, floor=1)
    result = write_report(gold_lake, tmp_path / "bounded", page_size=500, caps=caps)
    # The episode budget of the whole report is 3 rows; the floor of 1 lets it hold.
    assert result.driver_rows["detail"] > 0
    load = browser.open(result.out_dir / "groups" / page_name(cluster, group))
    _assert_clean(load)

    mine = dups.where((F.col("cluster") == cluster) & (F.col("group_id") == group))
    top = sorted((r.estimated_records for r in mine.select("estimated_records").collect()), key=lambda v: -(v or 0))[:1]
    shown = [int(c.replace(",", "")) for c in _cells(browser, "duplicates", 8)]
    assert sorted(shown, reverse=True) == [v or 0 for v in top]
    total_records = sum(max(v or 0, 0) for v in (r.estimated_records for r in mine.select("estimated_records").collect()))
    dup_note = browser.evaluate("document.getElementById('duplicates-section').innerText")
    assert f"of {n_dups:,}" in dup_note and f"{total_records:,} records at risk in all" in dup_note

    shown_eps = _rows(browser, "episodes")
    assert 1 <= shown_eps <= 3 and shown_eps < n_eps
    # The session time zone is UTC, as the page's.
    latest = eps.agg(F.date_format(F.max("started_at"), "yyyy-MM-dd HH:mm:ss").alias("t")).first().t
    assert latest in _cells(browser, "episodes", 1)
    ep_note = browser.evaluate("document.getElementById('episodes-section').innerText")
    assert f"Showing the latest {shown_eps} of {n_eps:,} episodes" in ep_note


def test_unchanged_lake_keeps_the_report_without_a_spark_job(gold_lake, report, spark, tmp_path):  # noqa: F811
    """A report is a function of its tables' versions: the same versions keep it as it is
    (no Spark job), a new version of any of them rewrites it."""
    import shutil

    out = tmp_path / "kept"
    shutil.copytree(report.out_dir, out)
    from tests.spark_fixture import spark_jobs

    jobs, again = spark_jobs(spark, "report-unchanged", lambda: write_report(gold_lake, out, page_size=500))
    assert again.unchanged and jobs == []
    assert (again.groups, again.overview_pages) == (report.groups, report.overview_pages)
    # Other page settings, or forcing it: written again.
    assert not write_report(gold_lake, out, page_size=499).unchanged
    assert not write_report(gold_lake, out, page_size=499, force=True).unchanged
    assert write_report(gold_lake, out, page_size=499).unchanged
    # A table at another version than the report was written from: written again.
    import json

    state = out / ".inputs.json"
    kept = json.loads(state.read_text())
    kept["inputs"]["tables"]["rebalance_episodes"] -= 1
    state.write_text(json.dumps(kept))
    assert not write_report(gold_lake, out, page_size=499).unchanged


def test_a_report_of_another_lake_at_the_same_versions_is_written_again(gold_lake, report, tmp_path):
    """Two lakes side by side share one `report/` folder (beside each): the report kept for
    one is not the other's, even when every table is at the same version."""
    import shutil

    out = tmp_path / "kept"
    shutil.copytree(report.out_dir, out)
    other = Lake(tmp_path / "other-lake", spark=gold_lake.spark)
    shutil.copytree(gold_lake.root, other.root)
    # The other lake's group_summary: created apart, one group fewer, at the same version.
    name = "group_summary"
    rows, version = other.read_arrow(name), other.version(name)
    schema, parts = other.schema(name), other.partition_by(name)
    shutil.rmtree(other.uri(name))
    other.create(name, schema, parts)
    while other.version(name) < version - 1:
        other.append(name, schema.empty_table())
    other.append(name, rows.slice(1))
    assert other.version(name) == version
    assert write_report(gold_lake, out, page_size=500).unchanged
    again = write_report(other, out, page_size=500)
    assert not again.unchanged


def _pages(out: Path) -> dict[str, str]:
    """Every page of a report, the overview's generation time taken out."""
    pages = {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*.html")}
    return {k: re.sub(r"generated [0-9: -]+UTC", "generated", v) for k, v in pages.items()}


def test_changed_groups_rewrite_their_pages_and_equal_a_whole_report(gold_lake, spark, tmp_path):  # noqa: F811
    """A cluster arrives later and one group's episodes are replaced (as gold does, by key):
    the update rewrites only the changed groups' pages, and the report equals one written
    whole from the same lake."""
    from dashboards.data import GOLD, SILVER, WHATIF

    late = "storm_flapping"
    names = [n for n in (*SILVER, *GOLD, *WHATIF) if gold_lake.exists(n)]
    lake = Lake(tmp_path / "lake", spark=spark)
    for n in names:
        lake.write_df(n, gold_lake.read(n).where(F.col("cluster") != late), partition_by=["cluster"])
    out = tmp_path / "updated"
    first = write_report(lake, out, page_size=5)
    before = _pages(out)

    for n in names:
        lake.write_df(n, gold_lake.read(n).where(F.col("cluster") == late), mode="append", partition_by=["cluster"])
    episodes = lake.read("rebalance_episodes")
    g = episodes.groupBy("cluster", "group_id").count().where(F.col("count") > 2) \
        .orderBy("cluster", "group_id").first()
    mine = episodes.where((F.col("cluster") == g.cluster) & (F.col("group_id") == g.group_id))
    last = mine.agg(F.max("started_at")).first()[0]
    keys = spark.createDataFrame([(g.cluster, g.group_id)], "cluster string, group_id string")
    lake.replace_rows("rebalance_episodes", mine.where(F.col("started_at") < last), keys, ["cluster", "group_id"],
                      partition_by=["cluster"])

    second = write_report(lake, out, page_size=5)
    late_groups = gold_lake.read("group_generations").where(F.col("cluster") == late) \
        .select("group_id").distinct().count()
    assert second.rewritten_groups is not None and late_groups + 1 <= second.rewritten_groups < first.groups
    assert second.groups == first.groups + late_groups
    whole = write_report(lake, tmp_path / "whole", page_size=5)
    assert whole.rewritten_groups is None
    assert _pages(out) == _pages(tmp_path / "whole")
    changed = f"groups/{page_name(g.cluster, g.group_id)}"
    assert before[changed] != _pages(out)[changed]


def test_damaged_report_state_means_a_whole_rewrite(gold_lake, report, tmp_path):  # noqa: F811
    """A damaged `.inputs.json`, or a damaged `.stats.parquet` when a table changed, is never
    trusted: the report is written whole."""
    import json
    import shutil

    for damage in (".inputs.json", ".stats.parquet"):
        out = tmp_path / damage.strip(".")
        shutil.copytree(report.out_dir, out)
        if damage == ".stats.parquet":
            state = json.loads((out / ".inputs.json").read_text())
            state["inputs"]["tables"]["rebalance_episodes"] -= 1  # a table "changed" since
            (out / ".inputs.json").write_text(json.dumps(state))
        (out / damage).write_text("{not json")
        again = write_report(gold_lake, out, page_size=500)
        assert not again.unchanged and again.rewritten_groups is None
        assert again.groups == report.groups


def _cards(b: Browser) -> dict[str, str]:
    return b.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('.card'))"
                      ".map(c => [c.querySelector('.k').textContent, c.querySelector('.v').textContent]))")


def _table(b: Browser, table_id: str) -> list[list[str]]:
    return b.evaluate(f"Array.from(document.querySelectorAll('table#{table_id} tbody tr'))"
                      ".map(r => Array.from(r.children).map(c => c.textContent))")


def _shown(html: str) -> str:
    """What a browser shows of a fragment the pages write (tags dropped)."""
    return re.sub(r"<[^>]+>", "", html)


def test_every_tile_agrees_with_its_table_and_with_sql(report, gold_lake, browser, capsys):
    """On every group page of the recordings lake, each headline tile equals the table below
    it on the same page (rows listed, records summed, never-completed episodes counted,
    idle members told apart from transient ones), the group's row on the overview, and what
    `rebalance-audit sql` answers from `group_summary`: one definition, one number."""
    from dashboards.pages import fmt_duration, fmt_idle, fmt_int

    capsys.readouterr()
    assert main(["sql", "--lake", str(gold_lake.root), "--format", "json", "SELECT * FROM group_summary"]) == 0
    summary = {(r["cluster"], r["group_id"]): r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert set(summary) == _groups(gold_lake)
    browser.open(report.index)
    overview = {(row[2], row[1]): row for row in _table(browser, "groups")}  # (cluster, group id)
    caps = Caps()
    for (cluster, group), s in sorted(summary.items()):
        where = (cluster, group)
        o = overview[(cluster, group)]
        assert o[4:12] == [fmt_int(s["rebalances"]), fmt_int(s["incomplete_rebalances"]),
                           _shown(fmt_duration(s["rebalancing_ms"], True)), fmt_int(s["duplicate_windows"]),
                           fmt_int(s["records_at_risk"]), fmt_int(s["skip_windows"]),
                           fmt_idle(s["idle_members"], s["transient_idle_members"]), fmt_int(s["storms"])], where
        load = browser.open(report.out_dir / "groups" / page_name(cluster, group))
        _assert_clean(load)
        cards = _cards(browser)
        assert cards["logical rebalances"] == fmt_int(s["rebalances"]), where
        assert cards["time rebalancing"] == _shown(fmt_duration(s["rebalancing_ms"], True)), where
        assert cards["partitions stood unconsumed"] == _shown(fmt_duration(s["unconsumed_ms"], True)), where

        episodes = _table(browser, "episodes")
        assert len(episodes) == min(s["episodes"], caps.episodes), where
        never = sum(1 for r in episodes if r[2] == "never")
        assert cards["never completed"] == fmt_int(s["incomplete_rebalances"]) == fmt_int(never), where

        dups = _table(browser, "duplicates")
        assert cards["duplicate windows"] == fmt_int(s["duplicate_windows"]) == fmt_int(len(dups)), where
        at_risk = sum(max(0, int(r[8].replace(",", ""))) for r in dups)
        assert cards["records at risk of re-processing"] == fmt_int(s["records_at_risk"]) == fmt_int(at_risk), where

        idle = _table(browser, "idle")
        lasting = {r[0] for r in idle if not r[6].endswith("(transient)")}
        transient = {r[0] for r in idle if r[6].endswith("(transient)")} - lasting
        assert len(idle) == s["idle_spans"], where
        assert cards["idle members"] == fmt_idle(s["idle_members"], s["transient_idle_members"]) \
            == fmt_idle(len(lasting), len(transient)), where

        for label, table_id, column in (("skip windows", "skips", "skip_windows"), ("storms", "storms", "storms"),
                                        ("commit anomalies", "anomalies", "commit_anomalies")):
            assert cards[label] == fmt_int(s[column]) == fmt_int(len(_table(browser, table_id))), (where, label)
    # Not vacuous: the recordings hold duplicates, idle members, storms and a crash's long stop.
    assert sum(s["records_at_risk"] for s in summary.values()) > 0
    assert sum(s["idle_members"] + s["transient_idle_members"] for s in summary.values()) > 0
    assert sum(s["storms"] for s in summary.values()) > 0
    assert max(s["unconsumed_ms"] or 0 for s in summary.values()) > 5_000
