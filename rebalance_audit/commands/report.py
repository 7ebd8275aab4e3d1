"""`rebalance-audit report [--lake DIR] [--out DIR]`: write the SRE dashboards as static HTML.

The report works offline (plotly.js is written once next to the pages) and says "not
computed" for any table the lake does not have yet. It prints the path of the index page
on stdout, so `xdg-open "$(rebalance-audit report)"` opens it.
"""
from __future__ import annotations

import sys
from pathlib import Path

from rebalance_audit.cli import UsageError, add_common_options
from rebalance_audit.preflight import PreflightError, check_writable



def register(subparsers) -> None:
    p = subparsers.add_parser(
        "report",
        help="write the SRE dashboards (static HTML) and print where",
        description="Write the overview and one page per consumer group as self-contained static HTML.",
    )
    add_common_options(p)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="folder to write the report into (default $REBALANCE_AUDIT_REPORT_DIR, else report/ "
                        "beside the lake folder, else ./report)")
    p.add_argument("--page-size", type=int, default=100, metavar="N", help="groups per overview page (default 100)")
    p.add_argument("--force", action="store_true",
                   help="rewrite the report even if the lake tables did not change since it was written")
    p.set_defaults(func=run)


def _check_has_gold(lake, lake_root: str) -> None:
    """The report shows gold findings: a lake with none yet has nothing to show."""
    from dashboards.data import GOLD

    if not any(lake.exists(name) for name in GOLD):
        raise PreflightError(f"the lake at {lake_root} has no gold tables yet (rebalance_episodes, duplicate_windows, "
                             f"...): run `rebalance-audit run --lake {lake_root}` first")


def run(args) -> int:
    from pipelines.lake import Lake

    if args.page_size < 1:
        raise UsageError("--page-size must be at least 1")
    lake_root = args.lake
    if "://" not in lake_root and not Path(lake_root).is_dir():
        raise UsageError(f"no lake at {lake_root} (run `rebalance-audit ingest ...` first, or pass --lake)")
    from dashboards.report import default_out_dir, write_report

    out = Path(args.out) if args.out else default_out_dir(lake_root)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder")

    from pipelines.spark import get_spark

    lake = Lake(lake_root, spark=lambda: get_spark(args.spark_master))
    # Checked before the first file is written: a report of nothing, or one that cannot be
    # written, would leave a half-written folder behind.
    _check_has_gold(lake, lake_root)
    if "://" not in str(out):
        check_writable(out, "the report folder")
    result = write_report(lake, out, page_size=args.page_size, force=args.force)
    if result.unchanged:
        print("report: the lake did not change since it was written; kept as it is (--force rewrites it)",
              file=sys.stderr)
    if result.missing_tables:
        print(f"report: not computed yet: {', '.join(result.missing_tables)}", file=sys.stderr)
    print(f"report: {result.groups} groups, {result.overview_pages} overview page(s)", file=sys.stderr)
    print(result.index.resolve())
    return 0
