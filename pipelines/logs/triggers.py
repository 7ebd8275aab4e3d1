"""Classify why a rebalance started, from the coordinator's reason and the client's reason.

The coordinator's `reason:` texts are listed in reference §2.3/§2.5 (wording and case vary by
version, so every pattern is case-insensitive where Kafka changed case). The client's KIP-800
reason refines the class: a LeaveGroup sent because `max.poll.interval.ms` expired is a
poll timeout, not an ordinary leave; a re-join because metadata or the subscription changed is
a metadata change.
"""
from __future__ import annotations

import re

from . import linear

# Each row: (compiled pattern over the coordinator reason, trigger, what the groups mean).
# Named groups: member_id, group_instance_id, removed (a printed collection of member ids).
# Linear-time patterns (see linear.py): a reason holds untrusted member ids.
_REASONS: tuple[tuple[linear.LinearPattern, str], ...] = tuple(
    (linear.compile(p, re.IGNORECASE if ci else 0), trig)
    for p, trig, ci in (
        (r"^Adding new member (?P<member_id>.+?) with group instance ?id (?P<group_instance_id>.*)$", "join", False),
        (r"^Adding new member (?P<member_id>.+)$", "join", False),
        (r"^Member (?P<member_id>.+?) (?:is )?joining group during (?P<state>\w+)$", "join", False),
        (r"^Updating metadata for static member (?P<member_id>.+?) with instance id (?P<group_instance_id>.*)$", "metadata_change", False),
        (r"^Updating metadata for member (?P<member_id>.+?) during (?P<state>\w+)$", "metadata_change", False),
        (r"^leader (?P<member_id>.+?) re-joining group during (?P<state>\w+)$", "leader_rejoin", True),
        (r"^removing member (?P<member_id>.+?) on LeaveGroup$", "leave", True),
        (r"^removing member (?P<member_id>.+?) on heartbeat expiration\.?$", "crash", True),
        (r"^Removing (?P<removed>.*) on pending sync request expiration\.?$", "sync_expiry", True),
        (r"^explicit `LeaveGroup` request for \((?P<removed>.*)\) members\.?$", "leave", True),
        (r"^Downgrade group (?P<group_id>.+) from consumer to classic for member leaving\.?$", "leave", False),
        (r"^Group's selectedProtocol will change because static member (?P<member_id>.+?) with instance id "
         r"(?P<group_instance_id>.+?) joined with change of protocol\.?$", "static_replacement", False),
        # `\b` spelled out (RE2 has no Unicode word boundary): a non-word character or the end.
        (r"^Freshly-loaded group(?:\W|$)", "coordinator_load", False),
        (r"^error (?P<error>.+?) when storing group assignment during SyncGroup \(member: (?P<member_id>.+)\)\.?$", "unknown", True),
    )
)

_POLL_TIMEOUT = "consumer poll timeout has expired"
_METADATA_CLIENT_REASONS = ("cached metadata has changed", "subscription has changed",
                            "received assignment does not match the current subscription")

_CLIENT_REASON_SEP = "; client reason: "


def split_client_reason(reason: str) -> tuple[str, str | None]:
    """`X; client reason: Y` → (X, Y). The coordinator's part comes first (KIP-800)."""
    head, sep, tail = reason.partition(_CLIENT_REASON_SEP)
    return (head, tail) if sep else (reason, None)


def parse_member_list(text: str | None) -> list[str] | None:
    """A printed collection of member ids: Scala `Set(a, b)`/`List(a)`, Java `[a, b]`, or `a, b`."""
    if text is None:
        return None
    t = text.strip().rstrip(".")
    m = re.fullmatch(r"(?:Set|List|HashSet|ArrayBuffer|Vector)?\((.*)\)|\[(.*)\]|\{(.*)\}", t, re.DOTALL)
    if m:
        t = next(g for g in m.groups() if g is not None)
    return [s.strip() for s in t.split(",") if s.strip()]


def optional_id(text: str | None) -> str | None:
    """Scala `Some(x)`/`None`, Java `Optional[x]`/`Optional.empty`/`null` → x or None."""
    if text is None:
        return None
    t = text.strip()
    if t in ("None", "null", "Optional.empty", ""):
        return None
    m = re.fullmatch(r"(?:Some\((.*)\)|Optional\[(.*)\])", t)
    if m:
        return m.group(1) if m.group(1) is not None else m.group(2)
    return t


def classify_reason(reason: str | None, client_reason: str | None = None) -> tuple[str, dict]:
    """Return (trigger, extracted fields) for a coordinator rebalance reason."""
    fields: dict = {}
    trigger = "unknown"
    if reason:
        for pattern, trig in _REASONS:
            m = pattern.match(reason)
            if m:
                trigger = trig
                groups = m.groupdict()
                if groups.get("member_id") is not None:
                    fields["member_id"] = groups["member_id"]
                if "group_instance_id" in groups:
                    fields["group_instance_id"] = optional_id(groups["group_instance_id"])
                if groups.get("removed") is not None:
                    removed = parse_member_list(groups["removed"])
                    fields["removed_members"] = removed
                    if removed and len(removed) == 1:
                        fields["member_id"] = removed[0]
                if groups.get("error") is not None:
                    fields["error"] = groups["error"]
                break
    return refine_with_client_reason(trigger, client_reason), fields


def refine_with_client_reason(trigger: str, client_reason: str | None) -> str:
    if not client_reason:
        return trigger
    cr = client_reason.strip().lower()
    if cr.startswith(_POLL_TIMEOUT) and trigger in ("leave", "unknown"):
        return "poll_timeout"
    if cr.startswith(_METADATA_CLIENT_REASONS) and trigger in ("join", "leader_rejoin", "unknown"):
        return "metadata_change"
    return trigger
