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
    # Records one member process read twice while it kept the partition, with no commit
    # past them in between: the client re-fetched on its own. Seen with librdkafka 2.16 on
    # KIP-848 groups: after a revocation of other partitions, a kept partition that had no
    # commit yet restarted from the reset position (the kind of fault of librdkafka #4686).
    # Nothing of Kafka's records it (no handover, no commit goes back), so no tool reading
    # __consumer_offsets or the brokers' logs can find it; `duplicates` leaves it out.
    client_rereads: frozenset[tuple[str, int, int]] = frozenset()

    @property
    def duplicates(self) -> set[tuple[str, int, int]]:
        """Records processed twice in a way Kafka's records show (a handover, a commit rewound)."""
        return {k for k, n in self.processed.items() if n > 1} - self.client_rereads


def read_truth(result: ScenarioResult) -> Truth:
    member_ids: set[str] = set()
    ownership: dict[str, list[frozenset[TopicPartition]]] = {}
    commits: dict[TopicPartition, set[int]] = {}
    processed: Counter = Counter()
    # (topic, partition, offset) -> (process, member id, time, ownership turn) of each processing
    processings: dict[tuple[str, int, int], list[tuple[str, str, int, int]]] = {}
    commit_times: dict[TopicPartition, list[tuple[int, int]]] = {}
    for name, run in result.members.items():
        owned: set[TopicPartition] = set()
        turns: Counter = Counter()     # how many times the process gave each partition up
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
                turns.update(parts)
            elif e["event"] in ("commit", "txn_commit") and e.get("error") is None:
                for topic, partition, offset, error in e["offsets"]:
                    if error is None and offset >= 0:
                        commits.setdefault((topic, partition), set()).add(offset)
                        commit_times.setdefault((topic, partition), []).append((e["ts"], offset))
            if e["event"] == "processed" and not transactional:
                key = (e["topic"], e["partition"], e["offset"])
                processed[key] += 1
                processings.setdefault(key, []).append((name, e["member_id"], e["ts"], turns[key[:2]]))
            elif e["event"] == "txn_commit":
                # In a transactional app only what a committed transaction covered took
                # effect: work inside aborted ones (re-done after the abort) never did.
                for topic, partition, first, last in e["ranges"]:
                    for offset in range(first, last + 1):
                        processed[(topic, partition, offset)] += 1
    consumed = {(t, p) for t, p, _ in processed}
    rereads = frozenset(k for k, seen in processings.items() if len(seen) > 1
                        and _reread_by_the_client(seen, commit_times.get(k[:2], []), k[2]))
    return Truth(result.group_id, frozenset(member_ids), ownership, commits, processed, consumed, rereads)


# A commit acknowledged this soon after a re-read may have been written before it: such a
# re-read could show in the records as a commit going back, so it is not set aside.
_COMMIT_ACK_SLACK_MS = 1000


def _reread_by_the_client(seen: list[tuple[str, str, int, int]], commits: list[tuple[int, int]], offset: int) -> bool:
    """Every processing by one process under one member id, in one spell of ownership, and no
    commit past the record acknowledged before the last of them."""
    if len({(name, member, turn) for name, member, _, turn in seen}) != 1:
        return False
    last = max(ts for _, _, ts, _ in seen)
    return not any(ts < last + _COMMIT_ACK_SLACK_MS and committed > offset for ts, committed in commits)


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
