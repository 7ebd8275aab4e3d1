"""Where the simulation writes: per broker, `__consumer_offsets-N/*.log` segments and a
`server.log`; and the ground truth as JSON lines under `truth/`.

Everything is streamed: batches go to the segment writers as they are made (rolled at
`segment_bytes`), lines to the log files, truth rows to their files; nothing accumulates.
Replicas get byte-identical batches at identical offsets, as a follower's log has.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence, TypedDict

from pipelines.segments.writer import (SegmentWriter, WriteRecord, build_batch_v2, build_control_batch,
                                       build_legacy_message_set)

from .config import Release, SimConfig

TRUTH_FILES = ("groups", "generations", "episodes", "reconsumed", "kip848_epochs")


class Counts(TypedDict):
    """What was written, for the summary."""

    records: int
    batches: int
    control_batches: int
    lines: int
    commits: int
    tombstones: int
    by_type: dict[int, int]  # record type -> records (Sim.run makes the keys strings for the summary)


class Output:
    def __init__(self, cfg: SimConfig, rel: Release):
        self.cfg = cfg
        self.rel = rel
        root = Path(cfg.out)
        self.root = root
        self.brokers = list(range(1, cfg.brokers + 1))
        self.writers = {}
        self.logs = {}
        for b in self.brokers:
            d = root / f"broker-{b}"
            d.mkdir(parents=True, exist_ok=True)
            self.writers[b] = SegmentWriter(d, segment_bytes=cfg.segment_bytes, start_offsets=cfg.start_offsets)
            self.logs[b] = open(d / "server.log", "w", encoding="utf-8", newline="\n", buffering=1 << 20)
        tdir = root / "truth"
        tdir.mkdir(parents=True, exist_ok=True)
        self.truth_files = {k: open(tdir / f"{k}.jsonl", "w", encoding="utf-8", buffering=1 << 20)
                            for k in TRUTH_FILES}
        self.last_ts: dict[int, int] = {}
        self.counts: Counts = {"records": 0, "batches": 0, "control_batches": 0, "lines": 0, "commits": 0,
                               "tombstones": 0, "by_type": {}}

    # Partition placement: leader of N is broker (N % B) + 1, replicas follow it round-robin.
    def replicas(self, partition: int) -> list[int]:
        B = len(self.brokers)
        return [(partition + j) % B + 1 for j in range(self.cfg.replication_factor)]

    def leader(self, partition: int) -> int:
        return partition % len(self.brokers) + 1

    def led_partitions(self, broker: int) -> list[int]:
        return [p for p in range(self.cfg.offsets_partitions) if self.leader(p) == broker]

    def append(self, partition: int, records: Sequence[tuple[int, bytes, bytes | None]], ts: int, *,
               transactional: bool = False, producer_id: int = -1, producer_epoch: int = -1,
               base_sequence: int = 0) -> int:
        """One batch of (record_type, key, value) written at `ts`; returns its base offset."""
        leader = self.writers[self.leader(partition)]
        base = leader.next_offset(partition)
        # the coordinator stamps records with its clock as it appends: never backwards
        ts = self.last_ts[partition] = max(ts, self.last_ts.get(partition, 0))
        recs = [WriteRecord(k, v, ts) for _, k, v in records]
        if self.rel.magic < 2:
            batch = build_legacy_message_set(recs, base, magic=self.rel.magic, timestamp=ts,
                                             compression=self.cfg.compression)
        else:
            batch = build_batch_v2(recs, base, timestamp=ts, compression=self.cfg.compression,
                                   transactional=transactional, producer_id=producer_id,
                                   producer_epoch=producer_epoch, base_sequence=base_sequence)
        last = base + len(recs) - 1
        for b in self.replicas(partition):
            self.writers[b].append_raw(partition, batch, base, last)
        c = self.counts
        c["records"] += len(recs)
        c["batches"] += 1
        bt = c["by_type"]
        for t, _, v in records:
            bt[t] = bt.get(t, 0) + 1
            if v is None:
                c["tombstones"] += 1
            elif t == 1:
                c["commits"] += 1
        return base

    def control(self, partition: int, control_type: str, ts: int, producer_id: int, producer_epoch: int) -> int:
        leader = self.writers[self.leader(partition)]
        base = leader.next_offset(partition)
        batch = build_control_batch(base, control_type, producer_id=producer_id, producer_epoch=producer_epoch,
                                    timestamp=ts)
        for b in self.replicas(partition):
            self.writers[b].append_raw(partition, batch, base, base)
        self.counts["control_batches"] += 1
        return base

    def lines(self, broker: int, lines: list[str]) -> None:
        if lines:
            self.logs[broker].write("".join(lines))
            self.counts["lines"] += len(lines)

    def truth(self, kind: str, row: dict) -> None:
        self.truth_files[kind].write(json.dumps(row, separators=(",", ":")) + "\n")

    def close(self, summary: dict) -> None:
        for w in self.writers.values():
            w.close()
        for f in self.logs.values():
            f.close()
        for f in self.truth_files.values():
            f.close()
        with open(self.root / "truth" / "summary.json", "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
            f.write("\n")
