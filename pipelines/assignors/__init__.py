"""Kafka partition assignors, reproduced from Kafka 3.9's Java sources, plus historical models.

Entry points:

* `assign(assignor_name, problem_dict) -> {member_id: runs}` - one problem in the shape of a
  generation record of `../shared/assignor-vectors` (without outputs);
* `assign_problem(assignor_name, Problem) -> {member_id: [(topic, partition), ...]}` - the typed API
  (see `model.Problem` / `model.MemberSpec`);
* `generation_metrics(...)` in `metrics` - moved / revoked / balance / idle per generation;
* `ASSIGNORS` - the names `assign` accepts; `AssignorError` - raised where the assignor refuses.
"""
from __future__ import annotations

from typing import Any, Callable

from .model import AssignorError, MemberSpec, Problem, TopicPartition, to_runs
from .range_client import assign_range
from .range_server import assign_server_range
from .roundrobin import assign_roundrobin

_REGISTRY: dict[str, Callable[[Problem], dict[str, list[TopicPartition]]]] = {
    "range": assign_range,
    "roundrobin": assign_roundrobin,
    "server-range": assign_server_range,
}


def _register_optional() -> None:
    # Imported late so that the module graph stays acyclic (they import from this package's modules).
    from . import historical, sticky, uniform

    _REGISTRY.update({
        "sticky": sticky.assign_sticky,
        "cooperative-sticky": sticky.assign_cooperative_sticky,
        "uniform": uniform.assign_uniform_39,
        "uniform-4.1": uniform.assign_uniform_41,
        "zk-ceil": historical.assign_zk_ceil,
        "central-handoff": historical.assign_central_handoff,
    })


_register_optional()

ASSIGNORS: tuple[str, ...] = tuple(_REGISTRY)


def assign_problem(assignor_name: str, problem: Problem) -> dict[str, list[TopicPartition]]:
    """Run one assignor on a typed problem; every member of the problem appears in the result."""
    fn = _REGISTRY.get(assignor_name)
    if fn is None:
        raise AssignorError(f"unknown assignor {assignor_name!r}; known: {', '.join(ASSIGNORS)}")
    if not problem.members:
        return {}
    result = fn(problem)
    if len(result) < len(problem.members):  # results only hold the problem's members
        for m in problem.members:
            result.setdefault(m.member_id, [])
    return result


def assign(assignor_name: str, problem: dict[str, Any]) -> dict[str, list]:
    """Run one assignor on a problem dict; returns `{member_id: [[topic, [partitions...]], ...]}`."""
    if assignor_name not in _REGISTRY:
        raise AssignorError(f"unknown assignor {assignor_name!r}; known: {', '.join(ASSIGNORS)}")
    p = Problem.from_dict(problem)
    return {mid: to_runs(parts) for mid, parts in assign_problem(assignor_name, p).items()}


__all__ = ["ASSIGNORS", "AssignorError", "MemberSpec", "Problem", "assign", "assign_problem"]
