"""Dagster resources: where the lake is, which Spark to use, which sources to ingest.

Resources only hold settings and hand out engine objects (`pipelines.lake.Lake`, the
process's SparkSession, a librdkafka config dict); they do no work of their own, except that
the lake resource holds the lake's writer lock while a run uses it.

Secrets (SASL password, object-store keys) are meant to come from environment variables
through `dagster.EnvVar`, so the Dagster UI and run records show the variable's name,
never its value; nothing here puts a property value into logs or asset metadata.
"""
from __future__ import annotations

import contextlib
import os
from typing import Optional

from dagster import ConfigurableResource
from pydantic import Field

LAKE_ENV = "REBALANCE_AUDIT_LAKE"
SPARK_MASTER_ENV = "REBALANCE_AUDIT_SPARK_MASTER"


class SparkResource(ConfigurableResource):
    """The SparkSession of this process (one per process: `pipelines.spark.get_spark`)."""

    master: str = Field(default_factory=lambda: os.environ.get(SPARK_MASTER_ENV, "local[*]"),
                        description="Spark master URL")
    conf: dict[str, str] = Field(default_factory=dict, description="extra Spark settings")

    def session(self):
        from pipelines.spark import get_spark

        return get_spark(self.master, conf=dict(self.conf))


class LakeResource(ConfigurableResource):
    """The lake: a folder or object-store URI holding one Delta table per folder."""

    root: str = Field(default_factory=lambda: os.environ.get(LAKE_ENV, "./lake"),
                      description="lake folder or URI (default ./lake, or $REBALANCE_AUDIT_LAKE)")
    # Object-store credentials: give them as EnvVar(...) values, never literals.
    storage_options: dict[str, str] = Field(default_factory=dict,
                                            description="delta-rs storage options (object-store settings)")

    def lake(self, spark=None):
        from pipelines.lake import Lake

        return Lake(self.root, storage_options=self.storage_options or None, spark=spark)

    @contextlib.contextmanager
    def yield_for_execution(self, context):
        """The lake's writer lock for as long as the run (or, under the multiprocess
        executor, the step) uses the lake: a scheduled run and a sensor's run, or a command
        beside them, never write at the same time; the later one waits (pipelines/lake/lock.py)."""
        log = context.log if context is not None and context.log is not None else None
        with self.lake().writer_lock(say=log.warning if log is not None else None):
            yield self


class KafkaResource(ConfigurableResource):
    """librdkafka settings of the live `__consumer_offsets` reader.

    Live ingestion runs only when `bootstrap_servers` is set. `properties` holds
    non-secret librdkafka properties; the SASL password goes in `sasl_password`
    (set it with EnvVar so it is read from the environment at run time).
    """

    bootstrap_servers: Optional[str] = Field(default=None, description="host:port,...; unset = no live ingestion")
    properties: dict[str, str] = Field(default_factory=dict, description="librdkafka properties (no secrets)")
    properties_file: Optional[str] = Field(default=None, description="librdkafka properties file (key=value lines)")
    sasl_username: Optional[str] = None
    sasl_password: Optional[str] = None
    timeout_seconds: float = Field(default=30.0, description="give up when the cluster is silent this long")
    max_seconds: Optional[float] = Field(default=None, description="stop a run's live read after this long")

    @property
    def enabled(self) -> bool:
        return bool(self.bootstrap_servers)

    def client_config(self) -> dict[str, str]:
        from pipelines.ingest.kafka import read_properties

        config: dict[str, str] = {}
        if self.properties_file:
            config.update(read_properties(self.properties_file))
        config.update(self.properties)
        if self.bootstrap_servers:
            config["bootstrap.servers"] = self.bootstrap_servers
        if self.sasl_username is not None:
            config["sasl.username"] = self.sasl_username
        if self.sasl_password is not None:
            config["sasl.password"] = self.sasl_password
        return config


class SourcesResource(ConfigurableResource):
    """What the ingestion asset reads besides live Kafka: segment and log folders."""

    cluster: str = Field(default="default", description="cluster name stored with every row")
    segment_paths: list[str] = Field(default_factory=list,
                                     description="__consumer_offsets segment files or broker log dirs")
    log_paths: list[str] = Field(default_factory=list, description="server.log files or folders")
    log_tz: str = Field(default="UTC", description="time zone the server.log files were written in")
    log_brokers: dict[str, int] = Field(default_factory=dict,
                                        description="path → broker id, for logs that do not name their broker")
    kafka_version: Optional[str] = Field(default=None,
                                         description="Kafka version deciding ambiguous record layouts (e.g. 2.0)")
    # The cluster's settings no record holds (pipelines/gold/settings.py), as `run` takes them.
    broker_properties: Optional[str] = Field(
        default=None, description="a broker's server.properties: the cluster's KIP-848 group.consumer.* session "
                                  "timeout and heartbeat interval, kept in cluster_settings")
    client_heartbeat_ms: Optional[int] = Field(
        default=None, gt=0, description="the classic consumers' heartbeat.interval.ms, kept in cluster_settings")


def env_paths(name: str) -> list[str]:
    """Paths from an os.pathsep-separated environment variable (empty if unset)."""
    return [p for p in os.environ.get(name, "").split(os.pathsep) if p]
