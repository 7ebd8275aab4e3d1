"""The SRE dashboards: static HTML written from the gold and what-if tables (dashboards.report).

The asset's metadata links to the report's index page, so the Dagster UI opens it in one
click. Where the report goes: $REBALANCE_AUDIT_REPORT_DIR, else `report/` beside a local
lake folder, else ./report (`dashboards.report.default_out_dir`).
"""

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from assets.resources import LakeResource, SparkResource
from pipelines.stages import REPORT, deps_of

# Exactly the tables the report reads (and records in its state), as pipelines/stages.py
# declares them: the gold and what-if ones may be absent, and the report says "not computed".
REPORT_DEPS = list(deps_of(REPORT.name))


@asset(
    name=REPORT.name,
    group_name="dashboards",
    deps=REPORT_DEPS,
    description=REPORT.tables[REPORT.name],
)
def sre_report(context: AssetExecutionContext, lake: LakeResource, spark: SparkResource) -> MaterializeResult:
    from dashboards.report import default_out_dir, write_report

    target = lake.lake(spark.session)  # Spark starts only if the report must be rewritten
    result = write_report(target, default_out_dir(target.root).resolve())
    context.log.info(f"report {'kept (inputs unchanged)' if result.unchanged else 'written'}: {result.index}")
    return MaterializeResult(metadata={
        "report": MetadataValue.url(result.index.as_uri()),
        "report_path": MetadataValue.path(str(result.index)),
        "groups": MetadataValue.int(result.groups),
        "overview_pages": MetadataValue.int(result.overview_pages),
        "not_computed": MetadataValue.text(", ".join(result.missing_tables) or "(none)"),
        "unchanged": MetadataValue.bool(result.unchanged),
    })


REPORT_ASSETS = [sre_report]
