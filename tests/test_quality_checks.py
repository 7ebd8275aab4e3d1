"""The quality suites as Dagster asset checks: registered next to every table that has a
suite. That they run with the assets and pass on a real recording, with their metadata,
is `test_assets_materialize.py`'s (one materialization serves both)."""
from __future__ import annotations

from dagster import AssetCheckKey

from assets.checks import CHECK_NAME
from assets.definitions import ALL_ASSETS, ALL_CHECKS, defs
from quality import SUITES


def _asset_tables():
    return {k.to_user_string() for a in ALL_ASSETS for k in a.keys}


def test_definitions_list_a_blocking_check_per_table_with_a_suite():
    repo = defs.get_repository_def()
    check_keys = set()
    for checks_def in ALL_CHECKS:
        for spec in checks_def.check_specs:
            assert spec.blocking, spec.key
            check_keys.add(spec.key)
    expected = {AssetCheckKey.from_user_string(f"{t}:{CHECK_NAME}") for t in _asset_tables() if t in SUITES}
    assert expected and check_keys == expected
    # Every layer the definitions materialize has its checks.
    tables = {k.asset_key.to_user_string() for k in check_keys}
    assert {"offsets_records", "group_generations", "member_assignments", "offset_commits",
            "coordinator_events", "ownership_intervals"} <= tables
    # The repository (what `dagster dev` loads) knows them too.
    assert expected <= set(repo.asset_graph.asset_check_keys)
