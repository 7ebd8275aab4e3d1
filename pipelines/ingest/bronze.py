"""Buffered, idempotent writers of bronze rows, and what a run loaded.

Rows are buffered column-wise and flushed as one `insert_if_absent` commit per chunk, so
memory stays bounded on a multi-GB segment folder and a re-run (or a second replica of the
same partition) inserts nothing it already holds.
"""
from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.lake import Positions
from pipelines.ingest.schemas import OFFSETS_RECORDS, QUARANTINE, RAW_LIMIT, BronzeTable, ensure

CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DEFAULT_CLUSTER = "default"
CHUNK_ROWS = 200_000


def check_cluster(name: str) -> str:
    # The name becomes a Delta partition folder (cluster=NAME/): keep it path- and SQL-safe.
    if not CLUSTER_NAME.match(name or ""):
        raise ValueError(f"bad cluster name {name!r}: letters, digits, '.', '_', '-' (max 64), starting with a letter or digit")
    return name


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def merge_ranges(rs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive ranges → sorted, with overlapping and adjacent ones joined."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(rs):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(b, out[-1][1]))
        else:
            out.append((a, b))
    return out


def format_ranges(rs: list[tuple[int, int]], limit: int = 4) -> str:
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in rs[:limit]]
    if len(rs) > limit:
        parts.append(f"... ({len(rs)} ranges)")
    return ",".join(parts)


@dataclass
class Summary:
    """What one ingestion run did, per table and per partition."""

    seen: int = 0
    inserted: int = 0
    quarantined_seen: int = 0
    quarantined: int = 0
    commits: int = 0
    # (cluster, partition) → inclusive offset ranges inserted, per commit (merged when read).
    inserted_ranges: dict = field(default_factory=lambda: defaultdict(list))
    extra: dict = field(default_factory=dict)

    def note_inserted(self, rows: pa.Table) -> None:
        """Remember the offsets of inserted rows (cluster, partition, offset) as ranges."""
        for key in rows.select(["cluster", "partition"]).group_by(["cluster", "partition"]).aggregate([]).to_pylist():
            mask = pc.and_(pc.equal(rows["cluster"], key["cluster"]), pc.equal(rows["partition"], key["partition"]))
            offsets = np.sort(rows["offset"].filter(mask).to_numpy())
            # Where consecutive offsets leave a gap, one range ends and the next starts.
            cut = np.flatnonzero(np.diff(offsets) > 1)
            firsts = np.concatenate(([offsets[0]], offsets[cut + 1]))
            lasts = np.concatenate((offsets[cut], [offsets[-1]]))
            self.inserted_ranges[(key["cluster"], key["partition"])] += zip(firsts.tolist(), lasts.tolist())

    def loaded_ranges(self) -> dict[tuple[str, int], list[tuple[int, int]]]:
        return {k: merge_ranges(v) for k, v in sorted(self.inserted_ranges.items())}


class BufferedWriter:
    """Buffers for one bronze table (rows as column lists, or Arrow tables), flushed through
    `Lake.insert_if_absent`."""

    def __init__(self, lake, table: BronzeTable, summary: Summary, chunk_rows: int = CHUNK_ROWS, track_offsets: bool = False):
        self.lake = lake
        self.table = table
        self.summary = summary
        self.chunk_rows = chunk_rows
        self.track_offsets = track_offsets
        self.names = table.schema.names
        self.cols: dict[str, list] = {n: [] for n in self.names}
        # Rows added column-wise (add_table), and rows added one by one before them.
        self.tables: list[pa.Table] = []
        self.table_rows = 0
        ensure(lake, table)

    def __len__(self) -> int:
        return len(self.cols[self.names[0]]) + self.table_rows

    def add(self, row: dict) -> None:
        for n in self.names:
            self.cols[n].append(row.get(n))
        if len(self) >= self.chunk_rows:
            self.flush()

    def add_table(self, data: pa.Table) -> None:
        """Buffer rows already built column-wise (of the table's schema); commits fall at
        the same rows as when they are added one by one."""
        self._seal_rows()
        while data.num_rows:
            room = self.chunk_rows - len(self)
            self.tables.append(data.slice(0, room))
            self.table_rows += self.tables[-1].num_rows
            data = data.slice(room)
            if len(self) >= self.chunk_rows:
                self.flush()

    def _seal_rows(self) -> None:
        """The rows added one by one, as a table after those before them."""
        if self.cols[self.names[0]]:
            self.tables.append(pa.Table.from_pydict(self.cols, schema=self.table.schema))
            self.table_rows += self.tables[-1].num_rows
            self.cols = {n: [] for n in self.names}

    def flush(self, positions: Positions | None = None, metadata: dict | None = None) -> pa.Table:
        """Insert the buffered rows not yet in the table, in one commit (with the given
        positions even when nothing is new). Returns the rows inserted."""
        if not len(self) and not positions:
            return self.table.schema.empty_table()
        self._seal_rows()
        data = pa.concat_tables(self.tables) if self.tables else self.table.schema.empty_table()
        self.tables, self.table_rows = [], 0
        if self.table.key:
            inserted = self.lake.insert_if_absent(
                self.table.name,
                data,
                key=list(self.table.key),
                range_column=self.table.range_column,
                positions=positions,
                metadata=metadata,
            )
        else:
            self.lake.append(self.table.name, data, positions=positions, metadata=metadata)
            inserted = data
        if inserted.num_rows or positions:
            self.summary.commits += 1
        if self.table is QUARANTINE:
            self.summary.quarantined += inserted.num_rows
        else:
            self.summary.inserted += inserted.num_rows
        if self.track_offsets and inserted.num_rows:
            self.summary.note_inserted(inserted)
        return inserted


def quarantine_row(cluster: str, source: str, source_key: str, reason: str, **fields) -> dict:
    raw = fields.pop("raw", None)
    if raw is not None and len(raw) > RAW_LIMIT:
        raw = bytes(raw[:RAW_LIMIT])
    return {
        "cluster": cluster,
        "source": source,
        "source_key": f"{source}:{source_key}",
        "reason": reason,
        "raw": raw,
        "ingested_at": now_utc(),
        **fields,
    }


def offsets_writer(lake, summary: Summary, chunk_rows: int = CHUNK_ROWS) -> BufferedWriter:
    return BufferedWriter(lake, OFFSETS_RECORDS, summary, chunk_rows, track_offsets=True)


def quarantine_writer(lake, summary: Summary) -> BufferedWriter:
    return BufferedWriter(lake, QUARANTINE, summary)
