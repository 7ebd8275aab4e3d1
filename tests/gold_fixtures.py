"""Recording → bronze → silver → gold, for the gold tests (one SparkSession, silver cached per recording).

Bronze comes from either of the two real inputs of a recording: the broker's segment files
(`offsets_segments/`, with batch facts) or the records read over the wire
(`offsets_records.jsonl`, no batch facts, no control records). Silver is built with the
lead's `pipelines.silver.decode_job`; coordinator events with `pipelines.logs`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.gold import GoldInputs, GoldParams, build_all
from pipelines.logs import FIELD_TYPES, EVENT_FIELDS, parse_events
from pipelines.segments import SegmentRecord, iter_paths
from pipelines.silver import decode_job

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("REBALANCE_AUDIT_SHARED", REPO.parent / "shared"))
RECORDINGS = SHARED / "recordings"
SCENARIOS = sorted(p.name for p in RECORDINGS.iterdir() if (p / "truth_summary.json").is_file()) if RECORDINGS.is_dir() else []

BRONZE_SCHEMA = T.StructType(
    [
        T.StructField("cluster", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("offset", T.LongType(), False),
        T.StructField("timestamp", T.LongType(), True),
        T.StructField("key", T.BinaryType(), True),
        T.StructField("value", T.BinaryType(), True),
        T.StructField("source", T.StringType(), True),
        T.StructField("transactional", T.BooleanType(), True),
        T.StructField("control", T.BooleanType(), True),
        T.StructField("producer_id", T.LongType(), True),
    ]
)

_SPARK_TYPES = {"string": T.StringType(), "long": T.LongType(), "int": T.IntegerType(), "list<string>": T.ArrayType(T.StringType())}
EVENTS_SCHEMA = T.StructType([T.StructField(n, _SPARK_TYPES[FIELD_TYPES[n]], True) for n in EVENT_FIELDS])


def spark() -> SparkSession:
    try:
        from pipelines.spark import get_spark

        return get_spark("local[2]")
    except ImportError:  # pragma: no cover - helper-5's factory missing
        return SparkSession.builder.master("local[2]").config("spark.sql.session.timeZone", "UTC").getOrCreate()


def segment_rows(scenario: str) -> list[tuple]:
    rows = []
    for item in iter_paths([RECORDINGS / scenario / "offsets_segments"]):
        if isinstance(item, SegmentRecord):
            rows.append(
                ("default", item.partition, item.offset, item.timestamp, item.key, item.value, "segments",
                 bool(item.transactional), bool(item.control), item.producer_id)
            )
        elif hasattr(item, "message") and not hasattr(item, "base_offset"):
            raise AssertionError(f"segment read error in {scenario}: {item}")
    return rows


def wire_rows(scenario: str) -> list[tuple]:
    rows = []
    with open(RECORDINGS / scenario / "offsets_records.jsonl") as fh:
        for line in fh:
            r = json.loads(line)
            rows.append(
                ("default", r["partition"], r["offset"], r["timestamp_ms"],
                 bytes.fromhex(r["key_hex"]) if r.get("key_hex") is not None else None,
                 bytes.fromhex(r["value_hex"]) if r.get("value_hex") is not None else None,
                 "wire", False, False, None)
            )
    return rows


def events_df(session: SparkSession, scenario: str) -> DataFrame:
    recs = [r for r in parse_events([RECORDINGS / scenario / "server.log"]) if r.get("event") not in ("unrecognized", "error")]
    return session.createDataFrame([tuple(r.get(n) for n in EVENT_FIELDS) for r in recs], EVENTS_SCHEMA)


def silver(bronze: DataFrame) -> dict[str, DataFrame]:
    commits, _ = decode_job.decode_offset_commits(bronze)
    effective, _open = decode_job.resolve_transactions(commits, bronze)
    gens, members, _ = decode_job.decode_group_metadata(bronze)
    gens = decode_job.add_incarnations(gens, None)
    members = decode_job.attach_incarnation(members, gens)
    cg, _ = decode_job.decode_consumer_groups(bronze)
    target = decode_job.materialize_target_assignments(cg["target_assignment_epochs"], cg["target_assignment_member_deltas"], cg["topic_ids"])
    return {
        "offset_commits": effective,
        "group_generations": gens,
        "member_assignments": members,
        "consumer_group_epochs": cg["consumer_group_epochs"],
        "consumer_group_members": cg["consumer_group_members"],
        "current_assignments": cg["current_assignments"],
        "target_assignments": target,
        "topic_ids": cg["topic_ids"],
        "bronze_positions": bronze.select("cluster", "partition", "offset", "control"),
    }


def recording_params(scenario: str) -> GoldParams:
    """The client and broker settings a user would pass (heartbeat intervals are not in the records)."""
    sc = json.loads((RECORDINGS / scenario / "scenario.json").read_text())
    hb = []

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "heartbeat.interval.ms":
                    hb.append(int(v))
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(sc)
    props = {}
    for line in (RECORDINGS / scenario / "server.properties").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    p = GoldParams()
    if hb:
        p.classic_heartbeat_interval_ms = max(set(hb), key=hb.count)
    if "group.consumer.session.timeout.ms" in props:
        p.consumer_session_timeout_ms = int(props["group.consumer.session.timeout.ms"])
    if "group.consumer.heartbeat.interval.ms" in props:
        p.consumer_heartbeat_interval_ms = int(props["group.consumer.heartbeat.interval.ms"])
    return p


@dataclass
class Built:
    scenario: str
    source: str
    with_logs: bool
    gold: dict[str, DataFrame]
    rows: dict[str, list] = field(default_factory=dict)

    def table(self, name: str) -> list[dict]:
        if name not in self.rows:
            self.rows[name] = [r.asDict(recursive=True) for r in self.gold[name].collect()]
        return self.rows[name]


@lru_cache(maxsize=None)
def build(scenario: str, source: str = "segments", with_logs: bool = True) -> Built:
    session = spark()
    tables = _silver_cached(scenario, source)
    events = events_df(session, scenario).withColumn("cluster", F.lit("default")) if with_logs else None
    inputs = GoldInputs(**{k: v for k, v in tables.items()}, coordinator_events=events)
    gold = build_all(inputs, recording_params(scenario))
    return Built(scenario, source, with_logs, {k: v.cache() for k, v in gold.items()})


@lru_cache(maxsize=None)
def _silver_cached(scenario: str, source: str) -> dict[str, DataFrame]:
    session = spark()
    rows = segment_rows(scenario) if source == "segments" else wire_rows(scenario)
    bronze = session.createDataFrame(rows, BRONZE_SCHEMA)
    # Materialize once: every gold job reads these several times.
    return {k: v.cache() for k, v in silver(bronze).items()}


def truth(scenario: str) -> dict:
    return json.loads((RECORDINGS / scenario / "truth_summary.json").read_text())
