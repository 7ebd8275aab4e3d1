"""When the assets run: every 15 minutes, and when new files appear in the source folders.

The sensor's cursor is the listing of the configured segment and log paths (file name →
size and mtime). When it changes, it asks for one run of every asset. Ingestion is keyed by
source position, so re-reading a folder whose old files were already loaded stores nothing
twice; the run key is a digest of the listing, so one listing never starts two runs.

Neither the schedule nor the sensor starts a run while another `refresh_lake` run is queued
or in progress (they would only wait for the lake's writer lock, or, on an object store
where there is none, race it): they skip, saying which run is in flight, and the sensor
keeps its cursor so the files it saw start the next run.
"""

import hashlib
import json
import os

from dagster import (
    AssetSelection,
    DagsterInstance,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SkipReason,
    define_asset_job,
    schedule,
    sensor,
)

from assets.resources import SourcesResource

refresh_job = define_asset_job(
    "refresh_lake",
    selection=AssetSelection.all(),
    description="Ingest the configured sources, then update every table downstream.",
)

# A run in one of these has not finished with the lake.
IN_FLIGHT = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
             DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]


def refresh_in_flight(instance: DagsterInstance) -> SkipReason | None:
    """A reason to skip when a `refresh_lake` run is queued or running, else None."""
    runs = instance.get_runs(RunsFilter(job_name=refresh_job.name, statuses=IN_FLIGHT), limit=1)
    if not runs:
        return None
    return SkipReason(f"refresh_lake run {runs[0].run_id} is {runs[0].status.value.lower()}: "
                      "its run covers the lake; the next evaluation tries again")


@schedule(
    name="refresh_every_15_minutes",
    job=refresh_job,
    cron_schedule="*/15 * * * *",
    default_status=DefaultScheduleStatus.STOPPED,
)
def every_15_minutes(context: ScheduleEvaluationContext):
    return refresh_in_flight(context.instance) or RunRequest()


def source_listing(paths: list[str]) -> dict[str, list[int]]:
    """Every file under `paths` → [size, mtime_ns]. A path that does not exist is listed
    as missing (-1) rather than skipped, so it appearing later changes the listing."""
    found: dict[str, list[int]] = {}
    for root in paths:
        if os.path.isfile(root):
            st = os.stat(root)
            found[os.path.abspath(root)] = [st.st_size, st.st_mtime_ns]
            continue
        if not os.path.isdir(root):
            found[os.path.abspath(root)] = [-1, -1]
            continue
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for f in sorted(files):
                p = os.path.join(folder, f)
                try:
                    st = os.stat(p)
                except FileNotFoundError:  # rotated or cleaned between listing and stat
                    continue
                found[os.path.abspath(p)] = [st.st_size, st.st_mtime_ns]
    return found


def changed_files(before: dict[str, list[int]], after: dict[str, list[int]]) -> list[str]:
    return sorted(p for p, v in after.items() if before.get(p) != v and v[0] >= 0)


@sensor(
    name="new_source_files",
    job=refresh_job,
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.STOPPED,
    description="Run every asset when files in the configured segment or log folders change.",
)
def new_source_files(context: SensorEvaluationContext, sources: SourcesResource):
    paths = [*sources.segment_paths, *sources.log_paths]
    if not paths:
        return SkipReason("no segment_paths or log_paths configured on the sources resource")
    listing = source_listing(paths)
    before = json.loads(context.cursor) if context.cursor else {}
    changed = changed_files(before, listing)
    if not changed:
        return SkipReason("no new or changed files")
    busy = refresh_in_flight(context.instance)
    if busy is not None:
        return busy  # the cursor stays: these files start the next run
    encoded = json.dumps(listing, sort_keys=True, separators=(",", ":"))
    context.update_cursor(encoded)
    digest = hashlib.sha256(encoded.encode()).hexdigest()[:16]
    return RunRequest(run_key=f"files-{digest}", tags={"rebalance_audit/changed_files": str(len(changed))})
