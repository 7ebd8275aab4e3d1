"""Benchmark: silver's decode of bronze rows, with and without the compiled core (one core).

Times `pipelines.silver.decode_job.decode_batch`, the function every Spark task of silver's
decode runs (`mapInArrow`), over the same Arrow batches of bronze rows: once with offset
commits through the compiled core (native/src/commits.rs), once with every record through
the per-record Python path. No Spark: the figure is the Python worker's share of the
step (on 2 cores the JVM's share, reading bronze and caching the decoded rows, runs beside
it). Bronze rows are the recordings' segment files as bronze reads them, repeated up to
--records; with --lake, the `offsets_records` of that lake (e.g. the large benchmark's).

    .venv/bin/python bench/bench_silver_decode.py
    .venv/bin/python bench/bench_silver_decode.py --lake /tmp/ra-bench/large/lake-full --records 400000
"""
from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from pipelines.silver import commit_columns, decode_job  # noqa: E402

RECORDINGS = HERE.parent.parent / "shared" / "recordings"
BATCH_ROWS = 10_000  # Spark's spark.sql.execution.arrow.maxRecordsPerBatch


def _with_types(table: pa.Table) -> pa.Table:
    """Data records (no markers) with the key's type, as `decode_increment` hands them over."""
    table = table.filter(pc.invert(pc.fill_null(table["control"], False)))
    types = [None if not k else int(k[:2].hex(), 16) for k in table["key"].to_pylist()]
    if "ingest_version" not in table.column_names:
        table = table.append_column("ingest_version", pa.repeat(pa.scalar(0, pa.int64()), table.num_rows))
    return table.append_column("record_type", pa.array(types, pa.int32())).select(
        [*decode_job.BRONZE_COLUMNS, "record_type"])


def recordings_rows() -> pa.Table:
    from pipelines.ingest.segments import read_segment_file
    from pipelines.segments.paths import discover

    now = datetime.now(timezone.utc)
    tables = [read_segment_file(seg, rec.name, now).records
              for rec in sorted(RECORDINGS.iterdir()) if (rec / "offsets_segments").is_dir()
              for seg in discover([rec / "offsets_segments"])]
    return pa.concat_tables(tables)


def lake_rows(lake: str, limit: int) -> pa.Table:
    from deltalake import DeltaTable

    dataset = DeltaTable(str(Path(lake) / "offsets_records")).to_pyarrow_dataset()
    return dataset.head(limit)


def time_decode(rows: pa.Table, compiled: bool) -> tuple[float, int]:
    start, out = time.perf_counter(), 0
    for batch in rows.to_batches(max_chunksize=BATCH_ROWS):
        for decoded in decode_job.decode_batch(batch, compiled=compiled):
            # a row per commit, and one per batch listing the batch's other rows
            others = decoded.column(decode_job.OTHERS_COLUMN)
            out += decoded.num_rows - (len(others) - others.null_count) \
                + (pc.sum(pc.list_value_length(others)).as_py() or 0)
    return time.perf_counter() - start, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lake", help="read bronze offsets_records from this lake instead of the recordings")
    ap.add_argument("--records", type=int, default=300_000, help="bronze rows to decode (default 300,000)")
    args = ap.parse_args(argv)
    base = lake_rows(args.lake, args.records) if args.lake else recordings_rows()
    rows = _with_types(base)
    if not args.lake:  # the recordings hold ~6,600 records: repeated to the size asked
        rows = pa.concat_tables([rows] * max(1, -(-args.records // max(rows.num_rows, 1)))).slice(0, args.records)
    commits = pc.sum(pc.is_in(rows["record_type"], pa.array([0, 1], pa.int32()))).as_py() or 0
    print(f"{rows.num_rows:,} bronze records ({commits:,} offset commits) from {args.lake or 'the recordings'}")
    paths = [True, False] if commit_columns.available() else [False]
    if not commit_columns.available():
        print("the compiled core is not built (no Rust toolchain at set-up, or REBALANCE_AUDIT_NO_NATIVE=1)")
    rates = {}
    for compiled in paths:
        seconds, out = time_decode(rows, compiled)
        rates[compiled] = rows.num_rows / seconds
        name = "compiled core + Python" if compiled else "Python, record by record"
        print(f"  {name:26s} {rates[compiled]:>10,.0f} records/s  ({seconds:.2f} s, {out:,} silver rows)")
    if len(rates) == 2:
        print(f"  compiled / Python: {rates[True] / rates[False]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
