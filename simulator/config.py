"""What to simulate: the Kafka release (which coordinator, record versions, log wording) and
the workload (groups, traffic, churn).

A release is reduced to the facts that change what lands on disk (kafka-internals §1.4-§1.6,
§2, §7 and the recordings' README):

| family  | releases   | coordinator | batches      | OffsetCommit | GroupMetadata | extra                   |
|---------|------------|-------------|--------------|--------------|---------------|-------------------------|
| legacy  | 0.9, 0.10  | Scala       | magic 0 / 1  | key 1, v1    | v0 / v1       | old log wording         |
| scala2  | 2.1 - 2.8  | Scala       | batch v2     | key 1, v3    | v2 (<2.3) / v3| 2.x wording             |
| scala3  | 3.0 - 3.9  | Scala       | batch v2     | key 1, v3    | v3            | 3.x wording             |
| java    | 3.9 new, 4.x | Java      | batch v2     | key 1, v3    | v3            | generation-0 record, KIP-848 groups |

`3.9` is the Scala coordinator (Kafka's default in 3.9); `3.9-new` is 3.9 with
`group.coordinator.rebalance.protocols=classic,consumer` (the new_coordinator_classic and
kip848_consumer_protocol recordings); `4.0`/`4.1` always run the Java coordinator.
"""
from __future__ import annotations

from dataclasses import dataclass, field


class ConfigError(ValueError):
    """The simulation was asked for something it cannot simulate."""


@dataclass(frozen=True)
class Release:
    name: str            # as given: "0.9", "2.8", "3.9", "3.9-new", "4.0"
    major: int
    minor: int
    family: str          # legacy | scala2 | scala3 | java

    @property
    def java(self) -> bool:
        return self.family == "java"

    @property
    def magic(self) -> int:
        """Batch format: magic 0 before 0.10, 1 in 0.10, v2 from 0.11."""
        if (self.major, self.minor) < (0, 10):
            return 0
        if (self.major, self.minor) < (0, 11):
            return 1
        return 2

    @property
    def offset_value_version(self) -> int:
        # 0.9/0.10 write v1 (with expireTimestamp); 2.1+ write v3 (MetadataVersion.offsetCommitValueVersion).
        return 1 if (self.major, self.minor) < (2, 1) else 3

    @property
    def group_value_version(self) -> int:
        # MetadataVersion.groupMetadataValueVersion: 0 (<0.10.1), 1 (<2.1), 2 (<2.3), else 3.
        v = (self.major, self.minor)
        if v < (0, 10):
            return 0
        if v < (2, 1):
            return 1
        if v < (2, 3):
            return 2
        return 3

    @property
    def subscription_version(self) -> int:
        """ConsumerProtocolSubscription version the Java client of that era writes."""
        v = (self.major, self.minor)
        if v < (2, 4):
            return 0
        if v < (3, 4):
            return 1
        return 3

    @property
    def supports_kip848(self) -> bool:
        return self.java

    @property
    def supports_cooperative(self) -> bool:
        return (self.major, self.minor) >= (2, 4)

    @property
    def supports_static(self) -> bool:
        return (self.major, self.minor) >= (2, 3)


_FAMILIES = {
    (0, 9): "legacy", (0, 10): "legacy",
    **{(2, m): "scala2" for m in range(1, 9)},
    **{(3, m): "scala3" for m in range(0, 10)},
    (4, 0): "java",
}


def release(name: str) -> Release:
    text = str(name).strip()
    new = text.endswith("-new")
    core = text[:-4] if new else text
    try:
        major, minor = (int(x) for x in core.split(".")[:2])
    except ValueError:
        raise ConfigError(f"--kafka-version must look like 3.9, 3.9-new or 4.0, not {name!r}") from None
    family = _FAMILIES.get((major, minor))
    if family is None:
        known = "0.9, 0.10, 2.1-2.8, 3.0-3.9, 3.9-new, 4.0"
        raise ConfigError(f"cannot simulate Kafka {name!r}; known releases: {known}")
    if new:
        if (major, minor) < (3, 8) or family == "java":
            raise ConfigError(f"'-new' selects the opt-in Java coordinator of 3.8/3.9, not {name!r}")
        family = "java"
    return Release(text, major, minor, family)


ASSIGNORS_CLASSIC = ("range", "roundrobin", "cooperative-sticky")


@dataclass
class SimConfig:
    """Workload. Rates are per group; times in ms; every choice is drawn from `seed`."""

    out: str
    groups: int = 10
    minutes: float = 10.0
    seed: int = 1
    kafka_version: str = "3.9"
    brokers: int = 1
    replication_factor: int = 1
    offsets_partitions: int = 50           # offsets.topic.num.partitions
    segment_bytes: int = 104857600          # offsets.topic.segment.bytes
    compression: str = "none"               # offsets.topic.compression.codec
    start_ms: int = 1_795_337_000_000      # 2026-11-22 (the recordings' day)
    group_prefix: str = "sim-group"         # group ids are <prefix>-00000, <prefix>-00001, ...
    # partition -> first offset written: continues a cluster's log (with a later start_ms)
    # so the new segments are ingested into the same cluster; 0 for partitions not named
    start_offsets: dict = field(default_factory=dict)
    # traffic and consumers
    topics_per_group: int = 1
    partitions_per_topic: int = 8
    messages_per_s: float = 20.0            # per partition
    commit_interval_ms: int = 5000          # auto.commit.interval.ms
    min_members: int = 2
    max_members: int = 6
    session_timeout_ms: int = 10000
    max_poll_interval_ms: int = 30000       # max.poll.interval.ms (Kafka default 300000)
    # churn: membership events per group per minute, split by weights
    churn_per_minute: float = 0.5
    weights: dict = field(default_factory=lambda: {
        "join": 3.0, "leave": 3.0, "crash": 1.0, "poll_timeout": 1.0, "storm": 0.3, "static_restart": 1.0})
    assignors: tuple = ASSIGNORS_CLASSIC
    static_fraction: float = 0.2            # groups whose members use group.instance.id
    kip848_fraction: float = 0.0            # groups on group.protocol=consumer (Java releases only)
    transactional_fraction: float = 0.0     # groups committing through transactions (EOS)
    abort_every: int = 3                    # every Nth transaction aborts

    def validate(self) -> Release:
        rel = release(self.kafka_version)
        if self.groups < 1:
            raise ConfigError("--groups must be at least 1")
        if self.minutes <= 0:
            raise ConfigError("--minutes must be positive")
        if self.brokers < 1 or not 1 <= self.replication_factor <= self.brokers:
            raise ConfigError("--brokers must be >= 1 and --replication-factor between 1 and --brokers")
        if self.offsets_partitions < 1:
            raise ConfigError("--offsets-partitions must be at least 1")
        if not 1 <= self.min_members <= self.max_members:
            raise ConfigError("need 1 <= --min-members <= --max-members")
        if self.partitions_per_topic < 1 or self.topics_per_group < 1:
            raise ConfigError("groups need at least one topic with one partition")
        if self.commit_interval_ms < 10:
            raise ConfigError("--commit-interval-ms must be at least 10")
        if self.kip848_fraction > 0 and not rel.supports_kip848:
            raise ConfigError(f"KIP-848 groups need the Java coordinator (3.9-new or 4.x), not {rel.name}")
        if self.transactional_fraction > 0 and rel.magic < 2:
            raise ConfigError("transactional offset commits need batch v2 (Kafka 0.11+)")
        for a in self.assignors:
            if a not in ASSIGNORS_CLASSIC:
                raise ConfigError(f"unknown classic assignor {a!r}; known: {', '.join(ASSIGNORS_CLASSIC)}")
        if "cooperative-sticky" in self.assignors and not rel.supports_cooperative:
            self.assignors = tuple(a for a in self.assignors if a != "cooperative-sticky") or ("range",)
        for k, w in self.weights.items():
            if w < 0:
                raise ConfigError(f"weight of {k} is negative")
        return rel
