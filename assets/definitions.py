"""Every rebalance-audit asset, job, resource, schedule and sensor (loaded by workspace.yaml).

Settings come from the environment so `dagster dev` needs no code change:

* REBALANCE_AUDIT_LAKE (default ./lake), REBALANCE_AUDIT_SPARK_MASTER (default local[*])
* REBALANCE_AUDIT_SEGMENTS, REBALANCE_AUDIT_LOGS: os.pathsep-separated paths to ingest
* REBALANCE_AUDIT_CLUSTER (default "default"), REBALANCE_AUDIT_LOG_TZ (default UTC)
* REBALANCE_AUDIT_BOOTSTRAP_SERVERS: live ingestion when set; REBALANCE_AUDIT_KAFKA_PROPERTIES:
  a librdkafka properties file; REBALANCE_AUDIT_KAFKA_SASL_USERNAME / _PASSWORD (read
  through EnvVar, so their values never appear in the UI or run records)
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from dagster import Definitions, EnvVar, in_process_executor

from assets.automation import every_15_minutes, new_source_files, refresh_job
from assets.bronze import bronze_ingest
from assets.gold import GOLD_ASSETS
from assets.maintenance import maintain_job, maintain_weekly
from assets.resources import KafkaResource, LakeResource, SourcesResource, SparkResource, env_paths
from assets.silver import broker_clocks_silver, events_silver, offsets_silver, target_assignments_silver
from assets.whatif import WHATIF_ASSETS

ALL_ASSETS = [bronze_ingest, offsets_silver, events_silver, target_assignments_silver, broker_clocks_silver, *GOLD_ASSETS,
              *WHATIF_ASSETS]

# --- dashboards (owned by the dashboards area: assets/report.py) ---
from assets.report import REPORT_ASSETS  # noqa: E402

ALL_ASSETS += REPORT_ASSETS
# --- end dashboards ---

# --- data quality (owned by the quality area: assets/checks.py) ---
from assets.checks import build_checks  # noqa: E402

ALL_CHECKS = build_checks(ALL_ASSETS)
# --- end data quality ---


def _env_secret(name: str):
    # EnvVar fails resource initialisation when the variable is unset; an unset secret
    # simply means "not used".
    return EnvVar(name) if name in os.environ else None


def default_resources(env: Mapping[str, str] | None = None) -> dict:
    env = os.environ if env is None else env
    return {
        "lake": LakeResource(),
        "spark": SparkResource(),
        "sources": SourcesResource(
            cluster=env.get("REBALANCE_AUDIT_CLUSTER", "default"),
            segment_paths=env_paths("REBALANCE_AUDIT_SEGMENTS"),
            log_paths=env_paths("REBALANCE_AUDIT_LOGS"),
            log_tz=env.get("REBALANCE_AUDIT_LOG_TZ", "UTC"),
        ),
        "kafka": KafkaResource(
            bootstrap_servers=env.get("REBALANCE_AUDIT_BOOTSTRAP_SERVERS") or None,
            properties_file=env.get("REBALANCE_AUDIT_KAFKA_PROPERTIES") or None,
            sasl_username=_env_secret("REBALANCE_AUDIT_KAFKA_SASL_USERNAME"),
            sasl_password=_env_secret("REBALANCE_AUDIT_KAFKA_SASL_PASSWORD"),
        ),
    }


defs = Definitions(
    # Every run in one process: one SparkSession (JVM start, Delta's JARs, the warm-up) serves
    # all of its steps, as in `rebalance-audit run`. Dagster's default (a process per step)
    # started Spark once per asset: a refresh took about five times the CLI's time.
    executor=in_process_executor,
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    resources=default_resources(),
    jobs=[refresh_job, maintain_job],
    schedules=[every_15_minutes, maintain_weekly],
    sensors=[new_source_files],
)
