"""`rebalance-audit demo`: the whole job, end to end, on a real local Kafka 4.x cluster.

1. start a one-broker Apache Kafka 4.x cluster in KRaft mode on loopback (testbed,
   Kafka's default 50 `__consumer_offsets` partitions, server.log in UTC);
2. run five scripted consumer groups at the same time, each its own group and topic, real
   librdkafka consumers (one process each) writing down what they did (`DEMO_GROUPS`): a
   crash with re-consumption, an idle member, a flapping member, a cooperative rolling
   restart and a KIP-848 group; meanwhile Spark starts;
3. write the consumers' truth: `<demo dir>/truth/<group>.jsonl`, one JSON line per processed
   message (group_id, client_id, topic, partition, offset, ts_ms);
4. store the cluster's timings gold needs and the records lack (the broker's KIP-848
   session timeout and heartbeat, the classic members' heartbeat: `cluster_settings`, as
   `run --broker-properties` does), then materialize every asset: live `__consumer_offsets`
   ingestion, the broker's server.log, silver, gold, what-if, the report, and every table's
   data-quality check (a failed blocking check exits 1);
5. stop the cluster (or keep it, with --keep-broker, until Ctrl-C), and print the tables,
   the lake's findings next to the truth, the report's index and a first query.

`<demo dir>` is the folder holding the lake (./lake → ./), as for the report (./report):
`truth/`, `report/` and `demo.log` land there. The terminal gets one `[demo]` line per step
on stderr; everything else (Spark's and Dagster's output, librdkafka, Python logging and
warnings, Spark's log) goes to `<demo dir>/demo.log`, by redirecting file descriptors 1 and 2 of the
process (the Spark JVM inherits them) while the demo runs. The broker's own logs stay in its
folder (--workdir, else a temporary folder removed at the end).

Each demo run stores its rows under its own cluster name (demo-<UTC time>): a new cluster
restarts `__consumer_offsets` at offset 0, and bronze rows are keyed by (cluster,
partition, offset), so reusing a name would make the new records look already loaded.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import json
import os
import shlex
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rebalance_audit.cli import UsageError, add_common_options
from pipelines.spark import SPARK_LOG_ENV

if TYPE_CHECKING:
    from testbed.scenario import ScenarioResult


@dataclass(frozen=True)
class DemoGroup:
    group_id: str
    scenario: str       # a name of testbed.scenario.SCENARIOS
    shows: str          # what the group demonstrates

    @property
    def topic(self) -> str:
        return f"{self.group_id}-in"


DEMO_GROUPS = (
    DemoGroup("orders-range", "classic-range", "classic range: a clean leave, then a crash with re-consumption"),
    DemoGroup("orders-idle", "idle", "three members on two partitions: one idle"),
    DemoGroup("orders-flapping", "flapping", "one member restarted five times: a rebalance storm"),
    DemoGroup("orders-cooperative", "cooperative-rolling", "cooperative-sticky rolling restart"),
    DemoGroup("orders-kip848", "kip848-uniform", "KIP-848 consumer protocol, uniform assignor: a crash and a leave"),
)
TRUTH_FIELDS = ("group_id", "client_id", "topic", "partition", "offset", "ts_ms")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="run the whole job on a local Kafka 4.x cluster and print the findings next to the truth",
        description=(
            "Start a local Kafka 4.x broker (KRaft), run five consumer groups on it at once (a crash with "
            "re-consumption, an idle member, a flapping member, a cooperative and a KIP-848 group), ingest "
            "what the broker wrote (live __consumer_offsets and server.log), materialize every table and the "
            "report, stop the broker, and print the findings next to what the consumers really did. Outputs "
            "go beside the lake: truth/<group>.jsonl, report/, demo.log."
        ),
    )
    add_common_options(p)
    p.add_argument("--keep-broker", action="store_true",
                   help="leave the broker running after the run (until Ctrl-C) to query it yourself")
    p.add_argument("--workdir", metavar="DIR",
                   help="broker data and logs and the scenarios' raw files in this new or empty folder, kept "
                        "(default: a temporary folder, removed at the end)")
    p.set_defaults(func=run)


def demo_dir(lake: str) -> Path:
    """Where the demo's outputs go: the folder holding a local lake, else the current folder."""
    root = lake[len("file://"):] if lake.startswith("file://") else lake
    if "://" in root:
        return Path.cwd()
    return Path(root).resolve().parent


def _printable(text: object) -> str:
    """A string from Kafka (group, client, member ids), safe to print on a terminal."""
    s = str(text)
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


class _Console:
    """While open, file descriptors 1 and 2 of the process point at the log file (so do those
    of every child started meanwhile: the Spark JVM, Python workers); `say` and `out` write
    to the terminal's original stdout and stderr."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self._saved: dict[int, int] = {}
        self._spark_log: str | None = None

    def __enter__(self) -> "_Console":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        # O_APPEND: every writer (this process, the JVMs, the workers) adds at the end.
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        try:
            self._saved = {fd: os.dup(fd) for fd in (1, 2)}
            self.out = os.fdopen(os.dup(self._saved[1]), "w", buffering=1)
            self.err = os.fdopen(os.dup(self._saved[2]), "w", buffering=1)
            # Python logging writes to the log file itself, so that lines logged after the demo
            # (at exit: py4j, the cluster's atexit hook) do not reach the terminal either.
            self.log = os.fdopen(os.dup(log_fd), "a", buffering=1)
            for fd in (1, 2):
                os.dup2(log_fd, fd)
        finally:
            os.close(log_fd)
        # Spark's own log (a file of its own otherwise) into the demo's log as well.
        self._spark_log = os.environ.get(SPARK_LOG_ENV)
        if self._spark_log is None:
            os.environ[SPARK_LOG_ENV] = str(self.log_path)
        return self

    def __exit__(self, *exc: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)
            os.close(saved)
        self._saved = {}
        if self._spark_log is None:
            os.environ.pop(SPARK_LOG_ENV, None)
        self.out.close()
        self.err.close()

    def say(self, text: str) -> None:
        print(f"[demo] {text}", file=self.err, flush=True)
        print(f"[demo] {text}", file=sys.stderr, flush=True)  # the log file too


def run(args: argparse.Namespace) -> int:
    if args.workdir and Path(args.workdir).exists() and any(Path(args.workdir).iterdir()):
        # A used folder would restart the old broker (its groups again, under the new cluster
        # name) and the members would append to the old truth files.
        raise UsageError(f"--workdir {args.workdir} is not empty (give a new or empty folder)")
    base = demo_dir(args.lake)
    with _Console(base / "demo.log") as console:
        return _run(args, base, console)


def _run(args: argparse.Namespace, base: Path, console: _Console) -> int:
    import logging

    from assets.inprocess import blocked_message, check_summary, materialize_all, step_timings
    from assets.resources import KafkaResource, LakeResource, SourcesResource, SparkResource
    from testbed import KafkaCluster, TestbedUnavailable

    logging.basicConfig(stream=console.log, level=logging.DEBUG if args.debug else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    say = console.say
    started = time.monotonic()
    cluster_name = "demo-" + dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    say(f"outputs in {base}; Spark, Dagster and librdkafka output in {console.log_path}")
    try:
        kafka = KafkaCluster(args.workdir, brokers=1, install=True,
                             keep_workdir=bool(args.workdir or args.keep_broker))
    except TestbedUnavailable as exc:
        raise RuntimeError(f"cannot start the local Kafka cluster: {exc}") from None
    say(f"starting Apache Kafka {kafka.kafka_version} (KRaft, 1 broker, {kafka.offsets_partitions} "
        f"__consumer_offsets partitions) in {kafka.workdir}"
        + ("" if kafka.keep_workdir else " (removed at the end; --workdir keeps it)"))
    try:
        kafka.start()
        say(f"broker up at {kafka.bootstrap_servers} in {kafka.startup_seconds:.1f}s; running "
            f"{len(DEMO_GROUPS)} consumer groups at once (~40s): {', '.join(g.group_id for g in DEMO_GROUPS)}")
        spark_thread = _start_spark_in_background(args.spark_master)
        t0 = time.monotonic()
        results = _run_scenarios(kafka)
        # Read now: a temporary cluster folder (the scenarios' files) goes with the cluster.
        events = {g: _member_events(r) for g, r in results.items()}
        drivers = {g: r.driver_events() for g, r in results.items()}
        truth = _write_truth(results, events, base / "truth")
        say(f"groups done in {time.monotonic() - t0:.0f}s: "
            f"{sum(len(rows) for rows in truth.values()):,} messages processed; truth in {base / 'truth'}")
        _copy_member_logs(results)
        spark_thread.join()
        if spark_thread.error is not None:
            raise spark_thread.error
        say(f"Spark ready ({spark_thread.seconds:.0f}s, started during the scenarios); ingesting "
            "__consumer_offsets (live) and server.log, materializing every table and its quality check")
        t0 = time.monotonic()
        _store_cluster_settings(args.lake, cluster_name, kafka)
        resources = {
            "lake": LakeResource(root=args.lake),
            "spark": SparkResource(master=args.spark_master, conf=demo_spark_conf(args.spark_master)),
            # The brokers log in UTC (-Duser.timezone=UTC, testbed.broker).
            "sources": SourcesResource(cluster=cluster_name, log_paths=[str(d) for d in kafka.log_dirs],
                                       log_tz="UTC"),
            "kafka": KafkaResource(bootstrap_servers=kafka.bootstrap_servers),
        }
        outcomes = materialize_all(resources, log_level="DEBUG" if args.debug else "INFO")
        say(f"{len(outcomes.tables)} tables materialized, {len(outcomes.checks)} checks run in "
            f"{time.monotonic() - t0:.0f}s")
        print(step_timings(outcomes), file=sys.stderr, flush=True)  # into the log
        if not args.keep_broker:
            kafka.stop()
            say("broker stopped")
        else:
            say(f"broker left running at {kafka.bootstrap_servers}; Ctrl-C stops it")
    except BaseException:
        kafka.stop()
        raise
    try:
        findings = _findings(args.lake, cluster_name, results, events, drivers, truth)
        _print_result(console.out, args, base, cluster_name, outcomes, findings)
        print("\n".join(check_summary(outcomes)), file=console.out, flush=True)
        blocked = blocked_message(outcomes)
        if blocked:
            print(f"rebalance-audit demo: error: {blocked}", file=console.err, flush=True)
        say(f"finished in {time.monotonic() - started:.0f}s")
        if args.keep_broker:
            with contextlib.suppress(KeyboardInterrupt):
                while kafka.running:
                    time.sleep(1)
    finally:
        kafka.stop()
    return 1 if blocked else 0


def _store_cluster_settings(lake_root: str, cluster: str, kafka) -> None:
    """Tell gold the timings the records do not hold, as `rebalance-audit run
    --broker-properties` does: the broker's KIP-848 session timeout and heartbeat (the
    testbed lowers them to 6 s / 1 s) and the classic members' heartbeat interval."""
    from pipelines.gold import runner, settings
    from pipelines.lake import Lake
    from testbed.scenario import CLASSIC_MEMBER_DEFAULTS

    text = (kafka.brokers[0].workdir / "config" / "server.properties").read_text(errors="replace")
    row = settings.from_broker_properties(
        cluster, text, classic_heartbeat_interval_ms=int(CLASSIC_MEMBER_DEFAULTS["heartbeat.interval.ms"]))
    runner.write_cluster_settings(Lake(lake_root), [row])


# ----- the groups -------------------------------------------------------------------------
def demo_spark_conf(master: str) -> dict[str, str]:
    """The demo's lake is a few thousand rows: Spark's small-lake settings."""
    from pipelines.spark import profile_conf

    return profile_conf(master, "small-lake")


class _SparkStarter(threading.Thread):
    """Starts Spark's JVM and warms it up (a job with a Python worker) and imports Great
    Expectations while the consumers run (they mostly wait): the materialization that
    follows finds the process's session ready (`get_spark` returns the running one)."""

    def __init__(self, master: str):
        super().__init__(name="demo-spark-start", daemon=True)
        self.master = master
        self.error: BaseException | None = None
        self.seconds = 0.0

    def run(self) -> None:
        t0 = time.monotonic()
        try:
            from pipelines.spark import get_spark

            spark = get_spark(self.master, conf=demo_spark_conf(self.master))
            from pyspark.sql import functions as F

            df = spark.range(0, 1000, numPartitions=2)
            df.mapInArrow(lambda batches: batches, df.schema).groupBy((F.col("id") % 7).alias("k")).count().collect()
            import quality.gx  # noqa: F401 - Great Expectations takes seconds to import
        except BaseException as exc:  # noqa: BLE001 - re-raised on the main thread
            self.error = exc
        self.seconds = time.monotonic() - t0


def _start_spark_in_background(master: str) -> _SparkStarter:
    t = _SparkStarter(master)
    t.start()
    return t


def _run_scenarios(kafka) -> dict[str, ScenarioResult]:
    """Every demo group's scenario at once, each on its own thread."""
    from testbed.scenario import SCENARIOS, run_together

    return run_together(kafka, {g.group_id: SCENARIOS[g.scenario](topic=g.topic) for g in DEMO_GROUPS})


def _member_events(result) -> dict[str, list[dict]]:
    return {name: member.events() for name, member in result.members.items()}


def truth_rows(group_id: str, members: dict[str, list[dict]]) -> list[dict]:
    """One row per message a member of the group processed, in time order."""
    rows = []
    for events in members.values():
        config = next((e.get("config") or {} for e in events if e["event"] == "start"), {})
        for e in events:
            if e["event"] == "processed":
                rows.append({"group_id": config.get("group_id", group_id),
                             "client_id": config.get("client_id"), "topic": e["topic"],
                             "partition": e["partition"], "offset": e["offset"], "ts_ms": e["ts"]})
    rows.sort(key=lambda r: (r["ts_ms"], r["topic"], r["partition"], r["offset"]))
    return rows


def _write_truth(results: dict, events: dict, folder: Path) -> dict[str, list[dict]]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for group in DEMO_GROUPS:
        rows = truth_rows(group.group_id, events[group.group_id])
        # The file name is the demo's own constant, never a string read back from Kafka.
        tmp = folder / f".{group.group_id}.jsonl.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({k: r[k] for k in TRUTH_FIELDS}) + "\n")
        tmp.replace(folder / f"{group.group_id}.jsonl")
        out[group.group_id] = rows
    return out


def _copy_member_logs(results: dict) -> None:
    """The members' librdkafka lines (`<member>.stderr` in the scenario folders, removed with
    a temporary workdir) into the demo log."""
    for group_id, result in results.items():
        for name in result.members:
            path = Path(result.workdir) / f"{name}.stderr"
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            if text.strip():
                sys.stderr.write(f"---- librdkafka, group {group_id}, member {name} ({path}) ----\n{text}\n")
    sys.stderr.flush()


# ----- findings next to the truth ---------------------------------------------------------
@dataclass
class GroupFindings:
    group: DemoGroup
    reconsumed: int                 # truth: processings beyond the first, over every offset
    estimated: int                  # lake: sum of duplicate_windows.estimated_records
    bound: int                      # lake: sum of end_offset_high - start_offset
    windows: dict[str, int]         # lake: duplicate windows per cause
    idle_found: list[str]           # lake: idle members (not transient), one client id per member id
    idle_transient: int             # lake: transiently idle member-generations
    idle_truth: list[str]           # truth: members idle through a settled period, by client id
    episodes: int                   # lake: rebalance_episodes rows
    logical: int                    # lake: logical rebalances (not into or out of Empty)
    joins: int
    leaves: int
    crashes: int
    storms: list[dict]              # lake: rebalance_storms rows
    restarted_truth: dict[str, int]  # truth: client ids started more than once → times

    def lines(self) -> list[str]:
        g = self.group
        causes = ", ".join(f"{c} {n}" for c, n in sorted(self.windows.items())) or "none"
        out = [f"{g.group_id} ({g.shows})",
               f"  re-consumed {self.reconsumed} records; estimated {self.estimated}, bound {self.bound} "
               f"(duplicate windows: {causes})"]
        found = ", ".join(self.idle_found) or "none"
        truth = ", ".join(self.idle_truth) or "none"
        transient = f" (+{self.idle_transient} transient)" if self.idle_transient else ""
        out.append(f"  idle members: found {len(self.idle_found)} [{found}]{transient}; "
                   f"truth {len(self.idle_truth)} [{truth}]")
        out.append(f"  episodes: {self.episodes} ({self.logical} besides start-up and shut-down); membership "
                   f"changes in the truth: {_n(self.joins, 'join')}, {_n(self.leaves, 'clean leave')}, "
                   f"{_n(self.crashes, 'crash', 'crashes')}")
        if self.storms:
            for s in self.storms:
                flappers = ", ".join(_printable(m) for m in (s.get("flapping_members") or [])) or "none"
                out.append(f"  storm: {_n(s['episodes'], 'rebalance')} from {_hms(s['started_at'])} to "
                           f"{_hms(s['ended_at'])} UTC, trigger {_printable(s.get('dominant_trigger'))}, "
                           f"flapping members [{flappers}]")
        else:
            out.append("  storms: none")
        restarted = ", ".join(f"{_printable(c)} x{n}" for c, n in sorted(self.restarted_truth.items())) or "none"
        out.append(f"  started more than once (truth): [{restarted}]")
        return out


def _n(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _hms(ts) -> str:
    return ts.strftime("%H:%M:%S") if hasattr(ts, "strftime") else str(ts)


def _findings(lake_root: str, cluster: str, results: dict, member_events: dict, driver_events: dict,
              truth: dict[str, list[dict]]) -> list[GroupFindings]:
    """The lake's gold tables of this run's cluster (read with delta-rs, no Spark job) next to
    the consumers' truth, per demo group."""
    import pyarrow.dataset as ds

    from pipelines.lake import Lake

    lake = Lake(lake_root)

    def rows(table: str) -> dict[str, list[dict]]:
        by_group: dict[str, list[dict]] = collections.defaultdict(list)
        if lake.exists(table):
            for r in lake.read_arrow(table, filter=ds.field("cluster") == cluster).to_pylist():
                by_group[r["group_id"]].append(r)
        return by_group

    windows, idle, episodes, storms = (rows(t) for t in
                                       ("duplicate_windows", "idle_consumers", "rebalance_episodes", "rebalance_storms"))
    out = []
    for g in DEMO_GROUPS:
        result = results[g.group_id]
        events = member_events[g.group_id]
        seen = collections.Counter((r["topic"], r["partition"], r["offset"]) for r in truth[g.group_id])
        w = windows.get(g.group_id, [])
        i = idle.get(g.group_id, [])
        e = episodes.get(g.group_id, [])
        idle_rows = [r for r in i if not r.get("transient")]
        # A KIP-848 idle row may lack the client id: the truth's member ids name the process.
        known = {e.get("member_id"): _client_id(ev) for ev in events.values() for e in ev if e.get("member_id")}
        idle_members = {r.get("member_id"): r.get("client_id") or known.get(r.get("member_id")) or r.get("member_id")
                        for r in idle_rows}
        fates = collections.Counter(m.fate for m in result.members.values())
        starts = collections.Counter(_client_id(ev) for ev in events.values())
        out.append(GroupFindings(
            group=g,
            reconsumed=sum(n - 1 for n in seen.values() if n > 1),
            estimated=sum(int(r["estimated_records"] or 0) for r in w),
            bound=sum(max(0, int(r["end_offset_high"] or 0) - int(r["start_offset"] or 0)) for r in w
                      if r["end_offset_high"] is not None and r["start_offset"] is not None),
            windows=dict(collections.Counter(str(r.get("cause")) for r in w)),
            idle_found=sorted(_printable(label) for label in idle_members.values()),
            idle_transient=len(i) - len(idle_rows),
            idle_truth=sorted(_client_id(events[name]) or name
                              for name in _idle_in_truth(events, driver_events[g.group_id])),
            episodes=len(e),
            logical=len({r["logical_rebalance_id"] for r in e
                         if r.get("phase") == 1 and not r.get("empty_transition")}),
            joins=len(result.members), leaves=fates.get("left", 0), crashes=fates.get("crashed", 0),
            storms=sorted(storms.get(g.group_id, []), key=lambda s: str(s["started_at"])),
            restarted_truth={c: n for c, n in starts.items() if c is not None and n > 1},
        ))
    return out


def _client_id(events: list[dict]) -> str | None:
    return next((e.get("config") or {} for e in events if e["event"] == "start"), {}).get("client_id")


def _owned_at(events: list[dict], ts: int) -> set:
    """What a member owned at `ts`, from its own assign / revoke / lost events."""
    owned: set = set()
    for e in events:
        if e["ts"] > ts:
            break
        parts = {tuple(p) for p in e.get("partitions") or ()}
        if e["event"] == "assign":
            owned |= parts
        elif e["event"] in ("revoke", "lost"):
            owned -= parts
    return owned


def _idle_in_truth(members: dict[str, list[dict]], driver: list[dict]) -> list[str]:
    """Members that owned nothing through a settled period: when the scenario found the group
    settled (every partition owned once), the member held nothing by its own events, and it
    got no partition until the next membership change (a join, leave, crash or stall) or the
    end. A member waiting a moment for a cooperative or KIP-848 handover is not idle."""
    changes = sorted(e["ts"] for e in driver if e["event"] in ("joined", "left", "killed", "stall"))
    idle = set()
    for settled in (e for e in driver if e["event"] == "settled"):
        until = next((t for t in changes if t > settled["ts"]), None)
        for name in settled.get("assignment") or {}:
            events = members.get(name)
            if not events or _owned_at(events, settled["ts"]):
                continue
            got = any(e["event"] == "assign" and e.get("partitions") and e["ts"] > settled["ts"]
                      and (until is None or e["ts"] < until) for e in events)
            if not got:
                idle.add(name)
    return sorted(idle)


# ----- output -----------------------------------------------------------------------------
def duplicate_windows_query(cluster: str) -> str:
    # Cluster names are letters, digits, '.', '_' and '-' only (pipelines.ingest.bronze.check_cluster):
    # safe inside the SQL string literal and the shell's double quotes; no backticks, no '$'.
    return ("SELECT group_id, topic, partition, cause, estimated_records, end_offset_high - start_offset AS bound "
            f"FROM duplicate_windows WHERE cluster = '{cluster}' ORDER BY estimated_records DESC")


def _print_result(out, args, base: Path, cluster: str, outcomes, findings: list[GroupFindings]) -> None:
    from dashboards.report import default_out_dir

    lake = args.lake if "://" in args.lake else os.path.abspath(args.lake)
    print(f"lake: {lake}", file=out)
    print(f"cluster: {cluster}  (groups {', '.join(g.group_id for g in DEMO_GROUPS)})", file=out)
    tables = [o for o in outcomes if o.uri]  # the report is an asset, not a table: printed below
    width = max(len(o.asset) for o in tables)
    for o in tables:
        rows = "-" if o.rows_total is None else f"{o.rows_total:,}"
        print(f"  {o.asset.ljust(width)}  {rows:>9} rows  {o.uri or ''}", file=out)
    print(f"findings vs the consumers' truth ({base / 'truth'}/<group>.jsonl):", file=out)
    for f in findings:
        for line in f.lines():
            print(f"  {line}", file=out)
    index = default_out_dir(args.lake).resolve() / "index.html"
    print(f"report: {index}" if index.is_file() else "report: not written (see the checks below)", file=out)
    print(f"log: {base / 'demo.log'}", file=out)
    print("first query to try:", file=out)
    print(f'  rebalance-audit sql "{duplicate_windows_query(cluster)}" --lake {shlex.quote(lake)}', file=out)
    out.flush()
