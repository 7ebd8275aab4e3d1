"""Lake maintenance as a Dagster job: compact and vacuum every table, weekly.

`maintain_lake` runs what `rebalance-audit maintain` runs (pipelines/lake/maintenance.py:
delta-spark's OPTIMIZE and VACUUM on each table, then pruning of the positions ledger), and
drops the Great Expectations validation results past the retention (quality.runner.prune_results).
The lake resource holds the writer lock for the run, so a refresh in progress finishes
first and the next one waits for the maintenance (it never skips: a weekly job skipped
because a 15-minute refresh was running would wait a week).
"""

from typing import Optional

from dagster import Config, DefaultScheduleStatus, OpExecutionContext, RunRequest, job, op, schedule
from pydantic import Field

from assets.resources import LakeResource, SparkResource


class MaintainConfig(Config):
    retain_hours: Optional[float] = Field(
        default=None, description="keep files (and time travel) this far back; default: each table's "
                                  "delta.deletedFileRetentionDuration (168 hours unless set)")
    tables: Optional[list[str]] = Field(
        default=None, description="only these tables (default: every table, and the positions ledger pruned)")


@op(description="OPTIMIZE then VACUUM every lake table (delta-spark); drop position runs no table names "
                "and GE validation results past the retention.")
def maintain_tables(context: OpExecutionContext, config: MaintainConfig, lake: LakeResource, spark: SparkResource):
    from pipelines.lake.maintenance import maintain
    from quality.runner import prune_results

    the_lake = lake.lake(spark=spark.session)
    done, pruned = maintain(the_lake, config.retain_hours, config.tables, say=context.log.info)
    results = 0 if config.tables else prune_results(the_lake, config.retain_hours)
    before, after = sum(t.files_before for t in done), sum(t.files_after for t in done)
    context.log.info(f"{len(done)} tables: {before} → {after} files, {sum(t.files_vacuumed for t in done)} "
                     f"vacuumed; {pruned} ledger runs and {results} quality validation results dropped")


@job(name="maintain_lake", description="Compact (OPTIMIZE) and vacuum (VACUUM) every lake table.")
def maintain_job():
    maintain_tables()


@schedule(name="maintain_lake_weekly", job=maintain_job, cron_schedule="0 3 * * 0",
          default_status=DefaultScheduleStatus.STOPPED)
def maintain_weekly():
    return RunRequest()
