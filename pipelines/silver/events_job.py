"""Spark transformation: bronze `coordinator_log_lines` → silver `coordinator_events`.

Bronze keeps each coordinator entry's raw text; the parser (`pipelines.logs`) runs here,
on the executors, so a better parser can re-derive every event from bronze later.
Entries the parser does not recognize are kept as events of type `unrecognized` (the
quality checks count them), never dropped.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from pipelines.logs import EVENT_FIELDS, FIELD_TYPES, parse_text
from pipelines.silver.records import ms_to_ts
from pipelines.silver.schemas import TS

_ARROW_TYPES = {"string": pa.string(), "long": pa.int64(), "int": pa.int32(), "list<string>": pa.list_(pa.string())}

COORDINATOR_EVENTS = pa.schema(
    [pa.field("cluster", pa.string())]
    + [pa.field(name, _ARROW_TYPES[FIELD_TYPES[name]]) for name in EVENT_FIELDS]
    + [pa.field("event_ts", TS), pa.field("line_key", pa.string())]
)

BRONZE_COLUMNS = ["cluster", "broker", "file", "line", "ts", "text", "line_key"]


def parse_log_lines(lines: DataFrame) -> DataFrame:
    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out = []
            for row in batch.to_pylist():
                rec = parse_text(row["text"], file=row["file"], line=row["line"], broker=row["broker"])
                # The time zone was applied once, at ingestion: bronze `ts` is authoritative.
                rec["ts"] = row["ts"]
                rec["event_ts"] = ms_to_ts(row["ts"])
                rec["cluster"] = row["cluster"]
                rec["line_key"] = row["line_key"]
                out.append(rec)
            if out:
                yield pa.RecordBatch.from_pylist(out, schema=COORDINATOR_EVENTS)

    return lines.select(*BRONZE_COLUMNS).mapInArrow(run, from_arrow_schema(COORDINATOR_EVENTS))
