"""Bronze: the raw inputs, appended exactly once (pipelines.ingest does all the work).

One multi-asset owns the bronze tables because the three ingestion paths share them:
live Kafka and segment files both land in `offsets_records`, every path quarantines into
`quarantine`, and only live Kafka samples `partition_end_offsets` and `topic_metadata`. Each source runs only
when configured (bootstrap servers for Kafka, paths for segments and logs); with none, the
asset reports the tables as they are, so downstream assets still run on what the lake holds.

`quarantine` is also appended to by the silver decoders (records that do not decode); its
row count here is the table's total at the time bronze ran.
"""

from pathlib import Path

from dagster import AssetExecutionContext, AssetSpec, Config, MetadataValue, multi_asset
from pydantic import Field

from assets.metadata import table_result
from assets.resources import KafkaResource, LakeResource, SourcesResource

BRONZE_GROUP = "bronze"

BRONZE_SPECS = [
    AssetSpec("offsets_records", group_name=BRONZE_GROUP,
              description="One raw __consumer_offsets record (live or from segment files), keyed by (cluster, partition, offset)."),
    AssetSpec("coordinator_log_lines", group_name=BRONZE_GROUP,
              description="One raw group-coordinator line of a broker server.log."),
    AssetSpec("quarantine", group_name=BRONZE_GROUP,
              description="One input that could not be decoded or parsed, with the reason."),
    AssetSpec("partition_end_offsets", group_name=BRONZE_GROUP,
              description="Log-end offsets of the partitions groups commit on, sampled by live ingestion."),
    AssetSpec("topic_metadata", group_name=BRONZE_GROUP,
              description="Topic id and name of each topic, sampled by live ingestion (KIP-848 records name topics by id)."),
    AssetSpec("cluster_settings", group_name=BRONZE_GROUP,
              description="Per cluster, the timings gold needs that no record holds: given (the sources resource, "
                          "`run --broker-properties/--client-heartbeat-ms`) or read from the configuration each "
                          "broker logged at start-up."),
]


class IngestConfig(Config):
    """Per-run additions to the configured sources (e.g. what the file sensor found)."""

    segment_paths: list[str] = Field(default_factory=list, description="extra segment files or folders")
    log_paths: list[str] = Field(default_factory=list, description="extra server.log files or folders")
    skip_kafka: bool = Field(default=False, description="do not read live Kafka in this run")


def _merged(configured: list[str], extra: list[str]) -> list[str]:
    return list(dict.fromkeys([*configured, *extra]))


def _warn_identity(context: AssetExecutionContext, summary) -> None:
    """The configured cluster name disagrees with the cluster the data came from (the lake
    knows it under another name, or the name stands for another cluster): the rows are
    loaded as configured, and the conflict is said (pipelines/ingest/identity.py)."""
    for warning in summary.extra.get("identity_warnings", []):
        context.log.warning(warning)
    if summary.extra.get("identity_failed"):
        context.log.warning(f"the brokers did not say which cluster they are: {summary.extra['identity_failed']}")


@multi_asset(specs=BRONZE_SPECS, name="bronze_ingest", description="Ingest live Kafka, segment files and server.log files into bronze.")
def bronze_ingest(context: AssetExecutionContext, config: IngestConfig, lake: LakeResource,
                  kafka: KafkaResource, sources: SourcesResource):
    from pipelines.gold.runner import fill_from_broker_configs, give_cluster_settings
    from pipelines.ingest.kafka import ingest_kafka
    from pipelines.ingest.logs import ingest_logs
    from pipelines.ingest.segments import ingest_segments

    target = lake.lake()  # bronze ingestion needs no Spark
    written = {"offsets_records": 0, "coordinator_log_lines": 0, "quarantine": 0, "partition_end_offsets": 0,
               "topic_metadata": 0, "cluster_settings": 0}
    ran: list[str] = []

    if sources.broker_properties or sources.client_heartbeat_ms:
        # What the SRE gives comes first: the brokers' logged configuration only fills the rest.
        text = Path(sources.broker_properties).read_text(errors="replace") if sources.broker_properties else None
        written["cluster_settings"] += give_cluster_settings(target, sources.cluster, text, sources.client_heartbeat_ms)

    if kafka.enabled and not config.skip_kafka:
        s = ingest_kafka(target, kafka.client_config(), cluster=sources.cluster,
                         max_seconds=kafka.max_seconds, timeout=kafka.timeout_seconds)
        written["offsets_records"] += s.inserted
        written["quarantine"] += s.quarantined
        written["partition_end_offsets"] += int(s.extra.get("end_offsets_sampled", 0))
        written["topic_metadata"] += int(s.extra.get("topic_ids_sampled", 0))
        ran.append("kafka")
        _warn_identity(context, s)
        context.log.info(f"kafka: {s.seen} records read, {s.inserted} new, caught up: {s.extra.get('caught_up')}")

    segment_paths = _merged(sources.segment_paths, config.segment_paths)
    if segment_paths:
        s = ingest_segments(target, segment_paths, cluster=sources.cluster)
        written["offsets_records"] += s.inserted
        written["quarantine"] += s.quarantined
        ran.append("segments")
        _warn_identity(context, s)
        context.log.info(f"segments: {s.seen} records read, {s.inserted} new, {s.quarantined_seen} quarantined")

    log_paths = _merged(sources.log_paths, config.log_paths)
    if log_paths:
        s = ingest_logs(target, log_paths, cluster=sources.cluster, tz=sources.log_tz, brokers=sources.log_brokers)
        filled = fill_from_broker_configs(target, sources.cluster, s.extra.get("broker_configs", {}))
        if filled:
            written["cluster_settings"] = 1
            context.log.info(f"cluster settings from the brokers' logged configuration: {filled}")
        written["coordinator_log_lines"] += s.inserted
        written["quarantine"] += s.quarantined
        ran.append("logs")
        context.log.info(f"logs: {s.seen} coordinator entries read, {s.inserted} new, {s.quarantined_seen} quarantined")

    sources_meta = MetadataValue.text(",".join(ran) or "none configured")
    for spec in BRONZE_SPECS:
        name = spec.key.path[-1]
        yield table_result(target, name, written[name], sources=sources_meta)
