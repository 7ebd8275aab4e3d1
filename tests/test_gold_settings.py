"""Per-cluster gold settings: read from a real broker config, validated, stored per cluster (no Spark)."""
from __future__ import annotations

import pytest

from pipelines.gold import runner, settings
from pipelines.lake import Lake
from tests.conftest import RECORDINGS

KIP848_PROPS = RECORDINGS / "kip848_consumer_protocol" / "server.properties"


@pytest.mark.skipif(not KIP848_PROPS.is_file(), reason="recordings not found")
def test_from_broker_properties_reads_consumer_group_settings():
    row = settings.from_broker_properties("k", KIP848_PROPS.read_text(), classic_heartbeat_interval_ms=1000)
    # README: group.consumer.session.timeout.ms=10000, group.consumer.heartbeat.interval.ms=2000
    assert row == {"cluster": "k", "classic_heartbeat_interval_ms": 1000,
                   "consumer_session_timeout_ms": 10000, "consumer_heartbeat_interval_ms": 2000}
    # A broker that does not set them leaves them to the defaults (null).
    plain = settings.from_broker_properties("c", (RECORDINGS / "crash_autocommit" / "server.properties").read_text())
    assert plain["consumer_session_timeout_ms"] is None and plain["classic_heartbeat_interval_ms"] is None


@pytest.mark.parametrize("row, message", [
    ({"cluster": "a", "consumer_session_timeout_ms": "ten"}, "not a whole number"),
    ({"cluster": "a", "classic_heartbeat_interval_ms": 0}, "must be positive"),
    ({"consumer_session_timeout_ms": 1000}, "needs a cluster"),
])
def test_bad_settings_are_rejected(row, message):
    with pytest.raises(settings.SettingsError, match=message):
        settings.rows_table([row])


def test_write_cluster_settings_replaces_only_the_given_clusters(tmp_path):
    lake = Lake(tmp_path / "lake")
    runner.write_cluster_settings(lake, [{"cluster": "a", "consumer_session_timeout_ms": 10000},
                                         {"cluster": "b", "classic_heartbeat_interval_ms": 1000}])
    runner.write_cluster_settings(lake, [{"cluster": "a", "consumer_session_timeout_ms": 30000}])
    rows = sorted(lake.read_arrow(settings.TABLE).to_pylist(), key=lambda r: r["cluster"])
    assert [(r["cluster"], r["consumer_session_timeout_ms"], r["classic_heartbeat_interval_ms"]) for r in rows] == [
        ("a", 30000, None), ("b", None, 1000)]


def test_gold_asset_config_offers_every_gold_param_with_its_default():
    import dataclasses

    from assets.gold import GoldConfig
    from pipelines.gold import GoldParams

    defaults = GoldParams()
    assert set(GoldConfig.model_fields) - {"full_rebuild"} == {f.name for f in dataclasses.fields(GoldParams)}
    assert GoldConfig().params() == defaults
    # docs/gold.md: storms are K=5 logical rebalances inside W=10 minutes by default.
    assert (defaults.storm_min_rebalances, defaults.storm_window_minutes) == (5, 10.0)
    assert GoldConfig(storm_min_rebalances=7, storm_window_minutes=2.5).params().storm_window_minutes == 2.5
    # Each setting is described once, in GoldParams, and Dagster's launchpad shows that text.
    for f in dataclasses.fields(GoldParams):
        assert GoldConfig.model_fields[f.name].description == f.metadata["description"] != ""


@pytest.mark.skipif(not KIP848_PROPS.is_file(), reason="recordings not found")
def test_run_stores_a_clusters_settings_from_its_broker_properties(tmp_path):
    """`run --broker-properties` and `--client-heartbeat-ms` are how a user tells gold the
    broker's KIP-848 timings and the classic clients' heartbeat; the cluster's row is stored
    before anything runs (an empty lake: nothing to materialize), each run keeping what the
    other stored."""
    import argparse

    from rebalance_audit.cli import UsageError
    from rebalance_audit.commands import run as run_command

    lake_dir = tmp_path / "lake"
    parser = argparse.ArgumentParser()
    run_command.register(parser.add_subparsers())

    def store(*argv: str) -> list[dict]:
        args = parser.parse_args(["run", "--lake", str(lake_dir), "--cluster", "k", *argv])
        run_command._store_cluster_settings(Lake(lake_dir), args.cluster, args.broker_properties,
                                            args.client_heartbeat_ms)
        return Lake(lake_dir).read_arrow(settings.TABLE).to_pylist()

    assert store("--broker-properties", str(KIP848_PROPS)) == [
        {"cluster": "k", "classic_heartbeat_interval_ms": None,
         "consumer_session_timeout_ms": 10000, "consumer_heartbeat_interval_ms": 2000}]
    assert store("--client-heartbeat-ms", "1000") == [
        {"cluster": "k", "classic_heartbeat_interval_ms": 1000,
         "consumer_session_timeout_ms": 10000, "consumer_heartbeat_interval_ms": 2000}]
    # A schedule passing the same settings every run writes nothing (a new version would
    # rebuild every gold table).
    version = Lake(lake_dir).version(settings.TABLE)
    store("--broker-properties", str(KIP848_PROPS), "--client-heartbeat-ms", "1000")
    assert Lake(lake_dir).version(settings.TABLE) == version
    with pytest.raises(SystemExit):
        store("--client-heartbeat-ms", "0")
    bad = tmp_path / "bad.properties"
    bad.write_text("group.consumer.session.timeout.ms=soon\n")
    with pytest.raises(UsageError, match="not a whole number"):
        run_command._store_cluster_settings(Lake(lake_dir), "k", str(bad), None)


@pytest.mark.skipif(not KIP848_PROPS.is_file(), reason="recordings not found")
def test_ingest_logs_takes_the_brokers_logged_settings_and_keeps_what_a_user_gave(tmp_path):
    """A broker prints its configuration in server.log at every start: `ingest logs` fills
    the cluster's KIP-848 settings from it (the recording's broker ran with 10 s / 2 s, as
    its server.properties says), never over a value a user gave, and writes nothing when
    there is nothing new to fill."""
    from pipelines.ingest.logs import ingest_logs

    log = KIP848_PROPS.parent / "server.log"
    lake = Lake(tmp_path / "lake")
    found = ingest_logs(lake, [str(log)], cluster="k").extra["broker_configs"]
    assert runner.fill_from_broker_configs(lake, "k", found) == {
        "consumer_session_timeout_ms": 10000, "consumer_heartbeat_interval_ms": 2000}
    assert lake.read_arrow(settings.TABLE).to_pylist() == [
        settings.from_broker_properties("k", KIP848_PROPS.read_text())]
    version = lake.version(settings.TABLE)
    assert runner.fill_from_broker_configs(lake, "k", found) == {} and lake.version(settings.TABLE) == version

    runner.write_cluster_settings(lake, [{"cluster": "k", "consumer_session_timeout_ms": 30000}])
    assert runner.fill_from_broker_configs(lake, "k", found) == {"consumer_heartbeat_interval_ms": 2000}
    (row,) = lake.read_arrow(settings.TABLE).to_pylist()
    assert (row["consumer_session_timeout_ms"], row["consumer_heartbeat_interval_ms"]) == (30000, 2000)


@pytest.mark.skipif(not KIP848_PROPS.is_file(), reason="recordings not found")
def test_the_dagster_sources_resource_gives_the_settings_run_takes(tmp_path):
    """In Dagster the same settings come from the `sources` resource: `bronze_ingest` stores
    them as the asset `cluster_settings` (gold depends on it), and a run giving the same
    values again writes nothing. No Spark: only the bronze step runs."""
    from dagster import materialize

    from assets.bronze import bronze_ingest
    from assets.resources import KafkaResource, LakeResource, SourcesResource

    lake_dir = tmp_path / "lake"
    resources = {"lake": LakeResource(root=str(lake_dir)), "kafka": KafkaResource(),
                 "sources": SourcesResource(cluster="k", broker_properties=str(KIP848_PROPS), client_heartbeat_ms=1000)}

    def written() -> int:
        result = materialize([bronze_ingest], resources=resources)
        (meta,) = [m.metadata for m in result.asset_materializations_for_node("bronze_ingest")
                   if m.asset_key.path[-1] == settings.TABLE]
        return meta["rows_written"].value

    assert written() == 1
    assert Lake(lake_dir).read_arrow(settings.TABLE).to_pylist() == [
        {"cluster": "k", "classic_heartbeat_interval_ms": 1000,
         "consumer_session_timeout_ms": 10000, "consumer_heartbeat_interval_ms": 2000}]
    version = Lake(lake_dir).version(settings.TABLE)
    assert written() == 0 and Lake(lake_dir).version(settings.TABLE) == version
