"""The metadata every asset reports about its Delta table (rows, version, where it is)."""
from __future__ import annotations

import pyarrow as pa
from dagster import MaterializeResult, MetadataValue, TableColumn, TableSchema


def table_rows(lake, name: str) -> int:
    """Rows in the table's latest snapshot, from the Delta log's file statistics (no scan)."""
    actions = pa.table(lake.table(name).get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return 0
    counts = actions.column("num_records").to_pylist()
    if any(c is None for c in counts):
        # A file written without statistics: count for real rather than guess.
        return lake.read_arrow(name, columns=[]).num_rows
    return int(sum(counts))


def table_result(lake, name: str, rows_written: int | None, **extra) -> MaterializeResult:
    """MaterializeResult for table `name`: rows written by this run, rows in the table,
    Delta version, URI and columns. A table the run had nothing to create is reported as absent."""
    meta: dict = {"table_uri": MetadataValue.path(lake.uri(name))}
    if rows_written is not None:
        meta["rows_written"] = MetadataValue.int(int(rows_written))
    if lake.exists(name):
        meta["rows_total"] = MetadataValue.int(table_rows(lake, name))
        meta["delta_version"] = MetadataValue.int(lake.version(name))
        # The UI's column list for the asset (and its lineage of columns).
        meta["dagster/column_schema"] = MetadataValue.table_schema(TableSchema(columns=[
            TableColumn(f.name, str(f.type)) for f in lake.schema(name)]))
    else:
        meta["rows_total"] = MetadataValue.int(0)
        meta["table_exists"] = MetadataValue.bool(False)
    for key, value in extra.items():
        if value is not None:
            meta[key] = value
    return MaterializeResult(asset_key=name, metadata=meta)
