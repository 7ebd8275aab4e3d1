"""Which Kafka cluster the input came from, from the brokers' own files, kept per cluster name.

A lake names each cluster (`--cluster`, a Delta partition). Nothing stopped the same broker
folder being loaded twice under two names (two histories of one cluster, every finding
doubled) or two clusters under one name (their groups' histories mixed). The brokers say who
they are:

* `meta.properties` in each log dir: `cluster.id`, the id `kafka-storage format` gave the
  cluster (KRaft; ZooKeeper-era brokers write it too from 2.x on);
* `partition.metadata` in each `__consumer_offsets-N` folder: the topic id of
  `__consumer_offsets`, a random UUID made when the topic was created, so one per cluster
  for its whole life. It is there where a copy of the partition folders lacks the log dir's
  files (as in the recordings);
* live, the metadata the brokers answer with: the cluster id and the topic's id.

Table `cluster_identity` (one row per cluster name and identity seen) remembers them; an
ingestion resolves its cluster name against it: without `--cluster`, files already seen
keep the name they were loaded under; with a `--cluster` that disagrees, the load goes on
under the given name and the conflict is said, once, on stderr.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

TABLE = "cluster_identity"
SCHEMA = pa.schema([
    pa.field("cluster", pa.string()),
    pa.field("kind", pa.string()),      # "kafka_cluster_id" or "offsets_topic_id"
    pa.field("value", pa.string()),
    pa.field("source", pa.string()),    # the file or "live" it was read from
    pa.field("first_seen_at", pa.timestamp("us", tz="UTC")),
])
DEFAULT_NAME = "default"


@dataclass(frozen=True)
class Identity:
    kind: str   # "kafka_cluster_id" | "offsets_topic_id"
    value: str

    def __str__(self) -> str:
        return f"{'Kafka cluster id' if self.kind == 'kafka_cluster_id' else '__consumer_offsets topic id'} {self.value}"


@dataclass
class Resolution:
    name: str
    found: dict[Identity, str]                          # identity -> where it was read
    warnings: list[str] = field(default_factory=list)


class IdentityError(ValueError):
    """The input's identity leaves its cluster name ambiguous; the message says what to pass."""


def _properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        line = line.strip()
        if line and line[0] not in "#!":
            key, sep, value = line.partition("=") if "=" in line else line.partition(":")
            if sep:
                out[key.strip()] = value.strip()
    return out


def of_segment_files(segment_paths: Iterable[Path]) -> dict[Identity, str]:
    """The identities the brokers' files beside these segment files state, each with the file
    it came from: the log dir's meta.properties, the partition folder's partition.metadata."""
    found: dict[Identity, str] = {}
    folders = {Path(p).resolve().parent for p in segment_paths}
    for folder in sorted(folders):
        for meta, key, kind in ((folder / "partition.metadata", "topic_id", "offsets_topic_id"),
                                (folder.parent / "meta.properties", "cluster.id", "kafka_cluster_id")):
            value = _properties(meta).get(key) if meta.is_file() else None
            if value:
                found.setdefault(Identity(kind, value), str(meta))
    return found


def known(lake) -> dict[Identity, set[str]]:
    """Every identity the lake has seen, with the cluster names it was loaded under."""
    out: dict[Identity, set[str]] = {}
    if lake.exists(TABLE):
        for r in lake.read_arrow(TABLE, columns=["cluster", "kind", "value"]).to_pylist():
            out.setdefault(Identity(r["kind"], r["value"]), set()).add(r["cluster"])
    return out


def resolve(lake, given: str | None, found: dict[Identity, str]) -> Resolution:
    """The cluster name to load `found`'s input under, and what to warn about."""
    for kind in ("kafka_cluster_id", "offsets_topic_id"):
        values = sorted(i.value for i in found if i.kind == kind)
        if len(values) > 1:
            raise IdentityError(
                f"the input holds {len(values)} Kafka clusters ({kind} {', '.join(values)}): load each one "
                "on its own, with its own --cluster")
    seen = known(lake)
    names = sorted({n for i in found for n in seen.get(i, ())})
    if given is None:
        if len(names) > 1:
            raise IdentityError(f"these files were loaded before under {len(names)} cluster names "
                                f"({', '.join(names)}): pass --cluster to say which")
        res = Resolution(names[0] if names else DEFAULT_NAME, found)
    else:
        res = Resolution(given, found)
        for other in names:
            if other != given:
                which = ", ".join(str(i) for i in found if other in seen.get(i, ()))
                res.warnings.append(
                    f"these files were loaded before as cluster {other!r} ({which}); loading them as {given!r} "
                    f"makes two histories of one cluster: pass --cluster {other} to add to the first")
    # The name already stands for another cluster: the same kind of id, another value.
    theirs = {i for i, ns in seen.items() if res.name in ns}
    for mine in found:
        clash = sorted(i.value for i in theirs if i.kind == mine.kind and i.value != mine.value)
        if clash:
            res.warnings.append(
                f"cluster {res.name!r} was loaded before from another Kafka cluster ({mine.kind} {', '.join(clash)}; "
                f"these files: {mine.value}): their groups' histories now share one name")
    return res


def settle_name(lake, given: str | None, found: dict[Identity, str], summary) -> str:
    """The cluster name an ingestion loads `found`'s input under (`resolve`); the name, the
    identities and the warnings go to `summary.extra` ("cluster", "identity",
    "identity_warnings") for the caller to show. Raises IdentityError when it cannot choose."""
    res = resolve(lake, given, found)
    summary.extra["cluster"] = res.name
    summary.extra["identity"] = sorted(str(i) for i in found)
    summary.extra["identity_warnings"] = res.warnings
    return res.name


def register(lake, name: str, found: dict[Identity, str]) -> int:
    """Remember `found` under `name` (what is there already is kept); returns rows added."""
    seen = known(lake)
    now = dt.datetime.now(dt.timezone.utc)
    rows = [{"cluster": name, "kind": i.kind, "value": i.value, "source": src, "first_seen_at": now}
            for i, src in sorted(found.items(), key=lambda kv: (kv[0].kind, kv[0].value)) if name not in seen.get(i, ())]
    if not rows:
        return 0
    if not lake.exists(TABLE):
        lake.create(TABLE, SCHEMA, description="which Kafka cluster each cluster name was loaded from")
    lake.append(TABLE, pa.Table.from_pylist(rows, schema=SCHEMA))
    return len(rows)
