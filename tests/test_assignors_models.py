"""Historical models, Java hash emulation, metrics and error handling on small hand-made problems."""
from __future__ import annotations

import base64
import random

import pytest

from pipelines.assignors import ASSIGNORS, AssignorError, MemberSpec, Problem, assign, assign_problem, native
from pipelines.assignors.historical import handoff_plan
from pipelines.assignors.javahash import (hash_order, string_hash, string_hashes, string_hashmap_order,
                                          topic_partition_hash, uuid_from_string, uuid_hash)
from pipelines.assignors.metrics import generation_metrics
from pipelines.assignors.sticky import _decode_sticky_user_data_codec, decode_sticky_user_data, encode_sticky_user_data


def problem(n_members: int, topics: dict[str, int], owned: dict[str, list] | None = None) -> Problem:
    owned = owned or {}
    members = [MemberSpec(member_id=f"c{i}", topics=sorted(topics), owned=owned.get(f"c{i}", []))
               for i in range(n_members)]
    return Problem(members=members, topics=dict(topics))


@pytest.mark.parametrize("p,c", [(10, 4), (4, 3), (7, 7), (5, 8), (12, 5), (1, 1)])
def test_zk_ceil_gives_ceil_sized_blocks_and_nothing_beyond(p, c):
    out = assign_problem("zk-ceil", problem(c, {"t": p}))
    n = -(-p // c)
    for i in range(c):
        expected = [("t", x) for x in range(i * n, min((i + 1) * n, p))]
        assert out[f"c{i}"] == expected
    # consumers whose block starts past the last partition get nothing
    idle = [i for i in range(c) if not out[f"c{i}"]]
    assert idle == [i for i in range(c) if i * n >= p]
    assert sorted(tp for parts in out.values() for tp in parts) == [("t", x) for x in range(p)]


def test_zk_ceil_starves_consumers_where_range_does_not():
    # 4 partitions, 3 consumers: ceil rule 2/2/0, Kafka's range 2/1/1.
    zk = assign_problem("zk-ceil", problem(3, {"t": 4}))
    rg = assign_problem("range", problem(3, {"t": 4}))
    assert sorted(len(v) for v in zk.values()) == [0, 2, 2]
    assert sorted(len(v) for v in rg.values()) == [1, 1, 2]


def test_central_handoff_pauses_only_partitions_that_change_live_owner():
    owned = {"c0": [("t", p) for p in range(6)], "c1": [("t", p) for p in range(6, 12)]}
    # a third member joins: it must get 4 partitions, taken from c0 and c1; nothing else pauses
    p = problem(3, {"t": 12}, owned)
    target, paused = handoff_plan(p)
    assert sorted(len(v) for v in target.values()) == [4, 4, 4]
    assert len(paused) == 4 and all(tp in target["c2"] for tp in paused)
    assert set(target["c0"]) <= set(owned["c0"]) and set(target["c1"]) <= set(owned["c1"])
    # partitions whose owner left are started, not paused (nobody live has to close them)
    p2 = problem(2, {"t": 12}, {"c0": owned["c0"], "gone": owned["c1"]})
    target2, paused2 = handoff_plan(p2)
    assert paused2 == set()
    assert sorted(len(v) for v in target2.values()) == [6, 6]


def test_java_string_and_uuid_hashes():
    assert string_hash("") == 0
    assert string_hash("hello") == 99162322
    assert string_hash("Aa") == string_hash("BB") == 2112
    assert string_hash("polygenelubricants") == -2**31  # Integer.MIN_VALUE, a classic
    assert string_hash("é") == 233 and string_hash("😀") == 31 * 0xD83D + 0xDE00  # UTF-16 surrogate pair
    assert uuid_from_string("AAAAAAAAAAAAAAAAAAAAAQ") == (0, 1)
    assert uuid_hash(0, 1) == 1 and uuid_hash(1 << 32, 0) == 1
    assert topic_partition_hash("t", 0) == 31 * 31 + string_hash("t")
    # HashMap<String,?> iteration: bucket order then insertion order; "Aa"/"BB" collide.
    assert string_hashmap_order(["a", "BB", "Aa"]) == ["BB", "Aa", "a"]  # buckets 1, 0, 0
    assert hash_order(["x", "y"], [18, 1], 16) == ["y", "x"]  # buckets 2, 1
    assert hash_order(["x", "y"], [17, 1], 16) == ["x", "y"]  # same bucket: insertion order


def test_sticky_user_data_round_trip_and_fallbacks():
    parts = [("orders", 3), ("orders", 1), ("a-12", 0)]
    assert decode_sticky_user_data(encode_sticky_user_data(parts, 7)) == (parts, 7)
    v0 = encode_sticky_user_data(parts, 7)[:-4]  # V0 has no generation field
    assert decode_sticky_user_data(v0) == (parts, None)
    assert decode_sticky_user_data(b"\x00\x00\x00\x05garbage") == ([], -1)
    assert decode_sticky_user_data(None) == ([], None)


def test_metrics_eager_vs_cooperative_revocation():
    p = problem(2, {"t": 4})
    before = {"c0": [("t", 0), ("t", 1), ("t", 2)], "c1": [("t", 3)]}
    after = {"c0": [("t", 0), ("t", 1)], "c1": [("t", 2), ("t", 3)]}
    eager = generation_metrics(p, after, before)
    coop = generation_metrics(p, after, before, cooperative=True)
    assert (eager.moved, eager.revoked, eager.balance, eager.idle_members) == (1, 4, 0, 0)
    assert coop.revoked == 1


def test_bad_problems_get_clear_errors():
    with pytest.raises(AssignorError, match="unknown assignor"):
        assign("nope", {"topics": [], "members": []})
    with pytest.raises(AssignorError, match="topics"):
        assign("range", {"members": []})
    with pytest.raises(AssignorError, match="member_iteration_order"):
        assign("range", {"topics": [["t", 1]], "members": [{"member_id": "a", "topics": ["t"]}],
                         "member_iteration_order": ["b"]})
    with pytest.raises(AssignorError, match="partition count"):
        assign("range", {"topics": [["t", "x"]], "members": []})


@pytest.mark.parametrize("name", ASSIGNORS)
def test_every_assignor_covers_every_partition_once_on_a_simple_group(name):
    p = {"topics": [["a", 5], ["b", 3]],
         "members": [{"member_id": f"m{i}", "topics": ["a", "b"], "subscribed_topic_names": ["a", "b"]}
                     for i in range(3)]}
    out = assign(name, p)
    assert set(out) == {"m0", "m1", "m2"}
    owned = [(t, x) for runs in out.values() for t, ps in runs for x in ps]
    assert len(owned) == len(set(owned))
    assert set(owned) == {("a", x) for x in range(5)} | {("b", x) for x in range(3)}


# --- compiled cores vs pure Python on hostile input (the vectors test holds them equal on real data) ---

HOSTILE_IDS = ["", "a", "é", "中文", "\U0001f600-astral", "\U0001f600", "\uffff", "Aa", "BB", "x" * 300, "m-\ud800-lone"]


def _without_native(monkeypatch):
    for f in ("java_string_hashes", "java_string_hashmap_order", "server_range_assign", "sticky_user_data",
              "uniform_assign", "sticky_general_assign"):
        monkeypatch.setattr(native, f, None)


def test_string_hashes_core_matches_java_hashcode_or_declines():
    if native.java_string_hashes is None:
        pytest.skip("the compiled core is not built")
    assert native.java_string_hashes(HOSTILE_IDS[:-1]) == [string_hash(s) for s in HOSTILE_IDS[:-1]]
    assert native.java_string_hashes(HOSTILE_IDS) is None  # a lone surrogate: Python decides
    assert string_hashes(HOSTILE_IDS) == [string_hash(s) for s in HOSTILE_IDS]
    python_order = hash_order(HOSTILE_IDS, [string_hash(s) for s in HOSTILE_IDS], 16)
    assert string_hashmap_order(HOSTILE_IDS) == python_order  # the core declines, Python answers
    assert native.java_string_hashmap_order(HOSTILE_IDS[:-1], 16) == [s for s in python_order if s != HOSTILE_IDS[-1]]


def test_sticky_user_data_paths_agree_on_every_truncation_and_byte_flip():
    good = encode_sticky_user_data([("orders", 3), ("caf\u00e9", 1), ("orders", 0), ("\U0001f600", 7)], 12)
    rng = random.Random(7)
    samples = [good[:n] for n in range(len(good) + 1)] + [good + b"\x00\x01"]
    for _ in range(400):
        b = bytearray(good)
        b[rng.randrange(len(b))] = rng.randrange(256)
        samples.append(bytes(b))
    for data in samples:
        codec = _decode_sticky_user_data_codec(data) if data else ([], None)
        if native.sticky_user_data is not None and data:
            core = native.sticky_user_data(data)
            assert (core if core is not None else codec) == codec, data
        assert decode_sticky_user_data(data) == codec


def _hostile_problem(seed: int) -> dict:
    rng = random.Random(seed)
    topics = [[f"t{i}-\u00e9" if i % 3 == 0 else f"t{i}", rng.choice([0, 1, 3, 8, 20])] for i in range(6)]
    names = [t for t, _ in topics] + ["missing"]
    members = []
    for i in range(rng.randint(1, 9)):
        subs = rng.sample(names, rng.randint(0, 4)) or [names[0]]
        if rng.random() < 0.2:
            subs.append(subs[0])  # listed twice
        target = [[t, rng.sample(range(9), rng.randint(0, 3))] for t in rng.sample(names, 2)]
        generation = rng.choice([None, 1, 2, 3])
        previous = [(t, p) for t, ps in target for p in ps]
        # Previous ownership for the sticky assignors: may overlap, be stale or beyond a topic's count.
        members.append({"member_id": rng.choice(HOSTILE_IDS[:-1]) + f"-{i}",
                        "group_instance_id": f"inst-{rng.choice(HOSTILE_IDS[:-1])}-{i}" if rng.random() < 0.3 else None,
                        "topics": subs, "subscribed_topic_names": subs, "target_assignment_in": target,
                        "owned_partitions": target, "generation_id": generation,
                        "user_data_b64": base64.b64encode(encode_sticky_user_data(previous, generation or 0)).decode()
                        if rng.random() < 0.7 else None})
    return {"topics": topics, "members": members}


@pytest.mark.parametrize("name", ["server-range", "uniform", "range", "sticky", "cooperative-sticky"])
def test_compiled_and_python_paths_agree_on_hostile_problems(name, monkeypatch):
    def outcome(problem):
        try:
            return assign(name, problem)
        except Exception as exc:  # AssignorError, or the odd crash both paths must share
            return type(exc).__name__, str(exc)
    problems = [_hostile_problem(seed) for seed in range(300)]
    compiled = [outcome(p) for p in problems]
    _without_native(monkeypatch)
    assert compiled == [outcome(p) for p in problems]


def test_uniform_takes_previous_targets_written_as_lists():
    """The simulator writes a member's previous target runs as lists, as the records hold
    them; the compiled core takes tuples. Both spellings give the same assignment."""
    def with_targets(make) -> Problem:
        p = problem(3, {"a": 5, "b": 3})
        for i, m in enumerate(p.members):
            m.target = [make("a", [j for j in range(5) if j % 3 == i]), make("b", [i])]
        return p

    as_tuples = assign_problem("uniform", with_targets(lambda t, ps: (t, ps)))
    assert assign_problem("uniform", with_targets(lambda t, ps: [t, ps])) == as_tuples
    assert sorted(p for ps in as_tuples.values() for p in ps) == [(t, j) for t, n in (("a", 5), ("b", 3)) for j in range(n)]
