"""Incremental quality checks (quality/incremental.py) on real tables.

A lake holds copies of recorded tables. The first check looks at everything; a second one,
with nothing changed, runs no Spark job at all; rows appended on purpose (an interval
overlapping an *old* one, a generation going backwards after the old ones, a negative
offset) are then found by a check that looks only at what changed, with exactly the
violations and keys a whole-table check finds; and after a failure the next check is
whole again.
"""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from pipelines.lake import Lake
from quality import check_tables
from tests.recordings_lake import findings_lake, spark  # noqa: F401
from tests.spark_fixture import spark_jobs

TABLES = ("ownership_intervals", "group_generations", "offset_commits", "offsets_records", "quarantine")


def _violations(report):
    """table -> expectation -> (violations, sorted failing keys)."""
    out = {}
    for o in report.outcomes:
        for e in o.failed():
            keys = sorted((k.get("cluster"), str(sorted(k.items()))) for k in e.failing_keys)
            out.setdefault(o.table, {})[e.expectation] = (e.violations, keys)
    return out


@pytest.fixture(scope="module")
def lake(findings_lake, spark, tmp_path_factory):  # noqa: F811
    lake = Lake(tmp_path_factory.mktemp("incremental-quality-lake"), spark=spark)
    for t in TABLES:
        lake.write_df(t, findings_lake.read(t), partition_by=["cluster"])
    return lake


@pytest.fixture(scope="module")
def runs(lake, spark, tmp_path_factory):  # noqa: F811
    folder = tmp_path_factory.mktemp("incremental-quality")
    first = check_tables(lake, TABLES, folder=folder)
    results_versions = [lake.version("quality_results")]
    jobs, second = spark_jobs(spark, "quality-unchanged", lambda: check_tables(lake, TABLES, folder=folder))
    results_versions.append(lake.version("quality_results"))

    # Broken rows, appended as new files (how silver and bronze grow).
    own = lake.read("ownership_intervals")
    victim = own.where(F.col("end_pos").isNotNull() & (F.col("end_pos") > F.col("start_pos") + 1)
                       & F.col("member_id").isNotNull()).orderBy("cluster", "group_id", "topic", "partition",
                                                                  "start_pos").first()
    same = ((F.col("cluster") == victim.cluster) & (F.col("group_id") == victim.group_id)
            & (F.col("incarnation") == victim.incarnation) & (F.col("topic") == victim.topic)
            & (F.col("partition") == victim.partition) & (F.col("start_pos") == victim.start_pos))
    intruder = own.where(same).withColumn("member_id", F.lit("intruder-1")).withColumn("start_pos", F.lit(victim.start_pos + 1))
    # The same overlap in a cluster the table never had (judged without a key join) as well.
    late = own.where(same).unionByName(intruder).withColumn("cluster", F.lit("late-cluster"))
    lake.write_df("ownership_intervals", intruder.unionByName(late), mode="append", partition_by=["cluster"])

    gens = lake.read("group_generations")
    last = gens.where(~F.col("is_deletion") & (F.col("generation") >= 2)).orderBy(
        F.col("log_offset").desc(), "cluster", "group_id").first()
    top = gens.where((F.col("cluster") == last.cluster) & (F.col("coordinator_partition") == last.coordinator_partition)) \
        .agg(F.max("log_offset")).first()[0]
    # The group's history arrives as a cluster the table never had, ending with a generation
    # going backwards: judged on the new cluster's rows alone (no key join).
    history = gens.where((F.col("cluster") == last.cluster) & (F.col("group_id") == last.group_id)
                         & (F.col("incarnation") == last.incarnation))
    backwards = gens.where(
        (F.col("cluster") == last.cluster) & (F.col("coordinator_partition") == last.coordinator_partition)
        & (F.col("log_offset") == last.log_offset)).withColumn("log_offset", F.lit(top + 1000).cast("long")) \
        .withColumn("generation", F.lit(last.generation - 1))
    lake.write_df("group_generations", history.unionByName(backwards).withColumn("cluster", F.lit("late-cluster")),
                  mode="append", partition_by=["cluster"])

    commits = lake.read("offset_commits")
    c = commits.where(~F.col("is_deletion")).orderBy("cluster", "coordinator_partition", "log_offset").first()
    lake.write_df("offset_commits", commits.where(
        (F.col("cluster") == c.cluster) & (F.col("coordinator_partition") == c.coordinator_partition)
        & (F.col("log_offset") == c.log_offset)).withColumn("log_offset", F.lit(10**12).cast("long"))
        .withColumn("offset", F.lit(-5).cast("long")), mode="append", partition_by=["cluster"])

    reads = []  # (table, clusters) of each read of the third check
    plain = lake.read

    def read(name, version=None, clusters=None):
        reads.append((name, None if clusters is None else frozenset(clusters)))
        return plain(name, version, clusters=clusters)

    lake.read = read
    try:
        third = check_tables(lake, TABLES, folder=folder)
    finally:
        del lake.read
    whole = check_tables(lake, TABLES, folder=folder, incremental=False, record=False)
    fourth = check_tables(lake, TABLES, folder=folder)
    return {"first": first, "second": second, "jobs": jobs, "third": third, "whole": whole, "fourth": fourth,
            "victim": victim, "generation": (last, top + 1000), "results_versions": results_versions, "reads": reads,
            "results": lake.read_arrow("quality_results").to_pylist()}


def test_first_check_is_whole_and_passes(runs):
    by = runs["first"].by_table()
    assert {t: o.checked for t, o in by.items()} == {**{t: "full" for t in TABLES}, "quarantine": "empty"}
    assert all(o.success for o in runs["first"].outcomes)


def test_unchanged_tables_cost_no_spark_job(runs):
    assert runs["jobs"] == []
    for o in runs["second"].outcomes:
        assert o.success
        assert o.checked == "empty" if o.table == "quarantine" else o.checked.startswith("unchanged since version")


def test_a_check_with_nothing_new_appends_no_result(runs):
    assert runs["first"].results_rows > 0
    assert runs["second"].results_rows == 0
    first_version, second_version = runs["results_versions"]
    assert second_version == first_version
    # The history holds each check once per change: the unchanged offsets_records only from
    # the first run, the failing tables from every run that found them failing.
    runs_by_table: dict[str, set] = {}
    for r in runs["results"]:
        runs_by_table.setdefault(r["table_name"], set()).add(r["run_id"])
    assert runs_by_table["offsets_records"] == {runs["first"].run_id}
    for t in ("ownership_intervals", "group_generations", "offset_commits"):
        assert runs_by_table[t] == {runs[k].run_id for k in ("first", "third", "fourth")}, t


def test_appended_violations_are_found_by_an_incremental_check(runs):
    by = runs["third"].by_table()
    for t in ("ownership_intervals", "group_generations", "offset_commits"):
        assert by[t].checked.startswith("incremental since version"), by[t].checked
    assert by["offsets_records"].checked.startswith("unchanged")
    assert by["group_generations"].checked.endswith("new clusters only)")
    assert not by["ownership_intervals"].checked.endswith("new clusters only)")
    found = _violations(runs["third"])
    assert set(found) == {"ownership_intervals", "group_generations", "offset_commits"}
    assert set(found["ownership_intervals"]) == {"intervals_never_overlap"}
    assert set(found["group_generations"]) == {"generation_never_decreases"}
    assert set(found["offset_commits"]) == {"offset_non_negative"}
    # The overlap is reported on the OLD interval (not in the new files): the scope brought it in.
    v = runs["victim"]
    keys = by["ownership_intervals"].failed()[0].failing_keys
    for cluster in (v.cluster, "late-cluster"):
        assert any(k["cluster"] == cluster and k["group_id"] == v.group_id and k["start_pos"] == v.start_pos
                   and k["member_id"] == v.member_id and "intruder-1" in k["detail"] for k in keys), keys
    g, offset = runs["generation"]
    [k] = by["group_generations"].failed()[0].failing_keys
    assert (k["cluster"], k["group_id"], k["log_offset"]) == ("late-cluster", g.group_id, offset)


def test_an_incremental_check_reads_only_the_changed_clusters_files(runs):
    # A filter on `cluster` prunes no file (sparkio computes it from the file's name): the
    # old rows a scoped invariant needs are read from the changed clusters' files alone.
    v = runs["victim"]
    assert runs["reads"] and all(clusters is not None for _, clusters in runs["reads"]), runs["reads"]
    assert ("ownership_intervals", frozenset({v.cluster, "late-cluster"})) in runs["reads"]
    assert ("group_generations", frozenset({"late-cluster"})) in runs["reads"]
    assert not [r for r in runs["reads"] if r[0] == "offsets_records"]  # unchanged: not read


def test_incremental_check_equals_a_whole_table_check(runs):
    assert all(o.checked == "full" or o.checked == "empty" for o in runs["whole"].outcomes)
    assert _violations(runs["third"]) == _violations(runs["whole"])


def test_a_failed_table_is_checked_whole_next_time(runs):
    by = runs["fourth"].by_table()
    for t in ("ownership_intervals", "group_generations", "offset_commits"):
        assert by[t].checked == "full" and not by[t].success
    assert by["offsets_records"].checked.startswith("unchanged")
    assert _violations(runs["fourth"]) == _violations(runs["whole"])
