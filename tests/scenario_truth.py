"""What the testbed's consumers really did, read from their ground-truth files, in the terms
the lake's tables use: members, assignments, acknowledged commits, records consumed twice.

Each member process writes ``<member>.jsonl`` (see ``testbed/member.py``); a
``ScenarioResult`` holds one group's members.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from testbed.scenario import ScenarioResult

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Truth:
    group_id: str
    member_ids: frozenset[str]      # ids that were handed an assignment
    # Each member's ownership right after each assignment it received (incremental
    # protocols add to what it owned; eager ones revoke everything first).
    ownership: dict[str, list[frozenset[TopicPartition]]]
    # Offsets the group's commits acknowledged: (topic, partition) -> next offsets.
    commits: dict[TopicPartition, set[int]]
    # (topic, partition, offset) -> how many times it was processed with effect.
    processed: Counter
    consumed: set[TopicPartition]

    @property
    def duplicates(self) -> set[tuple[str, int, int]]:
        return {k for k, n in self.processed.items() if n > 1}


def read_truth(result: ScenarioResult) -> Truth:
    member_ids: set[str] = set()
    ownership: dict[str, list[frozenset[TopicPartition]]] = {}
    commits: dict[TopicPartition, set[int]] = {}
    processed: Counter = Counter()
    for run in result.members.values():
        owned: set[TopicPartition] = set()
        events = run.events()
        transactional = any(e["event"] == "start" and e["config"]["commit"] == "transactional" for e in events)
        for e in events:
            parts = {(t, p) for t, p in e.get("partitions", ())}
            if e["event"] == "assign" and e.get("member_id"):
                # A member id is in the coordinator's records once an assignment under it
                # was handed out (the coordinator persists a generation before answering
                # SyncGroup). One that joined without being assigned, when the rebalance was
                # overtaken by another, may never be written.
                member_ids.add(e["member_id"])
            if e["event"] == "assign":
                owned |= parts
                ownership.setdefault(e["member_id"], []).append(frozenset(owned))
            elif e["event"] in ("revoke", "lost"):
                owned -= parts
            elif e["event"] in ("commit", "txn_commit") and e.get("error") is None:
                for topic, partition, offset, error in e["offsets"]:
                    if error is None and offset >= 0:
                        commits.setdefault((topic, partition), set()).add(offset)
            if e["event"] == "processed" and not transactional:
                processed[(e["topic"], e["partition"], e["offset"])] += 1
            elif e["event"] == "txn_commit":
                # In a transactional app only what a committed transaction covered took
                # effect: work inside aborted ones (re-done after the abort) never did.
                for topic, partition, first, last in e["ranges"]:
                    for offset in range(first, last + 1):
                        processed[(topic, partition, offset)] += 1
    consumed = {(t, p) for t, p, _ in processed}
    return Truth(result.group_id, frozenset(member_ids), ownership, commits, processed, consumed)


def crashed_progress(result: ScenarioResult) -> dict[TopicPartition, int]:
    """For each partition, the next offset after the furthest record a member that was
    SIGKILLed had processed: a commit in flight when it died can reach that far."""
    furthest: dict[TopicPartition, int] = {}
    for run in result.members.values():
        if run.fate != "crashed":
            continue
        for e in run.events():
            if e["event"] == "processed":
                tp = (e["topic"], e["partition"])
                furthest[tp] = max(furthest.get(tp, 0), e["offset"] + 1)
    return furthest
