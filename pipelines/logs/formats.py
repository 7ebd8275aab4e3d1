"""The table of every group-coordinator line format, Kafka 0.9 to 4.x (reference §2, §7).

One row per printed format: (event type, versions, a literal needle, a regex over the message
body, constant fields, optional post-processing). The parser tries only rows whose needle is
in the body, in table order, and the first full match wins, so more specific rows come first.
Named groups that are `EVENT_FIELDS` names are copied (and typed) directly; other groups are
handled by the row's post-processing.

The body is the message with its logging prefix removed (`[GroupCoordinator 1]: `,
`[GroupCoordinator id=1 topic=__consumer_offsets partition=2] `,
`[GroupMetadataManager brokerId=1] `, `[Group Metadata Manager on Broker 1]: `) and 0.9-0.11's
`[__consumer_offsets,N]` rewritten as `__consumer_offsets-N`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from . import linear
from .fields import typed_int
from .triggers import classify_reason, optional_id, parse_member_list, split_client_reason

G = r"(?P<group_id>.+)"                      # group ids are untrusted and may contain spaces
GL = r"(?P<group_id>.+?)"                    # same, inside a `[GroupId ...]` bracket
M = r"(?P<member_id>.+)"
P = r"(?: \(__consumer_offsets-(?P<coordinator_partition>\d+)\))?"
TP = r"__consumer_offsets-(?P<coordinator_partition>\d+)"
EPOCH = r"(?:(?:OptionalInt\[)?(?P<coordinator_epoch>-?\d+)\]?|OptionalInt\.empty)"
END = r"\.*$"                                # Java adds a period; some 4.x lines print two
LEAVE = r"through explicit `LeaveGroup`(?: request)?"
CLIENT = r"(?:; client reason: (?P<client_reason>.*?))?"


@dataclass(frozen=True)
class Format:
    event: str
    versions: str
    needle: str
    regex: linear.LinearPattern   # untrusted text between fixed words: never backtracking
    const: dict = field(default_factory=dict)
    post: Callable[[dict, dict], None] | None = None


# --- post-processing helpers -------------------------------------------------------------

# An offsets partition in a printed set of partitions (`[__consumer_offsets,N]` was rewritten).
_OFFSETS_PARTITION_RE = re.compile(r"(?<![\w.\-])__consumer_offsets-\d+(?![\w.\-])")


def _offsets_partitions(rec: dict, g: dict) -> None:
    rec["count"] = len(_OFFSETS_PARTITION_RE.findall(g["plist"]))

_MM_RE = linear.compile(
    r"memberId=(?P<member_id>.*?), groupInstanceId=(?P<gi>.*?), clientId=(?P<client_id>.*?), "
    r"clientHost=(?P<client_host>.*?), sessionTimeoutMs="
)


def _member_metadata(rec: dict, g: dict) -> None:
    """Scala `MemberMetadata(memberId=…, groupInstanceId=…, clientId=…, clientHost=/ip, …)`."""
    mm = _MM_RE.search(g["mm"])
    if mm:
        rec["member_id"] = mm.group("member_id")
        rec["group_instance_id"] = optional_id(mm.group("gi"))
        rec["client_id"] = mm.group("client_id")
        rec["client_host"] = mm.group("client_host").lstrip("/")
    else:
        rec["member_id"] = g["mm"]


def _leave(rec: dict, g: dict) -> None:
    if g.get("mm") is not None:
        _member_metadata(rec, g)
    if g.get("gi") is not None:
        rec["group_instance_id"] = optional_id(g["gi"])
    rec["reason"] = "LeaveGroup"
    rec["trigger"] = "leave"
    cr = rec.get("client_reason")
    if cr and cr.strip().lower().startswith("consumer poll timeout has expired"):
        rec["trigger"] = "poll_timeout"


def _rebalance(rec: dict, g: dict) -> None:
    raw = g.get("raw_reason")
    if raw is None:
        rec["trigger"] = "unknown"
        return
    reason, client_reason = split_client_reason(raw)
    rec["reason"] = reason
    rec["client_reason"] = client_reason
    trigger, extra = classify_reason(reason, client_reason)
    rec["trigger"] = trigger
    for k, v in extra.items():
        rec[k] = v


def _gi(rec: dict, g: dict) -> None:
    if "gi" in g:
        rec["group_instance_id"] = optional_id(g["gi"])


def _removed(rec: dict, g: dict) -> None:
    rec["removed_members"] = parse_member_list(g.get("removed"))
    _gi(rec, g)


def _static_replaced(rec: dict, g: dict) -> None:
    _gi(rec, g)
    rec["removed_members"] = [g["old"]]
    rec["trigger"] = "static_replacement"


def _static_replaced_scala(rec: dict, g: dict) -> None:
    _gi(rec, g)
    rec["member_id"] = g["old"]
    rec["removed_members"] = [g["old"]]
    rec["trigger"] = "static_replacement"


def _fenced(rec: dict, g: dict) -> None:
    why = g.get("why") or ""
    rec["reason"] = why
    if "session expired" in why or "session timeout" in why:
        rec["trigger"] = "crash"
    elif "rebalance timeout" in why or "within" in why:
        # The member did not finish joining/revoking within its rebalance timeout, which is
        # max.poll.interval.ms for the Java consumer: the consumer-side analogue of a poll timeout.
        rec["trigger"] = "poll_timeout"
    else:
        rec["trigger"] = "unknown"


def _scala_fenced(rec: dict, g: dict) -> None:
    _gi(rec, g)
    rec["reason"] = f"fenced by current memberId={g['current']} during operation {g['op']}"
    rec["trigger"] = "static_replacement"


def _groups(rec: dict, g: dict) -> None:
    rec["groups"] = parse_member_list(g.get("glist"))


def _mm_loaded(rec: dict, g: dict) -> None:
    _member_metadata(rec, g)


def _leader_changed(rec: dict, g: dict) -> None:
    rec["removed_members"] = [g["old"]]
    rec["group_instance_id"] = optional_id(g.get("gi"))


_TRANSITION_RE = linear.compile(
    r"memberEpoch=(?P<epoch>-?\d+), previousMemberEpoch=(?P<prev>-?\d+), state=(?P<state>\w+)"
)


def _transition_37(rec: dict, g: dict) -> None:
    """3.7 `Member X transitioned from <ConsumerGroupMember…> to <ConsumerGroupMember…>`."""
    to = g.get("to") or ""
    m = _TRANSITION_RE.search(to)
    if m:
        # Numbers past the columns' range stay null; the text is kept in `reason`.
        rec["epoch"] = typed_int("epoch", m.group("epoch"))
        rec["previous_epoch"] = typed_int("previous_epoch", m.group("prev"))
        rec["state"] = m.group("state")
    rec["reason"] = f"transitioned from {g.get('frm')} to {to}"


def _join_trigger(rec: dict, g: dict) -> None:
    _gi(rec, g)
    rec["trigger"] = "join"


def _crash(rec: dict, g: dict) -> None:
    rec["trigger"] = "crash"


def _sync_expiry(rec: dict, g: dict) -> None:
    _removed(rec, g)
    rec["trigger"] = "sync_expiry"


# --- the table ---------------------------------------------------------------------------

def _f(event: str, versions: str, needle: str, pattern: str, post=None, **const) -> Format:
    return Format(event, versions, needle, linear.compile(pattern, re.DOTALL), const, post)


FORMATS: tuple[Format, ...] = (
    # Rebalance start ------------------------------------------------------------------
    _f("rebalance_started", "Scala 2.1-3.9 / Java 3.7+", "Preparing to rebalance group",
       rf"^Preparing to rebalance group {G} in state (?P<state>\w+) with old generation (?P<generation>-?\d+)"
       rf"{P} \(reason: (?P<raw_reason>.*)\)\.?$", _rebalance),
    _f("rebalance_started", "Scala 1.1-2.0", "Preparing to rebalance group",
       rf"^Preparing to rebalance group {G} with old generation (?P<generation>-?\d+){P}$", _rebalance),
    _f("rebalance_started", "Scala 0.9-0.11", "Preparing to restabilize group",
       rf"^Preparing to restabilize group {G} with old generation (?P<generation>-?\d+)$", _rebalance),

    # Stabilized / assignment ----------------------------------------------------------
    _f("group_stabilized", "Scala 2.8+ / Java 3.7+", "Stabilized group",
       rf"^Stabilized group {G} generation (?P<generation>\d+){P} with (?P<members>\d+) members\.?$"),
    _f("group_stabilized", "Scala 0.10-2.7", "Stabilized group",
       rf"^Stabilized group {G} generation (?P<generation>\d+){P}$"),
    _f("group_stabilized", "Scala 0.9", "Restabilizing group",
       rf"^Restabilizing group {G} with new generation (?P<generation>\d+)$"),
    _f("assignment_received", "Scala 3.0+ / Java 3.7+", "Assignment received from leader ",
       rf"^Assignment received from leader (?P<leader>.+?) for group {G} for generation (?P<generation>\d+)\. "
       r"The group has (?P<members>\d+) members, (?P<static_members>\d+) of which are static\.$"),
    _f("assignment_received", "Scala 2.8", "Assignment received from leader for group",
       rf"^Assignment received from leader for group {G} for generation (?P<generation>\d+)\. "
       r"The group has (?P<members>\d+) members, (?P<static_members>\d+) of which are static\.$"),
    _f("assignment_received", "Scala 0.9-2.7", "Assignment received from leader for group",
       rf"^Assignment received from leader for group {G} for generation (?P<generation>\d+)$"),
    _f("rebalance_failed", "Scala / Java", "could not complete rebalance",
       rf"^Group {G} could not complete rebalance because no members rejoined{END}"),

    # Leaves -----------------------------------------------------------------------------
    _f("member_left", "Scala 3.0+", "has left group",
       rf"^Member (?P<mm>MemberMetadata\(.*\)) has left group {G} {LEAVE}{CLIENT}$", _leave),
    _f("member_left", "Scala 2.4-2.8", "has left, removing it from the group",
       rf"^Member\[group\.instance\.id (?P<gi>.*?), member\.id {M}\] in group {G} has left, removing it from the group\.?$",
       _leave),
    _f("pending_member_left", "Scala 3.0+", "Pending member with memberId=",
       rf"^Pending member with memberId={M} has left group {G} {LEAVE}{CLIENT}$", _leave),
    _f("pending_member_left", "Java 3.7+", "Pending member ",
       rf"^\[Group(?:Id)? {GL}\] Pending member {M} has left group {LEAVE}{CLIENT}$", _leave),
    _f("member_left", "Java 3.7+ (static)", "Static member ",
       rf"^\[Group(?:Id)? {GL}\] Static [Mm]ember {M} with instance id (?P<gi>.+) has left group {LEAVE}{CLIENT}$",
       _leave),
    _f("member_left", "Java 3.7-4.x (dynamic)", "has left group through explicit",
       rf"^\[Group(?:Id)? {GL}\] (?:Dynamic [Mm]ember|Member) {M} has left group {LEAVE}{CLIENT}$", _leave),

    # Failures / expiry ------------------------------------------------------------------
    _f("member_failed", "Scala 1.1+ / Java 3.7+", "has failed, removing it from the group",
       rf"^Member {M} in group {G} has failed, removing it from the group{END}", _crash),
    _f("member_failed", "Scala 0.9-1.0 (TRACE)", "has failed",
       rf"^Member {M} in group {G} has failed$", _crash),
    _f("pending_member_expired", "Scala 2.3+ / Java", "has been removed after session timeout expiration",
       rf"^Pending member {M} in group {G} has been removed after session timeout expiration{END}", _crash),
    _f("members_removed", "Scala / Java", "removed dynamic members who haven't joined",
       rf"^Group {G} removed dynamic members who haven't joined: (?P<removed>.*)$", _removed),
    _f("members_removed", "Scala 2.8+ / Java (DEBUG)", "removed members who haven't sent their sync request",
       rf"^Group {G} removed members who haven't sent their sync request: (?P<removed>.*)$", _sync_expiry),

    # Empty / dead -------------------------------------------------------------------------
    _f("group_empty", "Scala 0.10.1+ / Java 3.7+", "is now empty",
       rf"^Group {G} with generation (?P<generation>\d+) is now empty{P}\.?$"),
    _f("group_dead", "Scala / Java", "is dead, skipping rebalance stage",
       rf"^Group {G} is dead, skipping rebalance stage{END}"),
    _f("group_dead", "Scala 0.9-0.10", "is dead and removed",
       rf"^Group {G} generation (?P<generation>\d+) is dead and removed$"),
    _f("group_dead", "Scala 0.11+ (GroupMetadataManager)", "transitioned to Dead",
       rf"^Group {G} transitioned to Dead in generation (?P<generation>\d+)$"),
    _f("group_write_failed", "Scala 0.10-0.11 (WARN)", "Failed to write empty metadata for group",
       r"^Failed to write empty metadata for group (?P<group_id>.+?): (?P<error>.*)$"),

    # Joins --------------------------------------------------------------------------------
    _f("member_joined", "Scala 2.2+ / Java 3.7+", "Dynamic member with unknown member id joins group",
       rf"^Dynamic member with unknown member id joins group {G} in (?P<state>\w+) state\. Created a new member id {M} "
       r"(?:and request(?:ing)? the member to rejoin with this id|for this member and add to the group)\.$",
       _join_trigger),
    _f("member_joined", "Java 3.7+", "Dynamic member with unknown member id joins group",
       rf"^Dynamic member with unknown member id joins group {G} in state (?P<state>\w+)\. Created a new member id {M} "
       r"and added the member to the group\.$", _join_trigger),
    _f("member_joined", "Java 3.7+ (pending)", "Pending dynamic member with id",
       rf"^Pending dynamic member with id {M} joins group {G} in (?P<state>\w+) state\. Adding to the group now\.$",
       _join_trigger),
    _f("static_member_replaced", "Scala 2.3+ / Java 3.7+", "Replacing previously mapped member",
       rf"^Static member with groupInstanceId=(?P<gi>.+?) and unknown member id joins group {G} in (?P<state>\w+) state\. "
       r"Replacing previously mapped member (?P<old>.+) with this groupInstanceId\.$", _static_replaced_scala),
    _f("member_joined", "Scala 2.3+ / Java 3.7+ (static)", "Static member with groupInstanceId=",
       rf"^Static member with groupInstanceId=(?P<gi>.+?) and unknown member id joins group {G} in (?P<state>\w+) state\. "
       rf"Created a new member id {M} for this member and add to the group\.$", _join_trigger),
    _f("static_member_no_rebalance", "Scala 2.3+ / Java 3.7+", "Static member which joins during Stable stage",
       r"^Static member which joins during Stable stage and doesn't affect (?:selectProtocol|the selected protocol) "
       r"will not trigger (?:a )?rebalance\.$"),
    _f("member_fenced", "Scala 2.3+ (static)", "for static member with groupInstanceId=",
       rf"^Request memberId={M} for static member with groupInstanceId=(?P<gi>.+?) is fenced by current "
       r"memberId=(?P<current>.+) during operation (?P<op>\S+)$", _scala_fenced),
    _f("empty_assignment", "Scala / Java (WARN)", "Setting empty assignments for members",
       rf"^Setting empty assignments for members (?P<removed>.+) of {G} for generation (?P<generation>\d+)$", _removed),
    _f("empty_assignment", "Scala / Java (WARN)", "Sending empty assignment to member",
       rf"^Sending empty assignment to member {M} of {G} for generation (?P<generation>\d+) with no errors$"),

    # Coordinator moves and loading (Scala) ----------------------------------------------------
    _f("coordinator_elected", "Scala 2.x-3.9", "Elected as the group coordinator for partition",
       rf"^Elected as the group coordinator for partition (?P<coordinator_partition>\d+) in epoch {EPOCH}$"),
    _f("coordinator_resigned", "Scala 2.x-3.9", "Resigned as the group coordinator for partition",
       rf"^Resigned as the group coordinator for partition (?P<coordinator_partition>\d+) in epoch {EPOCH}$"),
    _f("coordinator_loading", "Scala 2.x-3.9", "Scheduling loading of offsets and group metadata",
       rf"^Scheduling loading of offsets and group metadata from {TP}(?: for epoch {EPOCH})?$"),
    _f("coordinator_loading", "Scala 0.9-1.x", "Loading offsets and group metadata from",
       rf"^Loading offsets and group metadata from {TP}$"),
    _f("coordinator_loaded", "Scala 2.x-3.9", "Finished loading offsets and group metadata from",
       rf"^Finished loading offsets and group metadata from {TP} in (?P<load_ms>\d+) milliseconds"
       rf"(?: for epoch {EPOCH}, of which (?P<scheduler_ms>\d+) milliseconds was spent in the scheduler)?\.$"),
    _f("coordinator_loaded", "Scala 0.9-0.11", "Finished loading offsets from",
       rf"^Finished loading offsets from {TP} in (?P<load_ms>\d+) milliseconds\.?$"),
    _f("coordinator_unloading", "Scala 2.x-3.9", "Scheduling unloading of offsets and group metadata",
       rf"^Scheduling unloading of offsets and group metadata from {TP}$"),
    _f("coordinator_unloaded", "Scala 0.11-3.9", "Finished unloading ",
       rf"^Finished unloading {TP}(?: for coordinator epoch {EPOCH})?\. Removed (?P<count>\d+) cached offsets "
       r"and \d+ cached groups\.$"),
    _f("group_loaded", "Scala", "Loading group metadata for ",
       rf"^Loading group metadata for {G} with generation (?P<generation>\d+)$"),
    _f("group_unloaded", "Scala", "Unloading group metadata for ",
       rf"^Unloading group metadata for {G} with generation (?P<generation>\d+)$"),
    _f("offsets_expired", "Scala", "expired offsets in",
       r"^Removed (?P<count>\d+) expired offsets in (?P<duration_ms>\d+) milliseconds\.$"),
    _f("groups_deleted", "Scala / Java", "The following groups were deleted: ",
       r"^The following groups were deleted: (?P<glist>.*)\. A total of (?P<count>\d+) offsets were removed\.$", _groups),
    _f("offsets_deleted", "Scala / Java", "The following offsets of the group ",
       rf"^The following offsets of the group {G} were deleted: (?P<assignment>.*?)\.?$"),
    _f("offsets_deleted", "Scala 2.x+", "offsets associated with deleted partitions",
       r"^Removed (?P<count>\d+) offsets associated with deleted partitions: (?P<assignment>.*?)\.?$"),
    _f("commit_mix_warning", "Scala (WARN)", "has received offset commits from consumers as well as transactional",
       r"^group: (?P<group_id>.+) with leader: (?P<leader>.+) has received offset commits from consumers as well as "
       r"transactional producers\..*$"),
    _f("unknown_record", "Scala (WARN)", "Unknown message key with version",
       rf"^Unknown message key with version (?P<count>\d+) while loading offsets and group metadata from {TP}\..*$"),
    _f("unknown_record", "Scala (WARN)", "Unknown group metadata message key",
       rf"^Unknown (?:group metadata )?message key.* from {TP}\..*$"),

    # GroupMetadata.scala ----------------------------------------------------------------
    _f("member_loaded", "Scala", "Loaded member ",
       rf"^Loaded member (?P<mm>MemberMetadata\(.*\)) in group {G} with generation (?P<generation>\d+)\.$", _mm_loaded),
    _f("leader_changed", "Scala 2.x+", "failed to join before rebalance timeout, while new leader",
       r"^Group leader \[member\.id: (?P<old>.+?), group\.instance\.id: (?P<gi>.+?)\] failed to join before "
       r"rebalance timeout, while new leader (?P<leader>.+) was elected\.$", _leader_changed),

    # Java runtime (loading / unloading), 3.7+ -------------------------------------------------
    _f("coordinator_loading", "Java runtime 3.7+", "Scheduling loading of metadata from",
       rf"^Scheduling loading of metadata from {TP} with epoch {EPOCH}$"),
    _f("coordinator_loaded", "Java runtime 3.7+", "Finished loading of metadata from",
       rf"^Finished loading of metadata from {TP} with epoch {EPOCH} in (?P<load_ms>\d+)ms where "
       r"(?P<scheduler_ms>\d+)ms was spent in the scheduler\.(?: Loaded (?P<count>\d+) records which total to "
       r"\d+ bytes\.)?$"),
    _f("coordinator_loaded", "Java 3.7 dev build (arguments swapped)", "Finished loading of metadata from",
       rf"^Finished loading of metadata from (?P<load_ms>\d+) in {TP}ms.*$"),
    _f("coordinator_unloading", "Java runtime 3.7+", "unloading of metadata for",
       rf"^Scheduling unloading of metadata for {TP} with epoch {EPOCH}$"),
    _f("coordinator_unloading", "Java runtime 3.9+", "Started unloading metadata for",
       rf"^Started unloading metadata for {TP} with epoch {EPOCH}\.$", state="started"),
    _f("coordinator_unloaded", "Java runtime 3.7+", "Finished unloading metadata for",
       rf"^Finished unloading metadata for {TP} with epoch {EPOCH}\.$"),
    # A broker told to resign a partition it never loaded (a follower at start-up).
    _f("coordinator_unloaded", "Java runtime 4.x", "Ignored unloading metadata for",
       rf"^Ignored unloading metadata for {TP} in epoch {EPOCH} since metadata was never loaded\.$",
       state="never_loaded"),
    _f("group_loaded", "Java 3.7+", "Loaded ",
       rf"^Loaded (?P<protocol>classic|consumer|share|streams) group {G} with (?P<members>\d+) members\.?$"),
    _f("group_unloaded", "Java 3.7+ (classic)", "Unloading group metadata for generation",
       rf"^\[GroupId={GL}\] Unloading group metadata for generation (?P<generation>\d+)\.?$"),
    _f("group_unloaded", "Java 3.7+ (consumer)", "Unloaded group metadata for group epoch",
       rf"^\[GroupId={GL}\] Unloaded group metadata for group epoch (?P<epoch>\d+)\.?$"),
    _f("tombstones_generated", "Java 3.7+", "tombstone records while cleaning up group metadata",
       r"^Generated (?P<count>\d+) tombstone records while cleaning up group metadata in (?P<duration_ms>\d+) milliseconds\.$"),
    _f("tombstones_generated", "Java 3.7+", "tombstone records in",
       r"^Generated (?P<count>\d+) tombstone records in (?P<duration_ms>\d+) milliseconds while deleting offsets "
       r"for partitions (?P<assignment>.*?)\.?$"),
    _f("offsets_expired", "Java 3.7+ (DEBUG)", "Expired offset for partition=",
       rf"^\[GroupId {GL}\] Expired offset for partition=(?P<assignment>.+)$"),

    # KIP-848 consumer groups (and share / streams), Java 3.7+ -----------------------------
    _f("member_joined", "Java 3.8+", "joins the consumer group using the",
       rf"^\[GroupId {GL}\] Static member {M} with instance id (?P<gi>.+) joins the consumer group using the "
       r"(?P<protocol>\w+) protocol\.$", _join_trigger),
    _f("member_joined", "Java 3.8+", "joins the consumer group using the",
       rf"^\[GroupId {GL}\] Member {M} joins the consumer group using the (?P<protocol>\w+) protocol\.$", _join_trigger),
    # A classic-protocol member's first JoinGroup to a consumer group (the group converted
    # from classic, or joined during a migration): asked to rejoin with the id made for it.
    _f("member_joined", "Java 3.8+ (classic member)", "Dynamic member with unknown member id joins the consumer group",
       rf"^\[GroupId {GL}\] Dynamic member with unknown member id joins the consumer group\. Created a new member id "
       rf"{M} and requesting the member to rejoin with this id\.$", _join_trigger, protocol="classic"),
    _f("member_joined", "Java 3.7", "joins the consumer group.",
       rf"^\[GroupId {GL}\] (?:Static )?Member {M} joins the consumer group\.$", _join_trigger, protocol="consumer"),
    _f("static_member_replaced", "Java 3.8+", "re-joins the consumer group using the",
       rf"^\[GroupId {GL}\] Static member with instance id (?P<gi>.+?) re-joins the consumer group using the "
       r"(?P<protocol>\w+) protocol\. Created a new member (?P<member_id>.+?) to replace the existing member (?P<old>.+)\.$",
       _static_replaced),
    _f("member_joined", "Java 4.0+ (share)", "joins the share group",
       rf"^\[GroupId {GL}\] Member {M} joins the share group using the (?P<protocol>\w+) protocol\.$", _join_trigger),
    _f("member_joined", "Java 4.1+ (streams)", "Member joins the streams group",
       rf"^\[GroupId {GL}\]\[MemberId (?P<member_id>.+?)\] Member joins the streams group\.$", _join_trigger,
       protocol="streams"),
    _f("group_epoch_bumped", "Java 3.7+", "Bumped group epoch to",
       rf"^\[GroupId {GL}\] Bumped group epoch to (?P<epoch>\d+)(?: with metadata hash (?P<hash>-?\d+))?\.$"),
    _f("group_epoch_bumped", "Java 4.1+ (streams)", "Bumped streams group epoch to",
       rf"^\[GroupId {GL}\]\[MemberId (?P<member_id>.+?)\] Bumped streams group epoch to (?P<epoch>\d+)"
       r"(?: with metadata hash (?P<hash>-?\d+))?(?: and validated topic epoch (?P<topic_epoch>-?\d+))?\.$",
       protocol="streams"),
    _f("subscription_metadata_computed", "Java 3.7-4.0", "Computed new subscription metadata:",
       rf"^\[GroupId {GL}\] Computed new subscription metadata: (?P<assignment>.*)\.$"),
    _f("subscription_metadata_computed", "Java 4.1+", "Computed new metadata hash:",
       rf"^\[GroupId {GL}\] Computed new metadata hash: (?P<assignment>-?\d+)\.$"),
    _f("member_subscription_updated", "Java 3.7+", "updated its subscribed ",
       rf"^\[GroupId {GL}\] Member {M} updated its subscribed (?P<state>topics|regex|topic names|topic regex) to: "
       r"(?P<assignment>.*)\.$"),
    _f("target_assignment_computed", "Java 3.9 (with assignment)", "Computed a new target assignment for epoch",
       rf"^\[GroupId {GL}\] Computed a new target assignment for epoch (?P<epoch>\d+) with '(?P<assignor>.*?)' "
       r"assignor in (?P<assignor_ms>\d+)ms: (?P<assignment>.*)\.$"),
    _f("target_assignment_computed", "Java 3.8, 4.0+", "Computed a new target assignment for epoch",
       rf"^\[GroupId {GL}\] Computed a new target assignment for epoch (?P<epoch>\d+) with '(?P<assignor>.*?)' "
       r"assignor in (?P<assignor_ms>\d+)ms\.$"),
    _f("target_assignment_computed", "Java 3.7", "Computed a new target assignment for epoch",
       rf"^\[GroupId {GL}\] Computed a new target assignment for epoch (?P<epoch>\d+) with '(?P<assignor>.*?)' "
       r"assignor: (?P<assignment>.*)\.$"),
    _f("member_assignment_state", "Java 3.8-3.9 INFO, 4.0+ DEBUG", "new assignment state:",
       rf"^\[GroupId {GL}\] Member {M} new assignment state: epoch=(?P<epoch>-?\d+), previousEpoch=(?P<previous_epoch>-?\d+), "
       r"state=(?P<state>\w+), assignedPartitions=(?P<assigned_partitions>\[.*?\]) and "
       r"revokedPartitions=(?P<revoked_partitions>\[.*\])\.$"),
    _f("member_assignment_state", "Java 4.1+ (streams)", "Member's new assignment state:",
       rf"^\[GroupId {GL}\]\[MemberId (?P<member_id>.+?)\] Member's new assignment state: epoch=(?P<epoch>-?\d+), "
       r"previousEpoch=(?P<previous_epoch>-?\d+), state=(?P<state>\w+), assignedTasks=(?P<assigned_partitions>.*?) "
       r"and tasksPendingRevocation=(?P<revoked_partitions>.*)\.$", protocol="streams"),
    _f("member_assignment_state", "Java 3.7", "transitioned from",
       rf"^\[GroupId {GL}\] Member (?P<member_id>.+?) transitioned from (?P<frm>.*) to (?P<to>.*)\.$", _transition_37),
    _f("member_left", "Java 3.7+ (static)", "left the ",
       rf"^\[GroupId {GL}\] Static [Mm]ember {M} with instance id (?P<gi>.+?) (?:(?P<state>temporarily) )?left the "
       r"(?P<protocol>\w+) group\.$", _leave),
    _f("member_left", "Java 3.7+", "left the ",
       rf"^\[GroupId {GL}\] Member {M} left the (?P<protocol>\w+) group\.$", _leave),
    _f("member_fenced", "Java 3.7+ (static)", "is fenced by existing member",
       rf"^\[GroupId {GL}\] Static member {M} with instance id (?P<gi>.+) is fenced by existing member (?P<old>.+?)\.$",
       _static_replaced),
    _f("member_fenced", "Java 3.7+", "fenced from the group because",
       rf"^\[GroupId {GL}\] Member {M} fenced from the group because (?P<why>.*?)\.*$", _fenced),
    _f("regex_refreshed", "Java 4.0+", "topics to refresh regular expressions",
       rf"^\[GroupId {GL}\] Scanned (?P<count>\d+) topics to refresh regular expressions (?P<assignment>.*) in "
       r"(?P<duration_ms>\d+)ms\.$"),
    _f("group_converted", "Java 3.8+", "Converted the ",
       rf"^\[GroupId {GL}\] Converted the (?:empty )?(?P<state>classic|consumer) group to a (?P<protocol>classic|consumer) "
       r"group\.$"),

    # The replica manager (kafka.server.ReplicaFetcherManager), read only when it names an
    # offsets partition: "Set(...)" or "HashSet(...)" (2.x+), a comma-separated list (0.10-2.x,
    # with 0.x's `[topic,N]` names).
    _f("replica_fetchers_removed", "Scala 0.9+", "Removed fetcher for partitions ",
       r"^Removed fetcher for partitions (?P<plist>.*)$", _offsets_partitions),

    # Lifecycle (Scala and Java, coordinator and event processor) -----------------------------
    _f("coordinator_lifecycle", "Scala / Java", "",
       r"^(?P<state>Starting up|Startup complete|Shutting down|Shutdown complete|Closing coordinator runtime"
       r"|Coordinator runtime closed|Shutting down event processor|Event processor closed)\.$"),
    _f("coordinator_lifecycle", "Java event processor threads", "]: ",
       r"^\[(?P<thread>[\w.\-]+)\]: (?P<state>Starting|Stopped|Shutdown completed|Shutting down(?:\. Draining the remaining events)?)\.?$"),
)


def formats_by_event() -> dict[str, list[Format]]:
    out: dict[str, list[Format]] = {}
    for f in FORMATS:
        out.setdefault(f.event, []).append(f)
    return out
