"""Data quality as Dagster asset checks: every table's Great Expectations suite (quality/).

One check named `quality` per table, shown next to the table in the UI. The checks of the
tables one multi-asset writes run in one step (`<asset>_quality`), so they share the
SparkSession, one table cache and one data-docs rendering; each table costs one Spark job.

Every check is blocking: when an ERROR-severity expectation fails (the data is wrong:
a generation going backwards, a partition owned twice, a negative offset) the check
fails with severity ERROR and Dagster does not run the assets downstream of that table.
A failure of WARN expectations only (incomplete data: unparsed log lines, a high
quarantine rate) is reported with severity WARN, which does not block.

The check's metadata carries the failing expectations, their violation counts and a
sample of the offending rows' keys, the time the check took, and a link to the data docs.
"""
from __future__ import annotations

import json

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetsDefinition,
    MetadataValue,
    multi_asset_check,
)

from assets.resources import LakeResource, SparkResource

CHECK_NAME = "quality"
# Failing keys listed per expectation in the check's metadata (the full sample is in quality_results).
KEYS_IN_METADATA = 10


def _result(outcome, data_docs: str | None) -> AssetCheckResult:
    from quality.model import ERROR

    meta: dict = {
        "suite": MetadataValue.text(outcome.suite),
        "check_seconds": MetadataValue.float(round(outcome.seconds, 3)),
        "expectations": MetadataValue.int(len(outcome.expectations)),
        "failed_expectations": MetadataValue.int(len(outcome.failed())),
        # full, incremental since version N, unchanged since version N, or empty (quality.incremental)
        "checked": MetadataValue.text(outcome.checked),
    }
    if not outcome.exists:
        meta["table_exists"] = MetadataValue.bool(False)
    if data_docs:
        meta["data_docs"] = MetadataValue.url(data_docs)
    skipped = {e.expectation: e.note for e in outcome.expectations if not e.evaluated and outcome.exists}
    if skipped:
        meta["not_evaluated"] = MetadataValue.json(skipped)
    for e in outcome.failed():
        meta[f"{e.expectation}.violations"] = MetadataValue.int(e.violations)
        meta[f"{e.expectation}.failing_keys"] = MetadataValue.json(
            json.loads(json.dumps(e.failing_keys[:KEYS_IN_METADATA], default=str)))
    severity = AssetCheckSeverity.ERROR if outcome.severity == ERROR else AssetCheckSeverity.WARN
    desc = None
    if outcome.failed():
        desc = "; ".join(f"{e.expectation}: {e.violations} violation(s)" for e in outcome.failed())
    return AssetCheckResult(asset_key=outcome.table, check_name=CHECK_NAME, passed=outcome.success,
                            severity=severity, metadata=meta, description=desc)


def quality_check_for(asset: AssetsDefinition):
    """The quality checks of the tables `asset` writes that have a suite (None if none has)."""
    from quality.suites import SUITES

    tables = [k.to_user_string() for k in asset.keys if k.to_user_string() in SUITES]
    if not tables:
        return None
    specs = [AssetCheckSpec(CHECK_NAME, asset=t, blocking=True, description=SUITES[t].name + ": "
                            + "; ".join(i.description for i in SUITES[t].invariants)) for t in tables]
    step = f"{asset.node_def.name}_quality"

    @multi_asset_check(name=step, specs=specs, description=f"Great Expectations suites of {', '.join(tables)}")
    def _check(context, lake: LakeResource, spark: SparkResource):
        from quality import check_tables

        # Spark starts only if a check needs it: empty and unchanged tables are judged from
        # the Delta log alone (quality.incremental).
        target = lake.lake(spark.session)
        report = check_tables(target, tables, run_id=context.run.run_id)
        spent = ", ".join(f"{k} {v:.1f} s" for k, v in (report.timings or {}).items())
        context.log.info(f"quality of {', '.join(tables)}: {report.seconds:.1f} s ({spent}), "
                         f"{sum(not o.success for o in report.outcomes)} table(s) failing")
        for outcome in report.outcomes:
            yield _result(outcome, report.data_docs)

    return _check


def build_checks(assets) -> list:
    """One quality check step per asset definition that writes tables with suites."""
    return [c for c in (quality_check_for(a) for a in assets) if c is not None]
