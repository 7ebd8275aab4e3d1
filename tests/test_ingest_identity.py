"""The cluster a lake's rows are filed under follows the brokers' own files: the same
segments loaded again keep their name, and loading them under another name, or another
cluster's under a name already taken, is said on stderr. Real recordings' partition
folders (their partition.metadata) and a log dir with Kafka's meta.properties."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.lake import Lake
from tests.conftest import RECORDINGS

REPO = Path(__file__).resolve().parents[1]
A = RECORDINGS / "crash_autocommit" / "offsets_segments"
B = RECORDINGS / "poll_timeout" / "offsets_segments"

pytestmark = pytest.mark.skipif(not (A.is_dir() and B.is_dir()), reason="recordings not found")


def ingest(lake: Path, *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rebalance_audit.cli", "ingest", "segments", "--lake", str(lake),
                           *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=300)


def topic_id(folder: Path) -> str:
    text = (folder / "__consumer_offsets-0" / "partition.metadata").read_text()
    return next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("topic_id"))


def clusters(lake: Path) -> dict[str, int]:
    rows = Lake(lake).read_arrow("offsets_records", columns=["cluster"]).column("cluster").to_pylist()
    return {c: rows.count(c) for c in set(rows)}


def test_segments_loaded_again_keep_their_name_and_a_second_name_is_warned(tmp_path):
    lake = tmp_path / "lake"
    first = ingest(lake, A, "--cluster", "prod")
    assert first.returncode == 0 and first.stderr == "", first.stderr
    assert f"cluster prod (__consumer_offsets topic id {topic_id(A)})" in first.stdout
    loaded = clusters(lake)
    # Again without --cluster: the files say which cluster they are; nothing new.
    again = ingest(lake, A)
    assert again.returncode == 0 and again.stderr == "" and "cluster prod " in again.stdout, again
    assert clusters(lake) == loaded
    # Under another name: done as asked (the user may mean it), and said.
    other = ingest(lake, A, "--cluster", "staging")
    assert other.returncode == 0, other.stderr
    assert "loaded before as cluster 'prod'" in other.stderr and topic_id(A) in other.stderr
    assert clusters(lake) == {**loaded, "staging": loaded["prod"]}
    # Now the files stand for two names: without --cluster the command cannot choose.
    ambiguous = ingest(lake, A)
    assert ambiguous.returncode == 2 and "pass --cluster to say which" in ambiguous.stderr
    assert "prod" in ambiguous.stderr and "staging" in ambiguous.stderr


def test_another_cluster_under_a_taken_name_is_warned_and_two_at_once_refused(tmp_path):
    lake = tmp_path / "lake"
    assert ingest(lake, A).returncode == 0  # no name given, nothing known: "default"
    mixed = ingest(lake, B)
    assert mixed.returncode == 0
    assert "cluster 'default' was loaded before from another Kafka cluster" in mixed.stderr
    assert topic_id(A) in mixed.stderr and topic_id(B) in mixed.stderr
    both = ingest(tmp_path / "other-lake", A, B, "--cluster", "x")
    assert both.returncode == 2 and "holds 2 Kafka clusters" in both.stderr
    assert not (tmp_path / "other-lake" / "offsets_records").exists()


def test_a_log_dirs_meta_properties_names_the_kafka_cluster(tmp_path):
    log_dir = tmp_path / "broker-1"
    shutil.copytree(A / "__consumer_offsets-0", log_dir / "__consumer_offsets-0")
    # As `kafka-storage format` writes it (KRaft).
    (log_dir / "meta.properties").write_text(
        "#\n#Thu Nov 26 21:00:00 UTC 2026\nnode.id=1\ndirectory.id=Qx3rVHmcQaGh4m5d1eBXyA\nversion=1\n"
        "cluster.id=AuditProbeCluster0000A\n")
    lake = tmp_path / "lake"
    done = ingest(lake, log_dir, "--cluster", "east")
    assert done.returncode == 0, done.stderr
    assert "Kafka cluster id AuditProbeCluster0000A" in done.stdout
    rows = Lake(lake).read_arrow("cluster_identity").to_pylist()
    assert {(r["cluster"], r["kind"], r["value"]) for r in rows} == {
        ("east", "kafka_cluster_id", "AuditProbeCluster0000A"), ("east", "offsets_topic_id", topic_id(A))}
    assert {Path(r["source"]).name for r in rows} == {"meta.properties", "partition.metadata"}
