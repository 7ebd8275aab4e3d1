"""Gold: rebalance history and findings, kept up to date from silver.

Thin: `pipelines.gold.runner.update_gold` reads the silver tables from the lake, recomputes
the groups with new silver rows (every group the first time) and replaces their rows.
The what-if replays are in assets/whatif.py.
"""
import dataclasses
import typing

from dagster import AssetSpec, Config, multi_asset
from pydantic import Field, create_model

from assets.metadata import table_result
from assets.resources import LakeResource, SparkResource
from pipelines.gold.model import GoldParams
from pipelines.gold.runner import GOLD_TABLES  # owned by the runner
from pipelines.stages import GOLD, deps_of

GOLD_GROUP = "gold"


class _GoldConfigBase(Config):
    full_rebuild: bool = Field(False, description="recompute every group, not only the ones with new silver rows")

    def params(self) -> GoldParams:
        return GoldParams(**{f.name: getattr(self, f.name) for f in dataclasses.fields(GoldParams)})


def _gold_config() -> type[_GoldConfigBase]:
    """`gold_tables`' run config: one field per GoldParams setting, with its type, default and
    description taken from GoldParams (defined once there), and the base's `full_rebuild`."""
    types = typing.get_type_hints(GoldParams)
    fields: dict[str, typing.Any] = {f.name: (types[f.name], Field(f.default, description=f.metadata["description"]))
                                     for f in dataclasses.fields(GoldParams)}
    return create_model(
        "GoldConfig", __base__=_GoldConfigBase, __module__=__name__,
        __doc__="Run config of `gold_tables`: the GoldParams (defaults in docs/gold.md). Changing any of them "
                "makes the next run rebuild every gold table (they are part of gold's fingerprint).",
        **fields)


if typing.TYPE_CHECKING:
    GoldConfig = _GoldConfigBase  # the GoldParams fields are made at import: a type checker sees the base
else:
    GoldConfig = _gold_config()


@multi_asset(
    name=GOLD.name,
    specs=[AssetSpec(t, group_name=GOLD_GROUP, deps=list(deps_of(t)), description=GOLD.tables[t])
           for t in GOLD_TABLES],
    description="Rebalance episodes, ownership, duplicate/skip windows, idle consumers, storms, anomalies, coverage gaps.",
)
def gold_tables(config: GoldConfig, lake: LakeResource, spark: SparkResource):
    from pipelines.gold.runner import REQUIRED, update_gold

    target = lake.lake(spark.session)  # Spark starts on first use: a run with nothing new needs none
    if not all(target.exists(t) for t in REQUIRED):
        # Nothing decoded yet (an empty lake): no history to derive.
        for name in GOLD_TABLES:
            yield table_result(target, name, 0)
        return
    # Incremental: only the groups with new silver rows are recomputed and replaced.
    run = update_gold(target, config.params(), full=config.full_rebuild)
    for name in GOLD_TABLES:
        yield table_result(target, name, run.rows_written.get(name, 0), gold_run=run.mode,
                           groups_recomputed=run.groups)


GOLD_ASSETS = [gold_tables]
