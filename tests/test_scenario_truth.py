"""The ground-truth oracle itself: which records read twice count as duplicates the records
of Kafka can show, and which are the client's own re-reads (tests/scenario_truth.py).

The member events are written in the format testbed/member.py writes; the case is the one
seen with librdkafka 2.16 on a KIP-848 group (c2 re-reading offsets 0-33 of a partition it
kept, right after a revocation of others, before any commit)."""
from __future__ import annotations

import json
from pathlib import Path

from testbed.scenario import MemberRun, ScenarioResult
from tests.scenario_truth import read_truth

T = "orders"


def _result(tmp_path: Path, events: dict[str, list[dict]]) -> ScenarioResult:
    members = {}
    for name, evs in events.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"member": name, **e}) + "\n" for e in evs))
        members[name] = MemberRun(name, 0, path, 0)
    return ScenarioResult("g", T, 2, tmp_path, 0, 0, members, {}, tmp_path / "driver.jsonl")


def _start(ts: int) -> dict:
    return {"ts": ts, "event": "start", "config": {"commit": "auto"}}


def _read(ts: int, member: str, partition: int, offsets: range) -> list[dict]:
    return [{"ts": ts + i, "event": "processed", "member_id": member, "topic": T, "partition": partition,
             "offset": o} for i, o in enumerate(offsets)]


def _commit(ts: int, member: str, partition: int, offset: int) -> dict:
    return {"ts": ts, "event": "commit", "member_id": member, "error": None, "offsets": [[T, partition, offset, None]]}


def test_a_member_re_reading_a_kept_partition_before_any_commit_is_the_clients_own(tmp_path):
    c2 = [_start(0), {"ts": 1, "event": "assign", "member_id": "m2", "partitions": [[T, 0], [T, 1]]},
          *_read(10, "m2", 0, range(34)),
          {"ts": 100, "event": "revoke", "member_id": "m2", "partitions": [[T, 1]]},
          {"ts": 101, "event": "assign", "member_id": "m2", "partitions": []},
          *_read(200, "m2", 0, range(40)), _commit(3000, "m2", 0, 40)]
    truth = read_truth(_result(tmp_path, {"c2": c2}))
    assert truth.client_rereads == {(T, 0, o) for o in range(34)}
    assert truth.duplicates == set()


def test_a_handover_and_a_re_read_after_a_commit_past_it_are_duplicates(tmp_path):
    # c1 reads 0-9 of partition 0, commits 5, loses it to c2, which resumes at 5: 5-9 twice.
    c1 = [_start(0), {"ts": 1, "event": "assign", "member_id": "m1", "partitions": [[T, 0], [T, 1]]},
          *_read(10, "m1", 0, range(10)), _commit(30, "m1", 0, 5),
          {"ts": 100, "event": "revoke", "member_id": "m1", "partitions": [[T, 0]]},
          # ... and re-reads 0-3 of partition 1 after its commit of 4 there: a rewind the
          # records show (the next commit goes back).
          *_read(110, "m1", 1, range(4)), _commit(5000, "m1", 1, 4), *_read(6500, "m1", 1, range(4))]
    c2 = [_start(0), {"ts": 120, "event": "assign", "member_id": "m2", "partitions": [[T, 0]]},
          *_read(130, "m2", 0, range(5, 12))]
    truth = read_truth(_result(tmp_path, {"c1": c1, "c2": c2}))
    assert truth.client_rereads == frozenset()
    assert truth.duplicates == {(T, 0, o) for o in range(5, 10)} | {(T, 1, o) for o in range(4)}


def test_a_member_re_reading_after_giving_the_partition_up_and_getting_it_back_is_a_duplicate(tmp_path):
    c1 = [_start(0), {"ts": 1, "event": "assign", "member_id": "m1", "partitions": [[T, 0]]},
          *_read(10, "m1", 0, range(5)),
          {"ts": 100, "event": "revoke", "member_id": "m1", "partitions": [[T, 0]]},
          {"ts": 200, "event": "assign", "member_id": "m1", "partitions": [[T, 0]]},
          *_read(210, "m1", 0, range(5))]
    truth = read_truth(_result(tmp_path, {"c1": c1}))
    assert truth.client_rereads == frozenset()
    assert truth.duplicates == {(T, 0, o) for o in range(5)}
