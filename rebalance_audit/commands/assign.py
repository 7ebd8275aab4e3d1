"""`rebalance-audit assign --assignor NAME`: run one assignor over problems read as JSON lines.

stdin: one problem per line, in the shape of a generation record of ../shared/assignor-vectors
(topics, partition racks, members with subscriptions / owned partitions / generation / user data,
member iteration order, previous target assignment for server-side assignors); outputs in the
record (`assignment`, `metrics`, ...) are ignored. stdout: one line per input line, in order:
`{"assignment": {member_id: [[topic, [partitions...]], ...]}}` or `{"error": "..."}` (a bad line,
or the assignor refused the problem as Kafka would). Blank lines are skipped.
"""
from __future__ import annotations

import argparse
import json
import sys

from rebalance_audit.cli import UsageError


def register(subparsers) -> None:
    from pipelines.assignors import ASSIGNORS

    p = subparsers.add_parser(
        "assign",
        help="run a Kafka assignor (or a historical model) over assignment problems on stdin",
        description=(
            "Read assignment problems as JSON lines on stdin and print one JSON line per problem: "
            "{\"assignment\": {member: [[topic, [partitions]], ...]}} or {\"error\": \"...\"}. "
            f"Assignors: {', '.join(ASSIGNORS)}."
        ),
    )
    p.add_argument("--assignor", required=True, metavar="NAME", help=f"one of: {', '.join(ASSIGNORS)}")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.assignors import ASSIGNORS, AssignorError, assign

    if args.assignor not in ASSIGNORS:
        raise UsageError(f"unknown assignor {args.assignor!r}; choose one of: {', '.join(ASSIGNORS)}")
    out = sys.stdout
    write = out.write
    dumps = json.dumps
    errors = 0
    for lineno, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            problem = json.loads(line)
        except json.JSONDecodeError as exc:
            errors += 1
            write(dumps({"error": f"line {lineno}: not JSON: {exc.msg}"}) + "\n")
            continue
        try:
            write(dumps({"assignment": assign(args.assignor, problem)}, separators=(",", ":")) + "\n")
        except AssignorError as exc:
            errors += 1
            write(dumps({"error": str(exc)}) + "\n")
        except RecursionError:
            errors += 1
            write(dumps({"error": f"line {lineno}: problem nested too deeply"}) + "\n")
    out.flush()
    return 0
