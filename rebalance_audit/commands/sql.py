"""`rebalance-audit sql "QUERY"`: Spark SQL over every table of the lake.

Each Delta table of the lake is registered as a temporary view named like the table, so
`SELECT group_id, count(*) FROM offset_commits GROUP BY group_id` works as written.
Output: an aligned text table (default), CSV with a header, or JSON lines.
Note: `partition` and `offset` are SQL keywords; quote them as `partition` / `offset`
(backticks) where Spark's parser needs it.
"""
from __future__ import annotations

import argparse
import base64
import csv
import datetime as dt
import decimal
import json
import re
import sys

from rebalance_audit.cli import UsageError, add_common_options
from rebalance_audit.terminal import json_terminal_safe, terminal_safe


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sql",
        help="run Spark SQL over every table of the lake",
        description="Run one Spark SQL query over the lake; every table is a view by its name.",
    )
    add_common_options(p)
    p.add_argument("query", metavar="QUERY", nargs="?",
                   help='the SQL text, e.g. "SELECT * FROM rebalance_episodes LIMIT 10"')
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format (default table)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="print at most N rows (default: all; the table format defaults to 1000)")
    p.add_argument("--escape", choices=("auto", "always", "never"), default="auto",
                   help="show control and bidi characters of values as escapes (\\x1b, \\u202e): "
                        "auto (default) when printing to a terminal")
    p.add_argument("--local", action="store_true",
                   help="run the query in a Spark of this process, not on the warm sql server (see below)")
    p.add_argument("--stop-server", action="store_true",
                   help="stop the warm sql server of this user and Spark master, and exit")
    p.epilog = ("The first query starts a Spark Connect server in the background (127.0.0.1 only, a token per "
                "user) and later queries reuse it: a second or two instead of a Spark start. It stops after "
                "$REBALANCE_AUDIT_SQL_IDLE_S seconds without a query (default 1800), or with --stop-server; "
                "REBALANCE_AUDIT_SQL_SERVER=off always runs queries in-process, as --local does.")
    p.set_defaults(func=run)


def _json_value(v):
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, (dt.datetime, dt.date)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if hasattr(v, "asDict"):
        return {k: _json_value(x) for k, x in v.asDict().items()}
    return v


def _text(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, (bytes, bytearray)):
        return "0x" + bytes(v).hex()
    if isinstance(v, (dict, list, tuple)) or hasattr(v, "asDict"):
        return json.dumps(_json_value(v), ensure_ascii=False)
    return str(v)


def _as_is(text: str) -> str:
    return text


def _escaping(mode: str, out) -> bool:
    """Escape values? On a terminal by default: raw ESC, NUL or U+202E bytes of a group id
    would drive the terminal or disguise the text (rebalance_audit/terminal.py)."""
    if mode != "auto":
        return mode == "always"
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def run(args: argparse.Namespace) -> int:
    import os

    from pipelines.spark import DEFAULT_MASTER, MASTER_ENV, get_spark
    from rebalance_audit import sql_server

    master = args.spark_master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER
    if args.stop_server:
        print("sql server stopped" if sql_server.stop(master) else "no sql server was running", file=sys.stderr)
        return 0
    if not (args.query or "").strip():
        raise UsageError("empty query")
    lake_root = args.lake
    if "://" not in lake_root and not os.path.isdir(lake_root):
        raise UsageError(f"no lake at {lake_root} (run `rebalance-audit ingest ...` first, or pass --lake)")
    local = args.local or os.environ.get(sql_server.SERVER_ENV) == "off"
    if local:
        spark = get_spark(master)
    else:
        try:
            spark = sql_server.connect(master)
        except sql_server.SqlServerError as exc:
            print(f"rebalance-audit sql: {exc}; running the query here instead", file=sys.stderr)
            spark, local = get_spark(master), True
    try:
        return _query(args, spark, lake_root)
    finally:
        if not local:
            sql_server.touch(master)


def _query(args: argparse.Namespace, spark, lake_root: str) -> int:
    from pipelines.lake import Lake

    lake = Lake(lake_root, spark=spark)
    # Only the tables the query names: each view is a Delta snapshot to load, and a query
    # reads a few of the lake's thirty tables. A table's name is an identifier, so it is
    # in the text as a word (plain or in backticks) wherever the query reads it.
    lake.register_views(spark, only=set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", args.query.lower())))
    try:
        df = spark.sql(args.query)
        df.schema  # noqa: B018 (analysis errors surface here over Spark Connect)
    except Exception as exc:  # AnalysisException / ParseException: the user's query
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"query failed: {first}") from None
    # Timestamps as UTC text formatted by Spark: collecting them would turn them into naive
    # datetimes in the Python process's local zone.
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    if any(isinstance(f.dataType, TimestampType) for f in df.schema.fields):
        df = df.select(*[
            F.date_format(F.col(f"`{f.name}`"), "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'").alias(f.name)
            if isinstance(f.dataType, TimestampType) else F.col(f"`{f.name}`")
            for f in df.schema.fields
        ])
    limit = args.limit if args.limit is not None else (1000 if args.format == "table" else None)
    if limit is not None:
        df = df.limit(limit)
    names = df.columns
    out = sys.stdout
    escape = _escaping(args.escape, out)
    if args.format == "json":
        shown = json_terminal_safe if escape else _as_is
        for row in df.toLocalIterator():
            out.write(shown(json.dumps({k: _json_value(row[i]) for i, k in enumerate(names)}, ensure_ascii=False)))
            out.write("\n")
        return 0
    cell = terminal_safe if escape else _as_is
    names = [cell(n) for n in names]
    if args.format == "csv":
        w = csv.writer(out)
        w.writerow(names)
        for row in df.toLocalIterator():
            w.writerow(["" if v is None else cell(_text(v)) for v in row])
    else:
        rows = [[cell(_text(v)) for v in row] for row in df.collect()]
        widths = [len(n) for n in names]
        for r in rows:
            widths = [max(w, len(c)) for w, c in zip(widths, r)]
        out.write(" | ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip() + "\n")
        out.write("-+-".join("-" * w for w in widths) + "\n")
        for r in rows:
            out.write(" | ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")
        print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})", file=sys.stderr)
    return 0
