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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Stage:
    """One step after bronze.

    `reads` are the tables its job reads; `settings` those of them that are not assets (no
    Dagster dependency) and that it tracks by version, not as watched input; `whole`: its
    outputs are replaced whole on every change, so a reader watches this stage's inputs
    (their appends say which groups changed) instead of its outputs. Its commits carry
    positions of `writer` (none: ""), keyed `prefix + <table>` for each watched input and setting, and
    `prefix + <key>` for each of `extra_keys` (fingerprints, format versions)."""

    name: str
    outputs: tuple[str, ...]
    reads: tuple[str, ...]
    writer: str = ""
    prefix: str = ""
    settings: tuple[str, ...] = ()
    extra_keys: tuple[str, ...] = ()
    whole: bool = False

    def deps(self) -> tuple[str, ...]:
        """The Dagster dependencies: what it reads, settings apart (no asset writes them)."""
        return tuple(t for t in self.reads if t not in self.settings)

    def watched(self) -> tuple[str, ...]:
        """The inputs whose versions its positions record: what it reads, a table some stage
        rebuilds whole replaced by that stage's watched inputs (the ones not read directly),
        settings apart; in declaration order, once each."""
        out: list[str] = []
        for t in self.deps():
            whole = [s for s in STAGES if s.whole and t in s.outputs]
            for u in [u for s in whole for u in s.watched() if u not in self.reads] if whole else [t]:
                if u not in out:
                    out.append(u)
        return tuple(out)

    def versions(self, lake) -> dict[str, int]:
        """The current Delta version of each watched input the lake has."""
        return {t: lake.version(t) for t in self.watched() if lake.exists(t)}

    def positions(self, versions: Mapping[str, int]) -> dict[str, int]:
        """{prefix + table: version} for the given input versions."""
        return {self.prefix + t: v for t, v in versions.items()}

    def position_keys(self) -> tuple[str, ...]:
        """Every key its positions can hold (an input absent from the lake has none)."""
        return tuple(self.prefix + k for k in (*self.watched(), *self.settings, *self.extra_keys))


SILVER_PREFIX = "silver:"

OFFSETS_SILVER = Stage(
    "offsets_silver",
    outputs=("offset_commits", "group_generations", "member_assignments",
             # KIP-848 (consumer protocol) groups
             "consumer_group_epochs", "consumer_group_members", "target_assignment_epochs",
             "target_assignment_member_deltas", "current_assignments", "topic_ids",
             # share and streams groups, kept whole
             "other_group_records"),
    reads=("offsets_records",),
    writer=SILVER_PREFIX + "offsets_records", prefix=SILVER_PREFIX,
)
# topic_ids also takes the names live ingestion sampled (from Kafka 4.1 no record has them):
# rows keyed by topic id and inserted once, no positions. Runs in the offsets_silver asset.
TOPIC_NAMES = Stage("topic_names", outputs=("topic_ids",), reads=("topic_metadata",))
EVENTS_SILVER = Stage(
    "events_silver", outputs=("coordinator_events",), reads=("coordinator_log_lines",),
    writer=SILVER_PREFIX + "coordinator_log_lines", prefix=SILVER_PREFIX,
)
TARGET_ASSIGNMENTS = Stage(
    "target_assignments_silver", outputs=("target_assignments",),
    reads=("target_assignment_epochs", "target_assignment_member_deltas", "topic_ids"),
    writer=SILVER_PREFIX + "target_assignments", prefix=SILVER_PREFIX, whole=True,
)
GOLD = Stage(
    "gold_tables",
    outputs=("ownership_intervals", "commit_attribution", "rebalance_episodes", "duplicate_windows", "skip_windows",
             "commit_anomalies", "idle_consumers", "rebalance_storms", "coverage_gaps", "consumer_lag",
             # folds the tables above (pipelines/gold/summary.py), written last
             "group_summary"),
    # The GoldInputs fields (the first three required), then bronze: where the offsets have holes.
    reads=("offset_commits", "group_generations", "member_assignments", "consumer_group_epochs",
           "consumer_group_members", "current_assignments", "target_assignments", "coordinator_events", "topic_ids",
           "partition_end_offsets", "cluster_settings", "offsets_records"),
    writer="gold", prefix="gold:",
    # per-cluster settings, written by `ingest logs` and `run --broker-properties`
    settings=("cluster_settings",),
    extra_keys=("params", "format"),
)
WHATIF = Stage(
    "whatif_tables",
    outputs=("whatif_episodes", "whatif_summary"),
    # The WhatifInputs fields.
    reads=("group_generations", "member_assignments", "offset_commits", "coordinator_events",
           "consumer_group_members", "current_assignments", "target_assignments", "topic_ids", "rebalance_episodes"),
    writer="whatif", prefix="whatif:",
    extra_keys=("assignors",),
)
REPORT = Stage(
    "sre_report",
    outputs=("sre_report",),  # HTML pages, not a lake table
    # Silver: the tables every group appears in (member_assignments holds the same groups as
    # group_generations, row by member). Then gold's and what-if's: those may be absent.
    reads=("group_generations", "offset_commits", "consumer_group_epochs",
           "rebalance_episodes", "ownership_intervals", "duplicate_windows", "skip_windows", "idle_consumers",
           "rebalance_storms", "commit_anomalies", "coverage_gaps", "consumer_lag", "group_summary",
           "whatif_summary"),
)

STAGES = (OFFSETS_SILVER, TOPIC_NAMES, EVENTS_SILVER, TARGET_ASSIGNMENTS, GOLD, WHATIF, REPORT)


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
        reads = _names(s.deps())
        if s.settings:
            reads += f"; setting {_names(s.settings)}"
        replaced = [t for t in s.deps() if t not in s.watched()]
        if s.writer and replaced:
            instead = [t for t in s.watched() if t not in s.deps()]
            reads += f"; watches {_names(instead)} for {_names(replaced)} (rebuilt whole)"
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
