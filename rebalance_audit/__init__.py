"""rebalance-audit: the command line that ties the engine (pipelines/), the Dagster
definitions (assets/), data quality (quality/) and the dashboards (dashboards/) together."""
