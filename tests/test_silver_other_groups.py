"""Share-group and streams-group records reach silver: none is dropped on the way.

The input is the segment of every record type and value version the codec knows (also
decoded by Kafka 4.4's DumpLogSegments in test_codec_dumplogsegments), with tombstones and
a record of a type no Kafka release has. After `ingest segments` and silver, every
coordinator record that is not an offset commit is a row of some silver table or a
quarantine row with the reason; share and streams group records are `other_group_records`
rows named after their type, with their group id.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from pipelines.codec import RECORD_TYPES, CodecError, decode_key, decode_value
from pipelines.ingest.segments import ingest_segments
from pipelines.lake import Lake
from pipelines.silver import decode_job
from pipelines.silver.runner import update_offsets_silver
from tests.spark_fixture import spark  # noqa: F401
from tests.test_codec_dumplogsegments import KAFKA, KAFKA_UNKNOWN_TYPES, write_segment

pytestmark = pytest.mark.spark

CLUSTER = "every-type"


@pytest.fixture(scope="module")
def lake(tmp_path_factory, spark):  # noqa: F811
    root = tmp_path_factory.mktemp("other-groups")
    write_segment(root / "broker")
    lake = Lake(root / "lake", spark=spark)
    ingest_segments(lake, [str(root / "broker")], cluster=CLUSTER)
    update_offsets_silver(lake, kafka_version=KAFKA)
    return lake


def _rows(lake: Lake, table: str) -> list[dict]:
    return [r for r in lake.read_arrow(table).to_pylist() if r["cluster"] == CLUSTER] if lake.exists(table) else []


def test_no_record_is_dropped_on_the_way_to_silver(lake):
    bronze = [r for r in _rows(lake, "offsets_records") if not r["control"]]
    # Offset commits are left out: an aborted transaction's commits are dropped by design
    # (they never took effect; test_silver_recordings checks them).
    # So are partition-metadata records (type 4) that list no topic, and their tombstones:
    # topic_ids holds one row per topic named, and they name none.
    def kept(r: dict) -> bool:
        kind = int.from_bytes(r["key"][:2], "big") if len(r["key"]) >= 2 else None
        if kind in (0, 1):
            return False
        if kind == 4 and r["value"] is not None:
            try:
                return bool(decode_value(4, r["value"], KAFKA)[1].get("topics"))
            except CodecError:
                return True  # undecodable: must be in quarantine
        if kind == 4:
            return False
        return True

    wanted = {r["offset"] for r in bronze if kept(r)}
    found: Counter = Counter()
    for table in decode_job.DECODED_TABLES:
        if table != "offset_commits":
            found.update({r["log_offset"] for r in _rows(lake, table)})
    quarantined = {int(r["source_key"].rsplit(":", 1)[1]) for r in _rows(lake, "quarantine")
                   if r["source_table"] == "offsets_records"}
    assert wanted and not (wanted - set(found) - quarantined), sorted(wanted - set(found) - quarantined)[:10]


def test_share_and_streams_records_are_rows_of_their_own(lake):
    rows = _rows(lake, "other_group_records")
    kinds = {r["record_type"]: (r["group_kind"], r["record_type_name"]) for r in rows}
    # The types Kafka 4.4 writes (two older layouts it no longer knows are quarantined).
    share = {t for t, name in RECORD_TYPES.items() if name.startswith("ShareGroup")} - KAFKA_UNKNOWN_TYPES
    streams = {t for t, name in RECORD_TYPES.items() if name.startswith("StreamsGroup")} - KAFKA_UNKNOWN_TYPES
    assert share and streams and share | streams <= set(kinds), sorted(set(share | streams) - set(kinds))
    assert all(kinds[t] == ("share", RECORD_TYPES[t]) for t in share)
    assert all(kinds[t] == ("streams", RECORD_TYPES[t]) for t in streams)
    by_offset = {r["offset"]: r for r in _rows(lake, "offsets_records")}
    for r in rows:
        _, key = decode_key(by_offset[r["log_offset"]]["key"])
        assert r["group_id"] == key.get("groupId") and json.loads(r["key_json"]) == json.loads(json.dumps(key))
        assert r["is_deletion"] == (by_offset[r["log_offset"]]["value"] is None) == (r["value_json"] is None)


def test_a_type_no_release_has_is_quarantined_with_the_reason(lake):
    bad = [r for r in _rows(lake, "quarantine") if r["target_table"] == "other_group_records"]
    assert any(r["reason"].startswith("unknown record type 24") for r in bad), bad


def test_a_value_no_column_can_hold_is_quarantined_not_fatal(lake):
    """The segment's extreme values (commit timestamps near 2^63 ms) fit no timestamp column:
    those records are quarantined with the reason, and silver still holds everything else."""
    bad = [r for r in _rows(lake, "quarantine") if r["reason"].startswith("unrepresentable value: year")]
    assert {r["target_table"] for r in bad} >= {"offset_commits", "group_generations"}
    assert _rows(lake, "offset_commits") and _rows(lake, "group_generations")
