"""Historical models, Java hash emulation, metrics and error handling on small hand-made problems."""
from __future__ import annotations

import pytest

from pipelines.assignors import ASSIGNORS, AssignorError, MemberSpec, Problem, assign, assign_problem
from pipelines.assignors.historical import handoff_plan
from pipelines.assignors.javahash import (hash_order, string_hash, string_hashmap_order, topic_partition_hash,
                                          uuid_from_string, uuid_hash)
from pipelines.assignors.metrics import generation_metrics
from pipelines.assignors.sticky import decode_sticky_user_data, encode_sticky_user_data


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
