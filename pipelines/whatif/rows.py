"""Replays → output rows (the executor side of `spark_job`, also used by the CLI and the bench)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from .history import GroupHistory
from .replay import Replay, replay_all


def _ts(ms):
    return None if ms is None else datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


def episode_rows(hist: GroupHistory, replays: list[Replay]) -> list[dict]:
    """One row per replayed round (whatif_episodes), each carrying its replay's divergences and
    the history's notes in `_divergence_list` / `_notes` (for the summary; not stored)."""
    out = []
    notes = "; ".join(dict.fromkeys(hist.notes)) or None
    for rep in replays:
        divs = json.dumps(rep.divergences) if hist.real_assignor == rep.assignor else None
        for n, r in enumerate(rep.rounds):
            out.append({
                "cluster": hist.cluster, "group_id": hist.group_id, "incarnation": hist.incarnation,
                "segment": hist.segment, "group_kind": hist.kind, "real_assignor": hist.real_assignor, "assignor": rep.assignor,
                "protocol": rep.protocol, "round": n, "step": r.step, "generation": r.generation, "phase": r.phase,
                "record_ts": _ts(r.ts_ms), "members": r.members, "partitions": r.partitions, "assigned": r.assigned,
                "moved": r.moved, "revoked": r.revoked, "paused": r.paused, "duration_ms": r.duration_ms,
                "duration_source": r.duration_source, "stw_partition_seconds": r.stw_partition_seconds,
                "balance": r.balance, "max_per_member": r.max_per_member, "min_per_member": r.min_per_member,
                "idle_members": r.idle_members, "dup_exposure_records": r.dup_exposure_records, "complete": r.complete,
                "assignment": json.dumps({m: [f"{t}-{p}" for t, p in parts] for m, parts in r.assignment.items()},
                                         sort_keys=True),
                "matches_actual": r.matches_actual, "divergence": r.divergence, "error": r.error,
                "_divergence_list": divs, "_notes": notes, "_steps": len(hist.steps),
                "_commit_interval_ms": hist.commit_interval_ms, "_records_per_partition_s": hist.records_per_partition_s,
            })
    return out


def summarize(rows: list[dict]) -> list[dict]:
    """whatif_summary rows from episode rows of any number of groups (pure Python twin of the
    Spark aggregation in `spark_job.summary`, used by the CLI on a single group)."""
    groups: dict[tuple, dict[str, list[dict]]] = {}
    for r in rows:
        groups.setdefault((r["cluster"], r["group_id"], r["incarnation"], r["segment"], r["group_kind"]), {}).setdefault(r["assignor"], []).append(r)
    out = []
    for (cluster, group, inc, segment, kind), by_assignor in groups.items():
        act = _totals(by_assignor.get("actual", []))
        for assignor, rs in by_assignor.items():
            t = _totals(rs)
            first = rs[0]
            divs = first.get("_divergence_list")
            out.append({
                "cluster": cluster, "group_id": group, "incarnation": inc, "segment": segment, "group_kind": kind,
                "real_assignor": first["real_assignor"], "assignor": assignor, "protocol": first["protocol"],
                "steps": first.get("_steps"), **t,
                "divergences": len(json.loads(divs)) if divs is not None else None, "divergence_list": divs,
                **{f"actual_{k}": act.get(k) for k in ("rounds", "moved", "revoked", "stw_partition_seconds",
                                                        "max_balance", "idle_member_rounds", "dup_exposure_records")},
                "commit_interval_ms": first.get("_commit_interval_ms"),
                "records_per_partition_s": first.get("_records_per_partition_s"), "notes": first.get("_notes"),
            })
    return out


def _sum(rs, k):
    vals = [r[k] for r in rs if r.get(k) is not None]
    return sum(vals) if vals else None


def _totals(rs: list[dict]) -> dict:
    rs = sorted(rs, key=lambda r: r["round"])
    return {
        "rounds": len(rs),
        "moved": _sum(rs, "moved") or 0,
        "revoked": _sum(rs, "revoked") or 0,
        "stw_partition_seconds": _sum(rs, "stw_partition_seconds"),
        "max_balance": max((r["balance"] for r in rs), default=None),
        "final_balance": next((r["balance"] for r in reversed(rs) if r["members"]), None),
        "idle_member_rounds": _sum(rs, "idle_members") or 0,
        "dup_exposure_records": _sum(rs, "dup_exposure_records"),
        "errors": sum(1 for r in rs if r.get("error")),
    }


def replay_group_rows(hist: GroupHistory, assignors: list[str]) -> list[dict]:
    return episode_rows(hist, replay_all(hist, assignors))
