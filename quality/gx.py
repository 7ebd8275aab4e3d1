"""Great Expectations 1.x: one file context per quality folder, one suite per table, data docs.

The context lives in `<quality dir>/gx` (suites, validation definitions and each table's
newest validation results, so the data docs show recent history) and the data docs are written to
`<quality dir>/data_docs`. Suites are rebuilt from the code on every run (`add_or_update`):
the code is the single definition of what a table must hold.

GE validates each table's *violations frame* (see `quality.engine`): one column per
invariant, one row per offending key, so every expectation is
`expect_column_values_to_be_null` and its result lists the failing keys.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

# GE phones home (usage analytics) unless told not to; an audit tool on a cluster must not.
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

import great_expectations as gx  # noqa: E402
import pandas as pd  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402

from .model import Suite  # noqa: E402

DATASOURCE = "quality_violations"
SITE = "lake_quality"
INDEX_COLUMNS = ["cluster", "key"]
# The data docs' index lists the latest results only. GE renders the index after every
# check step and reads each result it lists (for its pass or fail): with every stored
# result listed, each step would cost more with every run (a run checks 28 tables; one
# every 15 minutes stores 2,700 results a day). `maintain` drops results past the lake's
# retention (`QualityContext.prune`); the lake's `quality_results` table keeps every outcome.
INDEX_RESULTS = 500
# GE's store keeps a table's newest results only (a day of 15-minute runs): rendering the
# docs lists the whole store, and a store that kept every run until the weekly `maintain`
# (19 k results at that pace) cost seconds per check step by the end of the week.
RESULTS_PER_TABLE = 96

_lock = threading.Lock()
_contexts: dict[str, "QualityContext"] = {}


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike):
    """Exclusive lock on a quality folder, across processes. Dagster's default (multiprocess)
    executor runs check steps in parallel processes, and a GE file context rewrites its
    great_expectations.yml as it opens and adds assets: without the lock, one process read
    the file while another was writing it (seen under `dagster asset materialize`:
    FileDataContext failing on an empty config). Held only around GE work, never around Spark."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    with _lock, open(path / ".lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class QualityContext:
    """The GE file context of one quality folder (use `QualityContext.at(folder)`)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder).resolve()
        self.docs_dir = self.folder / "data_docs"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ctx = gx.get_context(mode="file", project_root_dir=str(self.folder))
        self.ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
        # (GE's type hints: the config is a union of its forms, and the site's TypedDict
        # lacks show_how_to_buttons, which its SiteBuilder takes.)
        sites = getattr(self.ctx.get_config(), "data_docs_sites", None) or {}
        site: Any = {
            "class_name": "SiteBuilder",
            "show_how_to_buttons": False,
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(self.docs_dir)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder", "validation_results_limit": INDEX_RESULTS},
        }
        limit = ((sites.get(SITE) or {}).get("site_index_builder") or {}).get("validation_results_limit")
        if SITE in sites and limit != INDEX_RESULTS:  # made by an earlier version
            self.ctx.delete_data_docs_site(SITE)
            sites = {k: v for k, v in sites.items() if k != SITE}
        if SITE not in sites:
            self.ctx.add_data_docs_site(SITE, site)
        if "local_site" in sites:
            self.ctx.delete_data_docs_site("local_site")
        self.source = self.ctx.data_sources.add_or_update_pandas(name=DATASOURCE)

    @classmethod
    def at(cls, folder: str | os.PathLike) -> "QualityContext":
        """The folder's context (one per process); call it holding `folder_lock(folder)`."""
        key = str(Path(folder).resolve())
        if key not in _contexts:
            _contexts[key] = cls(key)
        return _contexts[key]

    def _validation(self, suite: Suite):
        try:
            asset = self.source.get_asset(suite.table)
        except LookupError:
            asset = self.source.add_dataframe_asset(name=suite.table)
        try:
            batch = asset.get_batch_definition("whole")
        except (KeyError, LookupError):
            batch = asset.add_batch_definition_whole_dataframe("whole")
        expectations = gx.ExpectationSuite(name=suite.name, meta={"table": suite.table, "layer": suite.layer})
        for inv in suite.invariants:
            expectations.add_expectation(gx.expectations.ExpectColumnValuesToBeNull(
                column=inv.name, meta={"severity": inv.severity, "invariant": inv.description},
                description=f"{inv.description} [{inv.severity}]"))
        expectations = self.ctx.suites.add_or_update(expectations)
        return self.ctx.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=suite.name, data=batch, suite=expectations))

    def validate(self, suite: Suite, frame: pd.DataFrame, run_time=None):
        """Validate `frame` (columns: cluster, key, one per invariant) against the table's suite."""
        from great_expectations.core.run_identifier import RunIdentifier

        vd = self._validation(suite)
        run_id = RunIdentifier(run_name=suite.name, run_time=run_time) if run_time is not None else None
        return vd.run(
            batch_parameters={"dataframe": frame},
            result_format={"result_format": "COMPLETE", "unexpected_index_column_names": INDEX_COLUMNS},
            run_id=run_id,
        )

    def build_docs(self, results) -> str:
        """Render the pages of these validation results and the index; returns the index URL."""
        from great_expectations.data_context.types.resource_identifiers import (
            ExpectationSuiteIdentifier,
            ValidationResultIdentifier,
        )

        self._keep_newest({r.suite_name for r in results})
        ids: list[Any] = []  # validation results and their suites
        for r in results:
            suite_id = ExpectationSuiteIdentifier(name=r.suite_name)
            ids.append(ValidationResultIdentifier(expectation_suite_identifier=suite_id, run_id=r.meta["run_id"],
                                                  batch_identifier=r.batch_id))
            ids.append(suite_id)
        self.ctx.build_data_docs(site_names=[SITE], resource_identifiers=ids)
        return self.index_url

    def _keep_newest(self, suite_names: set[str]) -> None:
        """Drop these suites' stored results past the newest RESULTS_PER_TABLE each; the
        index rendered next removes their pages."""
        from great_expectations.data_context.types.resource_identifiers import ExpectationSuiteIdentifier

        store = self.ctx.validation_results_store
        for name in suite_names:
            prefix = ExpectationSuiteIdentifier(name=name).to_tuple()
            listed: list[Any] = store.store_backend.list_keys(prefix=prefix)
            keys: list[Any] = [store.tuple_to_key(t) for t in listed]
            # Listed by folder: another suite's name can extend this one's ("a" and "a.b").
            keys = sorted((k for k in keys if k.expectation_suite_identifier.name == name),
                          key=lambda k: _utc(k.run_id.run_time))
            for key in keys[:-RESULTS_PER_TABLE]:
                store.remove_key(key)

    def prune(self, before: datetime, dry_run: bool = False) -> int:
        """Drop the validation results of checks run before `before` (UTC), and their pages in
        the data docs; returns how many (with `dry_run`, how many would go). GE's store is
        what the docs render; the history is the lake's `quality_results` table."""
        from great_expectations.data_context.types.resource_identifiers import (
            ExpectationSuiteIdentifier,
            ValidationResultIdentifier,
        )

        store = self.ctx.validation_results_store
        old = [k for k in store.list_keys()
               if isinstance(k, ValidationResultIdentifier) and _utc(k.run_id.run_time) < before]
        if dry_run or not old:
            return len(old)
        for key in old:
            store.remove_key(key)
        # Rendering the index removes the pages of results no longer stored; only the suites'
        # pages are rendered again, no result's.
        suites: list[Any] = [ExpectationSuiteIdentifier(name=s.name) for s in self.ctx.suites.all()]
        self.ctx.build_data_docs(site_names=[SITE], resource_identifiers=suites)
        return len(old)

    @property
    def index_url(self) -> str:
        return (self.docs_dir / "index.html").as_uri()


def _utc(t: datetime | None) -> datetime:
    """A result's run time as an aware UTC datetime (GE keeps what it was given; none: the epoch)."""
    if t is None:
        return datetime.fromtimestamp(0, timezone.utc)
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)
