"""Great Expectations 1.x: one file context per quality folder, one suite per table, data docs.

The context lives in `<quality dir>/gx` (suites, validation definitions and every
validation result, so the data docs show the history) and the data docs are written to
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
        if SITE not in sites:
            site: Any = {
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(self.docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            }
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

        ids: list[Any] = []  # validation results and their suites
        for r in results:
            suite_id = ExpectationSuiteIdentifier(name=r.suite_name)
            ids.append(ValidationResultIdentifier(expectation_suite_identifier=suite_id, run_id=r.meta["run_id"],
                                                  batch_identifier=r.batch_id))
            ids.append(suite_id)
        self.ctx.build_data_docs(site_names=[SITE], resource_identifiers=ids)
        return self.index_url

    @property
    def index_url(self) -> str:
        return (self.docs_dir / "index.html").as_uri()
