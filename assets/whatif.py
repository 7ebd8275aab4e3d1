"""What-if: each group's real history replayed under other assignors (`whatif_episodes`,
`whatif_summary`), kept up to date incrementally by `pipelines.whatif.incremental`.

Thin: the run replays only the groups whose silver history changed since the last run (all
of them the first time, or when the assignor list changes) and replaces their rows.
"""

from typing import Any

from dagster import AssetSpec, Config, MetadataValue, multi_asset
from pydantic import Field

from assets.metadata import table_result
from assets.resources import LakeResource, SparkResource
from pipelines.stages import WHATIF, deps_of

WHATIF_GROUP = "whatif"
WHATIF_TABLES = WHATIF.outputs


def _default_assignors() -> list[str]:
    from pipelines.whatif.protocols import DEFAULT_ASSIGNORS

    return list(DEFAULT_ASSIGNORS)


class WhatifConfig(Config):
    """Run config of `whatif_tables`. A different assignor list rebuilds every group."""

    assignors: list[str] = Field(default_factory=_default_assignors,
                                 description="assignors to replay each group under (the group's own is always added)")
    full_rebuild: bool = Field(False, description="replay every group, not only the ones with new silver rows")


@multi_asset(
    name=WHATIF.name,
    specs=[AssetSpec(t, group_name=WHATIF_GROUP, deps=list(deps_of(t)), description=d)
           for t, d in WHATIF.tables.items()],
    description="Each group's real history replayed under every assignor, next to what happened.",
)
def whatif_tables(config: WhatifConfig, lake: LakeResource, spark: SparkResource):
    from pipelines.whatif.incremental import update

    target = lake.lake(spark.session)  # Spark starts on first use: a run with nothing new needs none
    if not target.exists("member_assignments") and not target.exists("current_assignments"):
        # Nothing decoded yet (an empty lake): no history to replay.
        for name in WHATIF_TABLES:
            yield table_result(target, name, 0)
        return
    run = update(target, config.assignors, full=config.full_rebuild)
    extra: dict[str, Any] = {"whatif_run": run.mode}
    if run.groups is not None:
        extra["groups_replayed"] = MetadataValue.int(run.groups)
    if run.clusters_replayed_whole:
        extra["clusters_replayed_whole"] = MetadataValue.text(", ".join(run.clusters_replayed_whole))
    for name in WHATIF_TABLES:
        yield table_result(target, name, run.rows_written.get(name, 0), **extra)


WHATIF_ASSETS = [whatif_tables]
