"""`rebalance-audit maintain`: compact and vacuum every table of the lake (Delta's OPTIMIZE
and VACUUM through delta-spark), and drop position runs no table needs any more.

Run it weekly, or let Dagster's `maintain_lake_weekly` schedule do it. It holds the lake's
writer lock, so it waits for a running `run` or ingestion (and they for it).
"""
from __future__ import annotations

import argparse
import os
import sys

from rebalance_audit.cli import UsageError, add_common_options, positive_float


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "maintain",
        help="compact (OPTIMIZE) and vacuum (VACUUM) every lake table",
        description="Compact each table's small files (OPTIMIZE: the same rows in fewer files; the next runs "
                    "see no change) and delete files no table version within the retention needs (VACUUM), "
                    "then drop position runs no table names any more.",
    )
    add_common_options(p)
    p.add_argument("--retain-hours", type=positive_float, metavar="H",
                   help="keep files (and time travel) this far back (default: each table's "
                        "delta.deletedFileRetentionDuration, 168 hours unless set); below a table's "
                        "retention Delta refuses")
    p.add_argument("--table", action="append", metavar="NAME", help="only this table (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="compact nothing, delete nothing: list what VACUUM would delete")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if "://" not in args.lake and not os.path.isdir(args.lake):
        raise UsageError(f"no lake at {args.lake}")
    from pipelines.lake import Lake
    from pipelines.lake.maintenance import maintain
    from pipelines.spark import get_spark

    lake = Lake(args.lake, spark=lambda: get_spark(args.spark_master))
    unknown = sorted(set(args.table or ()) - set(lake.tables()))
    if unknown:
        raise UsageError(f"no table {', '.join(map(repr, unknown))} in the lake at {args.lake}")

    def say(text: str) -> None:
        print(f"rebalance-audit maintain: {text}", file=sys.stderr, flush=True)

    with lake.writer_lock(say=say):
        done, _ = maintain(lake, args.retain_hours, args.table, args.dry_run, say=say)
        if not args.table:
            from quality.runner import prune_results

            results = prune_results(lake, args.retain_hours, args.dry_run)
            say(f"quality: {results} validation results older than the retention "
                f"{'would be dropped' if args.dry_run else 'dropped'} (quality_results keeps every outcome)")
    verb = "would vacuum" if args.dry_run else "vacuumed"
    print(f"{'table':<32}{'files before':>14}{'after':>8}{verb:>14}{'seconds':>9}")
    for t in done:
        print(f"{t.table:<32}{t.files_before:>14}{t.files_after:>8}{t.files_vacuumed:>14}{t.seconds:>9}")
    return 0
