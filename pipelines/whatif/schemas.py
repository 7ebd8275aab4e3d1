"""Arrow schemas of the what-if tables (`whatif_episodes`, `whatif_summary`; docs/whatif.md)."""
from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")

WHATIF_EPISODES = pa.schema([
    pa.field("cluster", pa.string()),
    pa.field("group_id", pa.string()),
    pa.field("incarnation", pa.int32()),
    pa.field("segment", pa.int32()),               # protocol segment: 0, +1 at each classic <-> consumer conversion
    pa.field("group_kind", pa.string()),          # classic | consumer (KIP-848)
    pa.field("real_assignor", pa.string()),        # the assignor the group really used (our name)
    pa.field("assignor", pa.string()),             # "actual" for what really happened
    pa.field("protocol", pa.string()),             # eager | cooperative | consumer | handoff
    pa.field("round", pa.int32()),                 # order of the replayed round within (group, assignor)
    pa.field("step", pa.int32()),                  # index of the real step (generation record) replayed
    pa.field("generation", pa.int32()),            # real generation (classic) or assignment epoch (KIP-848)
    pa.field("phase", pa.string()),                # rebalance | followup | reconcile
    pa.field("record_ts", TS),
    pa.field("members", pa.int32()),
    pa.field("partitions", pa.int32()),
    pa.field("assigned", pa.int32()),
    pa.field("moved", pa.int32()),
    pa.field("revoked", pa.int32()),
    pa.field("paused", pa.int32()),
    pa.field("duration_ms", pa.float64()),
    pa.field("duration_source", pa.string()),
    pa.field("stw_partition_seconds", pa.float64()),
    pa.field("balance", pa.int32()),
    pa.field("max_per_member", pa.int32()),
    pa.field("min_per_member", pa.int32()),
    pa.field("idle_members", pa.int32()),
    pa.field("dup_exposure_records", pa.float64()),
    pa.field("complete", pa.bool_()),
    pa.field("assignment", pa.string()),           # JSON {member_id: ["topic-p", ...]}
    pa.field("matches_actual", pa.bool_()),        # only where assignor == real_assignor
    pa.field("divergence", pa.string()),
    pa.field("error", pa.string()),
])

WHATIF_SUMMARY = pa.schema([
    pa.field("cluster", pa.string()),
    pa.field("group_id", pa.string()),
    pa.field("incarnation", pa.int32()),
    pa.field("segment", pa.int32()),
    pa.field("group_kind", pa.string()),
    pa.field("real_assignor", pa.string()),
    pa.field("assignor", pa.string()),
    pa.field("protocol", pa.string()),
    pa.field("steps", pa.int32()),                 # real steps replayed
    pa.field("rounds", pa.int32()),                # rounds (a cooperative handover is two)
    pa.field("moved", pa.int64()),
    pa.field("revoked", pa.int64()),
    pa.field("stw_partition_seconds", pa.float64()),
    pa.field("max_balance", pa.int32()),
    pa.field("final_balance", pa.int32()),
    pa.field("idle_member_rounds", pa.int64()),
    pa.field("dup_exposure_records", pa.float64()),
    pa.field("errors", pa.int32()),
    pa.field("divergences", pa.int32()),           # only for assignor == real_assignor (else null)
    pa.field("divergence_list", pa.string()),      # JSON list of {generation, phase, kind, detail}
    pa.field("actual_rounds", pa.int32()),
    pa.field("actual_moved", pa.int64()),
    pa.field("actual_revoked", pa.int64()),
    pa.field("actual_stw_partition_seconds", pa.float64()),
    pa.field("actual_max_balance", pa.int32()),
    pa.field("actual_idle_member_rounds", pa.int64()),
    pa.field("actual_dup_exposure_records", pa.float64()),
    pa.field("commit_interval_ms", pa.float64()),
    pa.field("records_per_partition_s", pa.float64()),
    pa.field("notes", pa.string()),
])
