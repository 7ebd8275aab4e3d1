"""One group's raw silver rows → the history rows `history.build_history` reads.

The Spark job (`spark_job`) sends every silver row of a (cluster, group_id) to one Python
call, tagged with its source (`_src`); the joins that relate them (a generation record to
its member rows, a generation to the coordinator's "Preparing to rebalance" line before it,
a KIP-848 target epoch to each member's metadata as of that epoch, ...) run here, per group,
instead of as Spark joins: each Spark join over the whole lake is a shuffle and a Spark job
of its own, while one group's rows fit in memory many times over.

Sources (`_src`) and the columns each fills:
  gg  group_generations (already filtered to consumer generations): inc, gen, protocol, cp, off, ts_us, ts2_us (currentStateTimestamp)
  ma  member_assignments: cp, off, member_id, instance_id, client_id, topics, topic, partition
  ev  coordinator_events "rebalance_started": ts_us
  ep  rebalance_episodes with a duration: inc, gen (to_generation), dur
  ta  target_assignments: cp, gen (assignment epoch), off (epoch offset), ts_us (epoch ts), member_id, topic, partition
  cm  consumer_group_members: cp, member_id, flag (is_deletion), instance_id, client_id, topics, protocol (server assignor), off
  ca  current_assignments (not deletions): gen (member epoch), ts_us
  cs  offset commit statistics per partition: topic, partition, n, ts_us (first), ts2_us (last), o0, o1

An independent Spark formulation of the same rows (durations, commit statistics, member
metadata as of an epoch) is the test oracle, `tests/whatif_history_oracle.py`:
`tests/test_whatif_recordings.py` and `tests/test_whatif_incremental.py` check this module
against it on every recording.
"""
from __future__ import annotations

import json
from collections import defaultdict

SYNC_ONLY = "records: sync phase only (lower bound)"


def _ms(us):
    return None if us is None else us / 1000.0


def _ts_ms(us):
    # Spark's cast of the double milliseconds to long: truncation.
    return None if us is None else int(us / 1000.0)


def _classic(rows_by_src: dict[str, list[dict]], has_events: bool) -> list[dict]:
    gens = rows_by_src.get("gg", [])
    if not gens:
        return []
    members = defaultdict(list)
    for m in rows_by_src.get("ma", []):
        members[(m["cp"], m["off"])].append(m)
    starts = sorted(e["ts_us"] for e in rows_by_src.get("ev", []) if e["ts_us"] is not None)
    episodes: dict[tuple, float] = {}
    for e in rows_by_src.get("ep", []):
        k = (e["inc"], e["gen"])
        episodes[k] = e["dur"] if k not in episodes else max(episodes[k], e["dur"])
    # Previous generation record of the same incarnation, in log order.
    prev_ts: dict[int, object] = {}
    by_inc = defaultdict(list)
    for g in gens:
        by_inc[g["inc"]].append(g)
    for inc, gs in by_inc.items():
        gs.sort(key=lambda g: (g["off"], g["cp"]))
        last = None
        for g in gs:
            prev_ts[id(g)] = last
            last = g["ts_us"]
    out = []
    for g in gens:
        rec, prev = g["ts_us"], prev_ts[id(g)]
        dur = src = None
        if has_events and rec is not None:
            # The first start line after the previous generation: a rebalance restarted by
            # another join before it completed is still one episode.
            start = next((s for s in starts if s <= rec and (prev is None or s > prev)), None)
            if start is not None:
                dur, src = _ms(rec) - _ms(start), "coordinator_events"
        ep = episodes.get((g["inc"], g["gen"]))
        if ep is not None:
            dur, src = float(ep), "rebalance_episodes"
        if dur is None and g["ts2_us"] is not None and rec is not None:
            dur, src = _ms(rec) - _ms(g["ts2_us"]), SYNC_ONLY
        base = {"incarnation": g["inc"], "kind": "classic", "generation": g["gen"], "position": g["off"],
                "ts_ms": _ts_ms(rec), "protocol": g["protocol"], "duration_ms": dur, "duration_source": src,
                "topic_counts": None}
        ms = members.get((g["cp"], g["off"]))
        if not ms:
            out.append({**base, "member_id": None, "instance_id": None, "client_id": None, "topics": None,
                        "topic": None, "partition": None})
            continue
        for m in ms:
            out.append({**base, "member_id": m["member_id"], "instance_id": m["instance_id"], "client_id": m["client_id"],
                        "topics": m["topics"], "topic": m["topic"], "partition": m["partition"]})
    return out


def _consumer(rows_by_src: dict[str, list[dict]], has_current: bool, topic_counts: str | None) -> list[dict]:
    targets = rows_by_src.get("ta", [])
    if not targets:
        return []
    records = defaultdict(list)  # (cp, member) → member records
    assignor = None
    for m in rows_by_src.get("cm", []):
        records[(m["cp"], m["member_id"])].append(m)
        if m["protocol"] is not None and (assignor is None or m["protocol"] > assignor):
            assignor = m["protocol"]
    done: dict[int, int] = {}
    for c in rows_by_src.get("ca", []):
        if c["ts_us"] is not None:
            done[c["gen"]] = max(done.get(c["gen"], c["ts_us"]), c["ts_us"])
    parts: defaultdict[tuple, list] = defaultdict(list)  # (epoch record, member) → its target partitions
    epoch_members: dict = {}
    for t in targets:
        parts[(t["cp"], t["gen"], t["off"], t["ts_us"], t["member_id"])].append(t)
        epoch_members[(t["cp"], t["gen"], t["off"], t["ts_us"], t["member_id"])] = None
    # Each member's metadata as of the epoch: its newest member record before the epoch
    # record. A member with records, all after the epoch record, is left out (as Spark's
    # filtered left join does); one without any record keeps null metadata.
    # One step per epoch: an epoch recorded more than once (its target rewritten without a
    # new epoch) is taken as of its last record, the target the members reconciled to.
    last: dict[int, tuple] = {}
    for cp, epoch, off, ts, _ in epoch_members:
        if epoch not in last or (off, cp) > (last[epoch][2], last[epoch][0]):
            last[epoch] = (cp, epoch, off, ts)
    meta: dict[tuple, tuple] = {}  # (epoch, member) → (epoch record key, member record or None)
    for key in sorted(epoch_members, key=lambda k: (k[1], k[4])):
        cp, epoch, off, ts, mid = key
        if last[epoch] != (cp, epoch, off, ts):
            continue
        # The member's metadata as of the epoch: its newest member record before the epoch
        # record. A member with records, all after it, is left out; one without any record
        # keeps null metadata.
        recs = records.get((cp, mid))
        if recs:
            before = [r for r in recs if r["off"] < off]
            if not before:
                continue
            rec = max(before, key=lambda r: r["off"])
        else:
            rec = None
        meta[(epoch, mid)] = (key, rec)
    out = []
    for (epoch, mid), ((cp, _, off, ts, _), rec) in meta.items():
        end = done.get(epoch) if has_current else None
        if end is not None:
            dur, src = max(0.0, _ms(end) - _ms(ts)), "current_assignments: reconciliation"
        else:
            dur, src = None, None
        base = {"incarnation": 0, "kind": "consumer", "generation": epoch, "position": off, "ts_ms": _ts_ms(ts),
                # KIP-848's default server assignor (group.consumer.assignors' first entry) is uniform.
                "protocol": assignor or "uniform", "member_id": mid,
                "instance_id": rec["instance_id"] if rec else None, "client_id": rec["client_id"] if rec else None,
                "topics": rec["topics"] if rec else None, "duration_ms": dur, "duration_source": src,
                "topic_counts": topic_counts}
        ps = parts.get((cp, epoch, off, ts, mid)) or [None]  # no partitions: one row, partition null
        for p in ps:
            out.append({**base, "topic": p["topic"] if p else None, "partition": p["partition"] if p else None})
    return out


def commit_stats(rows: list[dict]) -> tuple[float | None, float | None]:
    """(mean commit interval ms, mean records per partition per second) over the group's
    partitions with at least two commits spanning some time. Partitions are summed in
    (topic, partition) order so the result does not depend on how rows arrived."""
    intervals, rates = [], []
    for r in sorted(rows, key=lambda r: (r["topic"] or "", r["partition"] if r["partition"] is not None else -1)):
        if r["ts_us"] is None or r["ts2_us"] is None or r["n"] is None:
            continue
        span_s = (_ms(r["ts2_us"]) - _ms(r["ts_us"])) / 1000.0
        if not (r["n"] > 1 and span_s > 0):
            continue
        intervals.append(span_s * 1000.0 / (r["n"] - 1))
        rates.append((r["o1"] - r["o0"]) / span_s)
    if not intervals:
        return None, None
    return sum(intervals) / len(intervals), sum(rates) / len(rates)


def protocol_segments(rows: list[dict]) -> dict[tuple[str, int, int], tuple[int, bool]]:
    """(kind, position, generation) of each step → (segment, carried_over).

    A group converted between the classic and the consumer (KIP-848) protocol has its steps
    of both kinds in one coordinator partition: in log order, each run of one kind is a
    *segment* (0, then one more at each conversion), replayed as a history of its own,
    since no assignor carries its state across a conversion. A conversion of a group with
    members writes the state it carried over as the first step of the new protocol, under
    the number the old protocol had reached (a consumer group's epoch = the classic
    generation, and back): that step is `carried_over`, what the members already owned, not
    an assignor's decision. (An empty group is upgraded as a new group, from epoch 1: its
    first step is a real assignment.)"""
    steps = sorted({(r["position"], r["kind"], r["generation"]) for r in rows})
    out: dict[tuple[str, int, int], tuple[int, bool]] = {}
    segment, prev = 0, None
    for pos, kind, gen in steps:
        carried = False
        if prev is not None and kind != prev[1]:
            segment += 1
            carried = gen == prev[2]
        out[(kind, pos, gen)] = (segment, carried)
        prev = (pos, kind, gen)
    return out


def group_histories(cluster: str, group_id: str, rows: list[dict], *, has_events: bool, has_current: bool,
                    topic_counts: str | None) -> dict[tuple[int, str, int], list[dict]]:
    """(incarnation, kind, segment) → history rows (the `build_history` input) of one group."""
    by_src: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_src[r["_src"]].append(r)
    interval, rate = commit_stats(by_src.get("cs", []))
    steps = _classic(by_src, has_events) + _consumer(by_src, has_current, topic_counts)
    segments = protocol_segments(steps)
    out: dict[tuple[int, str, int], list[dict]] = defaultdict(list)
    for r in steps:
        segment, _ = segments[(r["kind"], r["position"], r["generation"])]
        r.update(cluster=cluster, group_id=group_id, commit_interval_ms=interval, records_per_partition_s=rate,
                 segment=segment)
        out[(r["incarnation"], r["kind"], segment)].append(r)
    for hist in out.values():
        first = min(hist, key=lambda r: r["position"])
        carried = segments[(first["kind"], first["position"], first["generation"])][1]
        for r in hist:
            r["carried_over"] = carried
    return out


def stored_counts_json(stored: dict[str, int] | None) -> str | None:
    """The KIP-848 partition counts of a cluster (topic_ids), topics in name order."""
    if not stored:
        return None
    return json.dumps({t: stored[t] for t in sorted(stored)})
