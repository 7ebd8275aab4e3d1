"""Data quality: one Great Expectations suite per lake table, expressing the domain's invariants.

    from quality import check_tables
    report = check_tables(lake, ["group_generations", "member_assignments"])
    report.outcomes[0].success, report.data_docs

Suites live in `quality.bronze`, `.silver`, `.gold`, `.whatif`; `quality.engine` runs them
(one Spark job per table), `quality.gx` holds the Great Expectations context and data docs,
`quality.results` appends every result to the `quality_results` table.
"""
from __future__ import annotations

from .runner import QualityReport, check_tables, quality_dir
from .suites import SUITES, suite_for

__all__ = ["SUITES", "suite_for", "check_tables", "quality_dir", "QualityReport"]
