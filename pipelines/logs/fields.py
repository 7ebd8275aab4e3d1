"""The fixed record shape of one parsed coordinator event (silver table `coordinator_events`).

Every event, whatever its type, carries exactly these keys (None where the line does not
print the value), so the lake can build one fixed schema from `EVENT_FIELDS` and
`FIELD_TYPES` without looking at data.
"""
from __future__ import annotations

import functools
import sys
import unicodedata

# (name, type) in column order. Types are the lake's logical types:
# "string", "long", "int", "list<string>".
_FIELDS: tuple[tuple[str, str], ...] = (
    ("event", "string"),                 # event type, see EVENT_TYPES
    ("ts", "long"),                      # epoch ms UTC (None if the timestamp did not parse)
    ("ts_text", "string"),               # the raw log4j %d text, zone-less as printed
    ("level", "string"),                 # INFO, WARN, ...
    ("logger", "string"),                # log4j %c
    ("broker", "int"),                   # broker / node id
    ("coordinator_partition", "int"),    # __consumer_offsets partition of the group or shard
    ("coordinator_epoch", "int"),        # leader epoch of that partition (load/unload/elect lines)
    ("group_id", "string"),
    ("generation", "int"),               # classic generation (old generation on rebalance_started)
    ("epoch", "int"),                    # KIP-848 group / member / assignment epoch
    ("previous_epoch", "int"),           # KIP-848 member previousEpoch
    ("member_id", "string"),             # the member the event is about (for a rebalance: the one in the reason)
    ("group_instance_id", "string"),     # static membership id
    ("client_id", "string"),
    ("client_host", "string"),
    ("members", "int"),                  # member count
    ("static_members", "int"),
    ("leader", "string"),                # classic leader member id
    ("protocol", "string"),              # KIP-848 join: consumer/classic/share/streams
    ("reason", "string"),                # the coordinator's reason text
    ("client_reason", "string"),         # KIP-800 reason sent by the client
    ("trigger", "string"),               # classified cause, see TRIGGERS
    ("state", "string"),                 # group state (classic) or member state (KIP-848)
    ("load_ms", "long"),                 # coordinator load/unload durations
    ("scheduler_ms", "long"),            # part of load_ms spent waiting in the scheduler
    ("duration_ms", "long"),             # other printed durations (offset expiry, cleanup, regex scan)
    ("assignor", "string"),
    ("assignor_ms", "long"),
    ("assigned_partitions", "string"),   # as printed, e.g. "[topicId-0, topicId-1]"
    ("revoked_partitions", "string"),
    ("assignment", "string"),            # full target assignment where printed (3.9 INFO)
    ("removed_members", "list<string>"),
    ("groups", "list<string>"),          # deleted groups
    ("count", "long"),                   # offsets removed, records loaded, tombstones, topics scanned
    ("error", "string"),                 # read/decode error (event == "error") or error code printed
    ("file", "string"),
    ("line", "long"),                    # 1-based line number of the entry's first line in `file`
    ("message", "string"),               # raw message text (without timestamp, level and logger)
)

EVENT_FIELDS: tuple[str, ...] = tuple(name for name, _ in _FIELDS)
FIELD_TYPES: dict[str, str] = dict(_FIELDS)

# Trigger classes of a rebalance start (and of leave/fail/fence events that cause one).
TRIGGERS: tuple[str, ...] = (
    "join",               # a new member, or a known member re-joining
    "leave",              # explicit LeaveGroup
    "crash",              # heartbeat / session expiry
    "poll_timeout",       # client reason `consumer poll timeout has expired.` (max.poll.interval.ms)
    "leader_rejoin",      # the leader re-joined (e.g. to pick up topic metadata changes)
    "metadata_change",    # a member changed its subscription/metadata
    "static_replacement", # a static member came back with a new member id
    "coordinator_load",   # freshly-loaded group over group.max.size
    "sync_expiry",        # members that never sent SyncGroup were removed
    "unknown",
)

# Event types this package emits. "unrecognized" and "error" are produced for coordinator
# lines no format matches and for input that could not be read.
EVENT_TYPES: tuple[str, ...] = (
    "rebalance_started", "group_stabilized", "assignment_received", "rebalance_failed",
    "member_joined", "member_left", "pending_member_left", "member_failed",
    "pending_member_expired", "member_fenced", "members_removed",
    "static_member_replaced", "static_member_no_rebalance", "empty_assignment",
    "group_empty", "group_dead", "group_loaded", "group_unloaded", "member_loaded",
    "leader_changed", "group_converted", "groups_deleted", "offsets_expired",
    "offsets_deleted", "tombstones_generated", "commit_mix_warning", "unknown_record",
    "group_write_failed",
    "coordinator_elected", "coordinator_resigned", "coordinator_loading",
    "coordinator_loaded", "coordinator_unloading", "coordinator_unloaded",
    "coordinator_lifecycle",
    # The replica manager's line of a metadata change moving offsets partitions (`count`: how
    # many it names), logged on receipt: the brokers' clocks are compared by it.
    "replica_fetchers_removed",
    "group_epoch_bumped", "subscription_metadata_computed", "member_subscription_updated",
    "target_assignment_computed", "member_assignment_state", "regex_refreshed",
    "unrecognized", "error",
)


def empty_event() -> dict:
    """A record with every key present and None."""
    return dict.fromkeys(EVENT_FIELDS)


# The lake's integer columns: a printed number past them cannot be stored (and int() itself
# refuses a run of more than 4300 digits), so the parser turns such a line into an error record.
_BOUNDS = {"int": 1 << 31, "long": 1 << 63}
_MAX_DIGITS = 20


@functools.lru_cache(maxsize=1)
def _unicode_zeros() -> str:
    """Every decimal digit zero of Unicode (U+0030, U+0660, U+06F0, ...)."""
    return "".join(ch for ch in map(chr, range(sys.maxunicode + 1)) if ch.isdecimal() and unicodedata.decimal(ch) == 0)


def typed_int(key: str, digits: str) -> int | None:
    """Field `key`'s value from its printed digits, or None when it does not fit the field's type."""
    body = digits.lstrip("-").lstrip("0") or "0"   # 40,000 zeros are a 0, not too many digits
    if len(body) > _MAX_DIGITS:
        # `\d` also takes other scripts' digits, zeros included (rare: only then this look).
        body = body.lstrip(_unicode_zeros()) or "0"
        if len(body) > _MAX_DIGITS:
            return None
    value = -int(body) if digits.startswith("-") else int(body)
    bound = _BOUNDS[FIELD_TYPES[key]]
    return value if -bound <= value < bound else None
