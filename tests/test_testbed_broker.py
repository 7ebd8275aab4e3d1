"""The testbed against a real Kafka 0.9.0.1 broker: run the default scenario, then check
that what the broker wrote (``__consumer_offsets`` and ``server.log``) agrees with what
the consumers themselves recorded.

The records are decoded here by a deliberately small, independent reader of the 0.9
layouts (key v1/v2, offset-commit value v1, group-metadata value v0, consumer
protocol assignment v0), so the check does not lean on the project's codec; when
``pipelines.codec`` is present its output is cross-checked against it as well.
"""
from __future__ import annotations

import re
import struct
import uuid
from collections import defaultdict

import pytest

from pipelines.testbed import read_offsets_topic
from pipelines.testbed.scenario import default_scenario, run_scenario
from tests.kafka_broker import kafka_broker  # noqa: F401  (pytest fixture)

pytestmark = pytest.mark.broker


# ----- a minimal reader of the 0.9 record layouts --------------------------------------
class _Buf:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        (v,) = struct.unpack_from(">" + fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def bytes_(self):
        n = self.take("i")
        if n < 0:
            return None
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def done(self) -> bool:
        return self.pos == len(self.data)


def decode_key(key: bytes):
    b = _Buf(key)
    rtype = b.take("h")
    group = b.string()
    if rtype in (0, 1):
        out = (rtype, group, b.string(), b.take("i"))
    else:
        out = (rtype, group, None, None)
    assert b.done(), f"trailing bytes in key {key!r}"
    return out


def decode_offset_value(value: bytes) -> dict:
    b = _Buf(value)
    version = b.take("h")
    assert version == 1, f"0.9 writes offset commit value v1, got v{version}"
    out = {"offset": b.take("q"), "metadata": b.string(), "commit_ts": b.take("q"), "expire_ts": b.take("q")}
    assert b.done()
    return out


def decode_assignment(raw: bytes) -> dict[str, list[int]]:
    b = _Buf(raw)
    b.take("h")  # consumer protocol version
    out = {}
    for _ in range(b.take("i")):
        topic = b.string()
        out[topic] = sorted(b.take("i") for _ in range(b.take("i")))
    b.bytes_()  # user data
    return out


def decode_group_value(value: bytes) -> dict:
    b = _Buf(value)
    version = b.take("h")
    assert version == 0, f"0.9 writes group metadata value v0, got v{version}"
    out = {"protocol_type": b.string(), "generation": b.take("i"), "protocol": b.string(),
           "leader": b.string(), "members": []}
    for _ in range(b.take("i")):
        out["members"].append({
            "member_id": b.string(), "client_id": b.string(), "client_host": b.string(),
            "session_timeout": b.take("i"), "subscription": b.bytes_(),
            "assignment": decode_assignment(b.bytes_())})
    assert b.done()
    return out


# ----- the run ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def run(kafka_broker):  # noqa: F811
    suffix = uuid.uuid4().hex[:8]
    result = run_scenario(kafka_broker, default_scenario(topic=f"testbed-orders-{suffix}"),
                          group_id=f"testbed-group-{suffix}",
                          workdir=kafka_broker.workdir / f"scenario-{suffix}")
    records = read_offsets_topic(kafka_broker.bootstrap_servers)
    return kafka_broker, result, records


def _group_records(run):
    broker, result, records = run
    mine = []
    for r in records:
        rtype, group, topic, partition = decode_key(r.key)
        if group == result.group_id:
            mine.append((r, rtype, topic, partition))
    return mine


def _assigns(result):
    """(member name, member id, {topic: partitions}) of every on_assign, in time order."""
    out = []
    for e in result.events():
        if e["event"] == "assign":
            parts = defaultdict(list)
            for t, p in e["partitions"]:
                parts[t].append(p)
            out.append((e["member"], e["member_id"], {t: sorted(ps) for t, ps in parts.items()}))
    return out


# ----- __consumer_offsets -----------------------------------------------------------------
def test_group_records_live_in_its_coordinator_partition_without_timestamps(run):
    broker, result, _ = run
    mine = _group_records(run)
    assert mine, "no __consumer_offsets record for the scenario's group"
    assert {r.partition for r, *_ in mine} == {broker.partition_for(result.group_id)}
    # 0.9 writes magic-0 messages: no timestamp at all.
    assert all(r.timestamp is None for r, *_ in mine)
    assert {rtype for _, rtype, _, _ in mine} == {1, 2}


def test_every_acknowledged_commit_is_in_the_offsets_topic(run):
    broker, result, _ = run
    written = defaultdict(list)  # (topic, partition) -> [offset, ...] in log order
    for r, rtype, topic, partition in _group_records(run):
        if rtype == 1:
            assert r.value is not None
            written[(topic, partition)].append(decode_offset_value(r.value)["offset"])
    acknowledged = set()
    for e in result.events():
        if e["event"] == "commit" and e["error"] is None:
            for t, p, off, err in e["offsets"]:
                if err is None and off >= 0:  # -1001: nothing consumed there, not committed
                    acknowledged.add((t, p, off))
    assert acknowledged, "the consumers reported no successful commit"
    missing = {c for c in acknowledged if c[2] not in written[(c[0], c[1])]}
    assert not missing, f"commits the broker acknowledged but did not write: {sorted(missing)[:5]}"
    # Every partition of the topic got commits, and the last one covers all that was produced
    # (the survivor drained the topic and committed when it closed).
    assert {p for (t, p) in written if t == result.topic} == set(range(result.partitions))
    for p, end in result.produced.items():
        assert written[(result.topic, int(p))][-1] == end


def test_group_metadata_generations_match_what_members_were_assigned(run):
    broker, result, _ = run
    generations = []
    tombstones = 0
    for r, rtype, _, _ in _group_records(run):
        if rtype == 2:
            if r.value is None:
                tombstones += 1
            else:
                generations.append(decode_group_value(r.value))
    gens = [g["generation"] for g in generations]
    # Increasing, but not necessarily contiguous: a generation whose SyncGroup was cut
    # short by the next join (members starting together; 0.9 has no initial rebalance
    # delay) is never persisted. The server.log test pins those gaps down.
    assert gens == sorted(set(gens)) and gens[0] >= 1, f"generations out of order: {gens}"
    # The whole group left at the end: 0.9 removes the dead group with a tombstone.
    assert tombstones == 1
    assigns = _assigns(result)
    undelivered = []
    for g in generations:
        assert g["protocol_type"] == "consumer"
        assert g["protocol"] in ("range", "roundrobin")
        assert g["leader"] in {m["member_id"] for m in g["members"]}
        for m in g["members"]:
            assert m["session_timeout"] == 6000
            # clientId is the member's name (scenario sets client.id), and it was told
            # exactly this assignment by the coordinator...
            if (m["client_id"], m["member_id"], m["assignment"]) not in assigns:
                undelivered.append((g["generation"], m["client_id"]))
    # ...unless the next rebalance began before librdkafka handed the assignment to the
    # application: the generation was persisted (its SyncGroup completed) but superseded.
    # Then a later generation exists, and the members' final generation was delivered.
    last = gens[-1]
    assert all(gen < last for gen, _ in undelivered), undelivered
    assert len(undelivered) < sum(len(g["members"]) for g in generations) / 2, undelivered
    # Conversely every assignment a member received is one persisted generation's.
    persisted = {(m["client_id"], m["member_id"], str(m["assignment"]))
                 for g in generations for m in g["members"]}
    assert {(n, mid, str(a)) for n, mid, a in assigns} <= persisted
    # The membership story of the default scenario, generation by generation.
    story = [sorted(m["client_id"] for m in g["members"]) for g in generations]
    assert story[-1] == ["c3"] and ["c1", "c2", "c3"] in story and ["c2", "c3"] in story
    assert story.index(["c1", "c2", "c3"]) < story.index(["c2", "c3"]) < story.index(["c3"])
    three = generations[story.index(["c1", "c2", "c3"])]
    assert sorted(len(m["assignment"][result.topic]) for m in three["members"]) == [2, 2, 2]


def test_cross_check_with_project_codec(run):
    codec = pytest.importorskip("pipelines.codec")
    for r, rtype, topic, partition in _group_records(run):
        decoded = codec.decode_record(r.key, r.value, kafka_version="0.9")
        assert decoded["key"]["type"] == rtype
        assert decoded["key"]["data"]["group"] == run[1].group_id
        if rtype == 1:
            assert decoded["value"]["data"]["offset"] == decode_offset_value(r.value)["offset"]
        elif r.value is not None:
            assert decoded["value"]["data"]["generation"] == decode_group_value(r.value)["generation"]


# ----- server.log -----------------------------------------------------------------------------
LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (\w+) (.*) \(([\w.$]+)\)$")


def test_server_log_records_each_rebalance_of_the_group(run):
    broker, result, records = run
    group = re.escape(result.group_id)
    prepares, stabilized, assigned, dead = [], [], [], []
    for line in broker.server_log.read_text().splitlines():
        m = LINE.match(line)
        if not m or m.group(4) != "kafka.coordinator.GroupCoordinator":
            continue
        msg = m.group(3)
        if p := re.fullmatch(rf"\[GroupCoordinator 0\]: Preparing to restabilize group {group} "
                             rf"with old generation (\d+)", msg):
            prepares.append(int(p.group(1)))
        elif s := re.fullmatch(rf"\[GroupCoordinator 0\]: Stabilized group {group} generation (\d+)", msg):
            stabilized.append(int(s.group(1)))
        elif a := re.fullmatch(rf"\[GroupCoordinator 0\]: Assignment received from leader for group {group} "
                               rf"for generation (\d+)", msg):
            assigned.append(int(a.group(1)))
        elif d := re.fullmatch(rf"\[GroupCoordinator 0\]: Group {group} generation (\d+) is dead and removed",
                               msg):
            dead.append(int(d.group(1)))
    persisted = sorted(decode_group_value(r.value)["generation"]
                       for r, rtype, _, _ in _group_records(run) if rtype == 2 and r.value is not None)
    # The coordinator writes a generation exactly when the leader's assignment reaches it
    # while that generation is current; a stabilized generation overtaken by another join
    # before its SyncGroup never is.
    assert assigned == persisted
    assert set(persisted) <= set(stabilized)
    assert stabilized == list(range(1, len(stabilized) + 1))
    # Each rebalance starts from the previous generation; the last one ends the group.
    assert prepares == list(range(0, len(stabilized) + 1))
    assert dead == [stabilized[-1]]


# ----- ground truth -----------------------------------------------------------------------------
def test_ground_truth_tells_the_membership_story(run):
    broker, result, _ = run
    fates = {n: m.fate for n, m in result.members.items()}
    assert fates == {"c1": "left", "c2": "crashed", "c3": "left"}
    kinds = {n: [e["event"] for e in m.events()] for n, m in result.members.items()}
    assert kinds["c1"][-1] == "closed" and kinds["c3"][-1] == "closed"
    assert "closing" not in kinds["c2"]  # SIGKILLed: no clean shutdown
    for name, member in result.members.items():
        assert not _alive(member.pid), f"member {name} (pid {member.pid}) is still running"
    # Nothing produced was lost: every offset was processed at least once.
    processed = defaultdict(set)
    for e in result.events():
        if e["event"] == "processed":
            processed[e["partition"]].add(e["offset"])
    for p, end in result.produced.items():
        assert set(range(end)) <= processed[int(p)], f"partition {p} lost messages"


def test_new_owner_resumes_from_the_crashed_members_last_commit(run):
    broker, result, _ = run
    events = result.events()
    killed_at = next(e["ts"] for e in result.driver_events() if e["event"] == "killed")
    c2_owned = next(e for e in reversed(events) if e["member"] == "c2" and e["event"] == "assign")
    last_commit = {}
    for r, rtype, topic, partition in _group_records(run):
        if rtype == 1 and topic == result.topic:
            last_commit.setdefault(partition, [])
            last_commit[partition].append(decode_offset_value(r.value))
    for _, p in c2_owned["partitions"]:
        # What c2 had committed when it was killed (commit timestamps are the broker's clock).
        before = [c["offset"] for c in last_commit[p] if c["commit_ts"] <= killed_at]
        first_after = min(e["offset"] for e in events if e["event"] == "processed" and e["member"] == "c3"
                          and e["partition"] == p and e["ts"] > killed_at)
        assert first_after == before[-1], f"partition {p}"


def _alive(pid: int) -> bool:
    import os
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
