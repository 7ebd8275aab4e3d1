"""What each stage after bronze reads and writes, declared once.

A `Stage` names the tables it writes (its Dagster assets), the tables it reads, and the
positions it commits with its rows (pipelines/lake/positions.py). Everything else reads
these declarations: the Dagster dependencies (`deps_of`), the inputs the incremental plans
of gold and what-if watch (`Stage.watched`), the tables the report reads, and the table in
docs/orchestration.md (`python -m pipelines.stages --write`). No Spark import here.

To add a derived table: write its transformation, declare it here (in its stage's
`outputs`, or a new `Stage` in `STAGES`), and give it its checks (quality/); see
docs/orchestration.md, "Adding a derived table".
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pipelines.lake.positions import Changes, no_rewrites
from pipelines.lake.positions import changes as input_changes


@dataclass(frozen=True, eq=False)
class Stage:
    """One step after bronze.

    `tables` are the tables it writes, in the order it writes them, each with what one of
    its rows is (its Dagster asset's description); `reads` are the tables its job reads (its
    Dagster dependencies); `settings` those of them that hold settings, not history: tracked
    whole (a change rebuilds everything), not watched for the groups they touch;
    `whole`: its outputs are derived anew from its inputs on every change (whole, or the
    groups with new input rows), not appended to, so a reader watches this stage's inputs
    (their appends say which groups changed) instead of its outputs. Its
    commits carry positions of `writer` (none: ""), keyed `prefix + <table>` for each
    watched input and setting, and `prefix + <key>` for each of `extra_keys` (fingerprints,
    format versions)."""

    name: str
    tables: Mapping[str, str]
    reads: tuple[str, ...]
    writer: str = ""
    prefix: str = ""
    settings: tuple[str, ...] = ()
    extra_keys: tuple[str, ...] = ()
    whole: bool = False

    @property
    def outputs(self) -> tuple[str, ...]:
        """The tables it writes, in order."""
        return tuple(self.tables)

    def deps(self) -> tuple[str, ...]:
        """The Dagster dependencies: what it reads."""
        return self.reads

    def watched(self) -> tuple[str, ...]:
        """The inputs whose versions its positions record: what it reads, a table some stage
        rebuilds whole replaced by that stage's watched inputs (the ones not read directly),
        settings apart; in declaration order, once each."""
        out: list[str] = []
        for t in self.reads:
            if t in self.settings:
                continue
            whole = [s for s in STAGES if s.whole and t in s.outputs]
            for u in [u for s in whole for u in s.watched() if u not in self.reads] if whole else [t]:
                if u not in out:
                    out.append(u)
        return tuple(out)

    def versions(self, lake) -> dict[str, int]:
        """The Delta version of each watched input the lake has: its current one, except for
        an input watched in place of a table rebuilt whole, where it is the version that
        table was last built from (its positions). What this stage reads is that table, so
        if it runs before the rebuild (a step materialized alone), the rebuild's new rows
        are still ahead of its positions and its next run picks them up. Before the table's
        first build those inputs have no version here: when it appears, they do."""
        out: dict[str, int] = {}
        for t in self.reads:
            if t in self.settings:
                continue
            whole = next((s for s in STAGES if s.whole and t in s.outputs), None)
            if whole is None:
                if lake.exists(t):
                    out.setdefault(t, lake.version(t))
                continue
            if not lake.exists(t):
                continue
            built = lake.positions(t, whole.writer)
            for u in whole.watched():
                if u in self.reads or not lake.exists(u):
                    continue
                # A table that carries no positions (written before they existed): the inputs' current versions.
                out.setdefault(u, built.get(whole.prefix + u, lake.version(u)))
        return {t: out[t] for t in self.watched() if t in out}

    def positions(self, versions: Mapping[str, int]) -> dict[str, int]:
        """{prefix + table: version} for the given input versions."""
        return {self.prefix + t: v for t, v in versions.items()}

    def consumed(self, positions: Mapping[str, int]) -> dict[str, int]:
        """The input versions a map of this stage's positions records ({table: version})."""
        return {t: positions[self.prefix + t] for t in self.watched() if self.prefix + t in positions}

    def changes(self, lake, consumed: Mapping[str, int], now: Mapping[str, int] | None = None,
                follows_rewrite: Callable[[str, Mapping[str, Mapping]], bool] = no_rewrites,
                ) -> Changes:
        """What moved in the watched inputs between the versions this stage `consumed` and
        `now` (default: `versions(lake)`): `pipelines.lake.positions.changes`, the rule every
        incremental stage decides by."""
        return input_changes(lake, consumed, self.versions(lake) if now is None else now, follows_rewrite)

    def position_keys(self) -> tuple[str, ...]:
        """Every key its positions can hold (an input absent from the lake has none)."""
        return tuple(self.prefix + k for k in (*self.watched(), *self.settings, *self.extra_keys))


SILVER_PREFIX = "silver:"

OFFSETS_SILVER = Stage(
    "offsets_silver",
    tables={
        "offset_commits": "One offset commit of a group for one partition, as the coordinator stored it "
                          "(transactional ones with their producer).",
        "group_generations": "One generation of a classic group: protocol, leader, members, when it was stored "
                             "(an incarnation counts the group's lives).",
        "member_assignments": "One member of a classic group's generation, with the partitions it was assigned.",
        # KIP-848 (consumer protocol) groups
        "consumer_group_epochs": "One epoch of a KIP-848 group (its metadata record).",
        "consumer_group_members": "One KIP-848 member's subscription record: client, rack, assignor, topics.",
        "target_assignment_epochs": "The target assignment epoch a KIP-848 group's coordinator computed.",
        "target_assignment_member_deltas": "One member's part of a KIP-848 target assignment, as its record stored it.",
        "current_assignments": "A KIP-848 member's current assignment: epoch, state, owned and pending partitions.",
        "topic_ids": "A topic's id and name (KIP-848 records name topics by id), from records or live metadata.",
        # share and streams groups, kept whole
        "other_group_records": "A share (KIP-932) or streams (KIP-1071) group record, kept whole with its kind "
                               "and type.",
    },
    reads=("offsets_records",),
    writer=SILVER_PREFIX + "offsets_records", prefix=SILVER_PREFIX,
)
# topic_ids also takes the names live ingestion sampled (from Kafka 4.1 no record has them):
# rows keyed by topic id and inserted once, no positions. Runs in the offsets_silver asset.
TOPIC_NAMES = Stage("topic_names", tables={"topic_ids": OFFSETS_SILVER.tables["topic_ids"]},
                    reads=("topic_metadata",))
EVENTS_SILVER = Stage(
    "events_silver",
    tables={"coordinator_events": "One typed group-coordinator event parsed from a server.log line."},
    reads=("coordinator_log_lines",),
    writer=SILVER_PREFIX + "coordinator_log_lines", prefix=SILVER_PREFIX,
)
TARGET_ASSIGNMENTS = Stage(
    "target_assignments_silver",
    tables={"target_assignments": "Each KIP-848 group's full target assignment per epoch (derived from the epoch and "
                                   "delta records; the groups with new ones recomputed)."},
    reads=("target_assignment_epochs", "target_assignment_member_deltas", "topic_ids"),
    writer=SILVER_PREFIX + "target_assignments", prefix=SILVER_PREFIX, whole=True,
)
BROKER_CLOCKS = Stage(
    "broker_clocks_silver",
    tables={"broker_clocks": "One broker's wall clock against its cluster's: the offset measured from the lines "
                             "every broker logs at one metadata change, and the offset gold takes off the times that "
                             "broker wrote (0 within the measure's tolerance)."},
    reads=("coordinator_events",),
    writer=SILVER_PREFIX + "broker_clocks", prefix=SILVER_PREFIX,
)
GOLD = Stage(
    "gold_tables",
    tables={
        "ownership_intervals": "One partition owned by one member from one assignment to the next: who consumed "
                               "what, when.",
        "commit_attribution": "Each offset commit with the member that owned its partition when it was written.",
        "rebalance_episodes": "One logical rebalance of a group: trigger, generations or epochs it spanned, duration, "
                              "partitions moved and revoked, members joined and left.",
        "duplicate_windows": "Offsets at risk of being consumed twice at a handover or rewind: from the last commit "
                             "to where the old owner stopped, with the cause and an estimate of the records.",
        "skip_windows": "Offsets possibly never processed: a commit that jumped past records, or past the log end.",
        "commit_anomalies": "A partition's commits going backwards (rewind), repeating one offset (stall) or "
                            "ceasing (stop).",
        "idle_consumers": "A member that held no partition for a generation or epoch, with the cause.",
        "rebalance_storms": "At least K logical rebalances of a group inside W minutes.",
        "coverage_gaps": "Stretches of a group's history the lake cannot see (compaction, retention, a missing "
                         "log): never counted as failed rebalances.",
        "consumer_lag": "How far a group's committed offset trailed the log end on one partition at one sample of "
                        "the log-end offsets (live ingestion): kafka-consumer-groups' LAG, as history.",
        # folds the tables above (pipelines/gold/summary.py), written last
        "group_summary": "One consumer group's figures, each defined once: logical rebalances, time rebalancing and "
                         "unconsumed (null: unknown), partitions moved and revoked, records at risk, idle members "
                         "(transient ones apart), storms, gaps, lag; what every report page and tile shows.",
    },
    # The GoldInputs fields (the first three required), then bronze: where the offsets have holes.
    reads=("offset_commits", "group_generations", "member_assignments", "consumer_group_epochs",
           "consumer_group_members", "current_assignments", "target_assignments", "coordinator_events", "topic_ids",
           "partition_end_offsets", "cluster_settings", "broker_clocks", "offsets_records"),
    writer="gold", prefix="gold:",
    # Per-cluster settings: given (`run --broker-properties`, the sources resource) or read from
    # the brokers' logged configuration, in the bronze_ingest step; and the brokers' clock
    # offsets. Either changing rebuilds every gold table.
    settings=("cluster_settings", "broker_clocks"),
    extra_keys=("params", "format"),
)
WHATIF = Stage(
    "whatif_tables",
    tables={
        "whatif_episodes": "One replayed round of a group's history under one assignor: members, partitions "
                           "moved and revoked, balance, next to what happened.",
        "whatif_summary": "Per group, incarnation, segment and assignor: the replay's totals beside the actual "
                          "ones.",
    },
    # The WhatifInputs fields.
    reads=("group_generations", "member_assignments", "offset_commits", "coordinator_events",
           "consumer_group_members", "current_assignments", "target_assignments", "topic_ids", "rebalance_episodes"),
    writer="whatif", prefix="whatif:",
    extra_keys=("assignors",),
)
REPORT = Stage(
    "sre_report",
    # HTML pages, not a lake table
    tables={"sre_report": "Overview of every consumer group and one page per group (ownership timeline, "
                          "rebalances, duplicate windows, idle members, storms, commit rate, what-if), as "
                          "offline HTML."},
    # Silver: the tables every group appears in (member_assignments holds the same groups as
    # group_generations, row by member). Then gold's and what-if's: those may be absent.
    reads=("group_generations", "offset_commits", "consumer_group_epochs",
           "rebalance_episodes", "ownership_intervals", "duplicate_windows", "skip_windows", "idle_consumers",
           "rebalance_storms", "commit_anomalies", "coverage_gaps", "consumer_lag", "group_summary",
           "commit_attribution", "whatif_summary"),
)

STAGES = (OFFSETS_SILVER, TOPIC_NAMES, EVENTS_SILVER, TARGET_ASSIGNMENTS, BROKER_CLOCKS, GOLD, WHATIF, REPORT)


def deps_of(table: str) -> tuple[str, ...]:
    """The Dagster dependencies of the asset `table`: what every stage writing it reads."""
    out: list[str] = []
    for s in STAGES:
        if table in s.outputs:
            out += [t for t in s.deps() if t not in out]
    return tuple(out)


def _names(tables) -> str:
    return ", ".join(f"`{t}`" for t in tables)


def _positions(s: Stage) -> str:
    if not s.writer:
        return "none"
    watched = s.watched()
    keys = [f"`{s.prefix}{watched[0]}`"] if len(watched) == 1 else [f"`{s.prefix}<input>` per watched input"]
    keys += [f"`{s.prefix}{k}`" for k in (*s.settings, *s.extra_keys)]
    return f"`{s.writer}`: " + ", ".join(keys)


def markdown_table() -> str:
    """The stages as a markdown table (docs/orchestration.md, between the markers)."""
    rows = ["| stage | writes | reads | positions (writer: keys) |", "|---|---|---|---|"]
    for s in STAGES:
        history = [t for t in s.deps() if t not in s.settings]
        reads = _names(history)
        if s.settings:
            reads += f"; setting {_names(s.settings)}"
        replaced = [t for t in history if t not in s.watched()]
        if s.writer and replaced:
            instead = [t for t in s.watched() if t not in s.deps()]
            reads += f"; watches {_names(instead)} for {_names(replaced)} (derived from them)"
        rows.append(f"| `{s.name}` | {_names(s.outputs)} | {reads} | {_positions(s)} |")
    return "\n".join(rows) + "\n"


DOC = Path(__file__).resolve().parents[1] / "docs" / "orchestration.md"
BEGIN = "<!-- stages: generated by `python -m pipelines.stages --write`, do not edit -->\n"
END = "<!-- end stages -->\n"


def with_table(doc: str) -> str:
    """`doc` with the generated table between its markers."""
    head, sep, rest = doc.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError("docs/orchestration.md lacks the stages markers")
    return head + BEGIN + markdown_table() + END + tail


def main(argv: list[str] | None = None) -> int:
    """Print the table; with --write, put it into docs/orchestration.md."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write"]:
        DOC.write_text(with_table(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        sys.stdout.write(markdown_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
