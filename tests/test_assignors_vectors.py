"""Golden vectors: Kafka 3.9.0's own Java assignors vs ours, small and medium sequences.

The large sequences are exercised by bench/bench_assignors.py (they take minutes in Java too).
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import SHARED
from pipelines.assignors import AssignorError, Problem, assign, assign_problem, native
from pipelines.assignors.metrics import generation_metrics

VECTORS = SHARED / "assignor-vectors"
SIZES = ("small", "medium")


@lru_cache(maxsize=None)
def sequences(assignor: str) -> tuple:
    path = VECTORS / f"{assignor}.jsonl.gz"
    if not path.exists():
        pytest.fail(f"assignor vectors missing: {path}")
    with gzip.open(path, "rt") as f:
        return tuple(s for s in map(json.loads, f) if s["size_class"] in SIZES)


def as_sets(runs_by_member: dict | None) -> dict[str, set]:
    return {m: {(t, p) for t, ps in runs for p in ps} for m, runs in (runs_by_member or {}).items()}


def same_sets(expected: dict, got: dict) -> bool:
    e, g = as_sets(expected), as_sets(got)
    return all(e.get(m, set()) == g.get(m, set()) for m in set(e) | set(g))


@lru_cache(maxsize=None)
def results(assignor: str) -> tuple:
    """(sequence id, generation, our typed result) for every generation Kafka answered; computed once."""
    out = []
    for seq in sequences(assignor):
        for g in seq["generations"]:
            if g.get("assign_error"):
                continue
            problem = Problem.from_dict(g)
            out.append((seq["sequence_id"], g, problem, assign_problem(assignor, problem)))
    return tuple(out)


def mismatches(assignor: str, *, drop_order: bool = False, reverse_order: bool = False):
    bad, total = [], 0
    if not (drop_order or reverse_order):
        for sid, g, _, got in results(assignor):
            total += 1
            mine = {m: [[t, [p]] for t, p in parts] for m, parts in got.items()}
            if not same_sets(g["assignment"], mine):
                bad.append((sid, g["step"], g.get("phase")))
        return bad, total
    for seq in sequences(assignor):
        for g in seq["generations"]:
            if g.get("assign_error"):
                continue
            total += 1
            problem = dict(g)
            if drop_order:
                problem.pop("member_iteration_order")
            if reverse_order:
                problem["member_iteration_order"] = list(reversed(g["member_iteration_order"]))
            got = assign(assignor, problem)
            if not same_sets(g["assignment"], got):
                bad.append((seq["sequence_id"], g["step"], g.get("phase")))
    return bad, total


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "server-range", "sticky", "cooperative-sticky", "uniform"])
def test_every_member_gets_kafkas_partition_set(assignor):
    bad, total = mismatches(assignor)
    assert total > 1500
    assert bad == [], f"{len(bad)}/{total} generations differ, first: {bad[:5]}"


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "server-range"])
def test_order_insensitive_assignors_match_without_and_with_reversed_member_order(assignor):
    # These three sort members themselves: the map order handed to assign() must not matter.
    assert mismatches(assignor, drop_order=True)[0] == []
    assert mismatches(assignor, reverse_order=True)[0] == []


def test_uniform_is_order_sensitive_as_the_probes_say():
    # Where Kafka's own probe saw a different result with the member map reversed, ours must differ too
    # when fed the reversed order - proof that the recorded order is actually used.
    changed = agreed = 0
    for seq in sequences("uniform"):
        for g in seq["generations"]:
            probe = g.get("order_probe", {}).get("reversed_input_order", {})
            if g.get("assign_error") or "same_partition_sets" not in probe:
                continue
            problem = dict(g, member_iteration_order=list(reversed(g["member_iteration_order"])))
            same = same_sets(g["assignment"], assign("uniform", problem))
            changed += not probe["same_partition_sets"]
            agreed += same == probe["same_partition_sets"]
    assert changed > 100
    total = sum(1 for s in sequences("uniform") for g in s["generations"]
                if not g.get("assign_error") and "same_partition_sets" in g.get("order_probe", {}).get("reversed_input_order", {}))
    assert agreed == total


@pytest.mark.parametrize("assignor", ["range", "sticky", "cooperative-sticky"])
def test_rack_aware_sequences_are_covered_and_match(assignor):
    rack_seqs = [s for s in sequences(assignor) if any(g["partition_racks"] for g in s["generations"])]
    # KIP-881 paths: broker racks + client racks (18 of the 31 rack sequences are in this folder's small/medium part)
    assert len(rack_seqs) >= 15
    rack_aware_gens = 0
    for seq in rack_seqs:
        for g in seq["generations"]:
            assert same_sets(g["assignment"], assign(assignor, g)), (seq["sequence_id"], g["step"])
            rack_aware_gens += any(m["rack_id"] for m in g["members"])
    assert rack_aware_gens > 100


def _instances(g) -> dict:
    return {m["member_id"]: m.get("group_instance_id") for m in g["members"]}


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "server-range", "sticky", "cooperative-sticky", "uniform"])
def test_balance_and_moves_no_worse_than_kafka(assignor):
    ours_spread = kafka_spread = ours_moved = kafka_moved = 0
    prev = prev_inst = prev_seq = None
    for sid, g, problem, got in results(assignor):
        if not g.get("is_step_final"):
            continue
        if sid != prev_seq:
            prev = prev_inst = None
        m = generation_metrics(problem, got, prev, prev_inst)
        ours_spread += m.balance
        kafka_spread += g["metrics"]["spread"]
        if prev is not None:
            ours_moved += m.moved
            kafka_moved += g["step_metrics"]["moved_since_previous_step"]
        prev, prev_inst, prev_seq = got, _instances(g), sid
    assert ours_spread <= kafka_spread
    assert ours_moved <= kafka_moved


def test_uniform_39_throws_where_kafka_39_threw_and_uniform_41_does_not():
    erroring = [(s["sequence_id"], g) for s in sequences("uniform") for g in s["generations"] if g.get("assign_error")]
    assert erroring, "the vectors record UniformAssignor 3.9 exceptions on medium heterogeneous groups"
    for sid, g in erroring:
        assert g["assign_error"]["message"].startswith("Mismatch in partition movement record")
        # Ours reproduces 3.9's bug: the second move of a partition in one balancing pass throws.
        with pytest.raises(AssignorError, match="Mismatch in partition movement record"):
            assign("uniform", g)
        # The 4.x rewrite assigns every subscribed partition exactly once.
        got = as_sets(assign("uniform-4.1", g))
        owned = [tp for parts in got.values() for tp in parts]
        assert len(owned) == len(set(owned))
        subscribed = {t for m in g["members"] for t in m["subscribed_topic_names"]}
        assignable = {(t, p) for t, n, _ in g["topics"] if t in subscribed for p in range(n)}
        assert set(owned) == assignable, sid


def test_uniform_41_homogeneous_is_a_fixed_point_and_balanced():
    # KAFKA-18688: a balanced previous target must be kept as is (3.9 may move the extra partitions).
    checked = 0
    for seq in sequences("uniform"):
        for g in seq["generations"]:
            if g["subscription_type"] != "HOMOGENEOUS" or g.get("assign_error"):
                continue
            first = assign("uniform-4.1", g)
            sizes = [sum(len(ps) for _, ps in r) for r in first.values()]
            assert max(sizes) - min(sizes) <= 1
            again = dict(g, members=[dict(m, target_assignment_in=first[m["member_id"]]) for m in g["members"]])
            assert same_sets(first, assign("uniform-4.1", again))
            checked += 1
    assert checked > 900


# --- the compiled cores (native/src/assignors.rs, uniform.rs) and the pure-Python paths --------

NATIVE_FUNCTIONS = ("java_string_hashes", "java_string_hashmap_order", "server_range_assign", "sticky_user_data",
                    "uniform_assign", "sticky_general_assign")


def _cargo() -> bool:
    return shutil.which("cargo") is not None or (Path.home() / ".cargo" / "bin" / "cargo").exists()


def test_the_assignor_cores_are_built_wherever_rust_is():
    # The vector tests above then run the compiled paths; the test below holds the Python ones equal.
    if _cargo() and os.environ.get("REBALANCE_AUDIT_NO_NATIVE", "") in ("", "0"):
        missing = [f for f in NATIVE_FUNCTIONS if getattr(native, f) is None]
        assert not missing, f"scripts/setup-native.sh did not build the assignor cores {missing}"


def _outcome(assignor: str, problem: Problem):
    try:
        return "ok", assign_problem(assignor, problem)
    except AssignorError as exc:
        return "error", str(exc)


# assignor -> the cores it calls (range uses none: it is here as the Python path's own control)
CORES_USED = {"server-range": ["server_range_assign"], "uniform": ["uniform_assign"],
              "sticky": ["sticky_user_data", "java_string_hashmap_order", "sticky_general_assign"],
              "cooperative-sticky": ["java_string_hashmap_order", "java_string_hashes", "sticky_general_assign"],
              "range": []}


@pytest.mark.parametrize("assignor", list(CORES_USED))
def test_compiled_and_python_paths_give_identical_results(assignor, monkeypatch):
    """Same partitions, same list order, same member order, same exceptions, on every vector."""
    if all(getattr(native, f) is None for f in NATIVE_FUNCTIONS):
        pytest.skip("the compiled core is not built (no Rust toolchain)")
    answered = dict.fromkeys(CORES_USED[assignor], 0)

    def counting(name, fn):
        def call(*args):
            out = fn(*args)
            answered[name] += out is not None
            return out
        return call
    compiled, python = [], []
    with monkeypatch.context() as m:
        for f in CORES_USED[assignor]:
            m.setattr(native, f, counting(f, getattr(native, f)))
        for seq in sequences(assignor):
            for g in seq["generations"]:
                compiled.append(_outcome(assignor, Problem.from_dict(g)))
    with monkeypatch.context() as m:
        for f in NATIVE_FUNCTIONS:
            m.setattr(native, f, None)
        for seq in sequences(assignor):
            for g in seq["generations"]:
                python.append(_outcome(assignor, Problem.from_dict(g)))
    assert len(compiled) == len(python) > 1500
    assert all(n > 500 for n in answered.values()), answered  # the compiled path really ran
    for c, p in zip(compiled, python):
        assert c == p
        if c[0] == "ok":
            assert list(c[1]) == list(p[1])  # member (map) order too
