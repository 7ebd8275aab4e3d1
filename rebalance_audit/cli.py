"""The `rebalance-audit` command line (README, "Commands").

Each sub-command lives in its own module under `rebalance_audit/commands/` and exposes
`register(subparsers)`, which adds its parser and sets `func` to a callable taking the
parsed arguments and returning an exit code. Exit codes: 0 success, 1 failure (one line
on stderr, a traceback only with --debug), 2 bad usage (argparse's own convention).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from pipelines.process_exit import exit_now

# Sub-command modules, in the order `--help` lists them.
COMMANDS = (
    "decode",
    "parse_logs",
    "ingest",
    "run",
    "sql",
    "shell",
    "whatif",
    "assign",
    "report",
    "maintain",
    "simulate",
    "demo",
)


class UsageError(Exception):
    """Bad usage discovered after parsing (exit code 2)."""


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return v


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """Options every lake-facing command shares (README, "Commands")."""
    parser.add_argument(
        "--lake",
        default=os.environ.get("REBALANCE_AUDIT_LAKE", "./lake"),
        help="lake folder or URI (default ./lake, or $REBALANCE_AUDIT_LAKE)",
    )
    parser.add_argument(
        "--spark-master",
        default=os.environ.get("REBALANCE_AUDIT_SPARK_MASTER", "local[*]"),
        help="Spark master URL (default local[*])",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rebalance-audit",
        description="Audit Kafka consumer-group rebalances from __consumer_offsets and broker logs.",
    )
    parser.add_argument("--version", action=_Version, help="print the version and its engines' versions, then exit")
    debug_help = "print tracebacks on failure, and the libraries' log lines (librdkafka's retries...)"
    parser.add_argument("--debug", action="store_true", help=debug_help)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"rebalance_audit.commands.{name}").register(sub)
    # `rebalance-audit run --debug` as well as `rebalance-audit --debug run`: SUPPRESS keeps
    # the top-level value when the sub-command does not repeat it.
    for command in sub.choices.values():
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help)
    return parser


def version_line() -> str:
    """This tool's version and those of the engines that decide what it computes."""
    from importlib import metadata

    def installed(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    line = f"rebalance-audit {installed('rebalance-audit')}"
    engines = [(name, installed(dist)) for name, dist in (
        ("pyspark", "pyspark"), ("delta-spark", "delta-spark"), ("deltalake", "deltalake"),
        ("confluent-kafka", "confluent-kafka"), ("dagster", "dagster"))]
    try:
        import confluent_kafka

        engines.append(("librdkafka", confluent_kafka.libversion()[0]))
    except ImportError:
        pass
    return line + " (" + ", ".join(f"{n} {v}" for n, v in engines) + f"; Python {sys.version.split()[0]})"


class _Version(argparse.Action):
    """`--version`: reads the installed versions only when asked (no import cost otherwise)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def main(argv: list[str] | None = None, *, as_process: bool = False) -> int:
    """Run one command; returns its exit code. ``as_process`` (the console script and
    ``python -m``): commands that set ``exit_at_end`` end the process right after they
    return, see ``pipelines.process_exit.exit_now``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.debug and args.command != "demo":  # the demo sends its own to its log file
        import logging

        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    code = _run(args)
    if as_process and getattr(args, "exit_at_end", False):
        exit_now(code)
    return code


def script() -> None:
    """The ``rebalance-audit`` console script."""
    sys.exit(main(as_process=True))


def _first_line(exc: BaseException) -> str:
    """The line of an error's text that says what happened.

    A Java error from Spark reads "An error occurred while calling o42.sql.\n: java.…Exception:
    what" and then the whole stack: its `: `-line is the one. An empty message (a bare
    AssertionError) is at least named by its type."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    java = [line[2:] for line in lines if line.startswith(": ")]
    if java:
        return java[0]
    return lines[0] if lines else type(exc).__name__


def one_line(exc: BaseException, args: argparse.Namespace) -> str:
    """What the error line says: the cause in the user's terms, then the error's own first line."""
    from rebalance_audit.preflight import os_cause

    first = _first_line(exc)
    cause = os_cause(exc)
    if cause is None:
        return first
    lake = getattr(args, "lake", None)
    return f"{cause} (lake {lake}): {first}" if lake else f"{cause}: {first}"


def _say(line: str) -> None:
    """An error line on stderr; on a terminal, a group id's control characters in it are
    shown as escapes (rebalance_audit/terminal.py)."""
    from rebalance_audit.terminal import terminal_safe

    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    print(terminal_safe(line) if tty else line, file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    from rebalance_audit.preflight import check

    try:
        check(args)
        return int(args.func(args) or 0)
    except UsageError as exc:
        _say(f"rebalance-audit {args.command}: {exc}")
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error of ours.
        sys.stderr.close()
        return 0
    except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
        if args.debug:
            raise
        _say(f"rebalance-audit {args.command}: error: {one_line(exc, args)}")
        # A JVM that died says only "Connection refused" through PySpark: its log says why.
        from pipelines.jvm_exit import describe
        from pipelines.spark import spark_log_file

        ended = describe(spark_log_file())
        if ended:
            _say(f"rebalance-audit {args.command}: {ended}")
        return 1


if __name__ == "__main__":
    # Run through the package module, so `python -m rebalance_audit.cli` and the
    # `rebalance-audit` script share one set of classes (UsageError above all).
    from rebalance_audit.cli import script

    script()
