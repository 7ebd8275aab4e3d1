"""The lake: one Delta table per folder under a root, on the basic Delta protocol.

Two writers, one format (reader 1 / writer 2: no deletion vectors, no column mapping, so
delta-rs, delta-spark, Trino and DuckDB all open every table):

* Spark jobs write through delta-spark (`save`, `MERGE`) and read the data files a version's
  log names (`sparkio.read_files`: delta-spark's reads cost a Spark job per scan);
* Arrow writes, where no JVM should start (bronze ingestion, quality results, the
  positions ledger), go through delta-rs. Nothing outside this package imports
  `deltalake`.

Tables are created by delta-rs (`create`), so their protocol is the basic one whichever
engine writes them next. Exactly-once positions: `positions.py`.
"""
from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from pipelines.lake import sparkio, txlog
from pipelines.lake.native_stderr import write_deltalake
from pipelines.lake.positions import Ledger, Positions

# Column stamped with the committing version on append (see Lake._append_stamped).
VERSION_COLUMN = "ingest_version"

TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,127}$")


class LakeError(Exception):
    """A lake operation that cannot be done as asked (bad name, schema conflict, ...)."""


def _commit(txn: tuple[str, int] | None, metadata: Mapping[str, str] | None):
    if not txn and not metadata:
        return None
    return CommitProperties(
        app_transactions=[Transaction(txn[0], int(txn[1]))] if txn else None,
        custom_metadata=dict(metadata) if metadata else None,
    )


def _nullable(schema: pa.Schema) -> pa.Schema:
    # Every column nullable: the log's schema then never rejects a row over nullability,
    # and Spark (which reads everything as nullable) round-trips it unchanged.
    return pa.schema([f.with_nullable(True) for f in schema])


class Lake:
    """Delta tables under `root` (a local folder or an object-store URI such as s3://b/p)."""

    def __init__(self, root: str | os.PathLike, storage_options: Mapping[str, str] | None = None, spark=None):
        """`spark`: a SparkSession, or a function returning one, called on the first Spark
        read or write (work that the Delta log answers alone then never starts a JVM)."""
        root = str(root)
        if "://" not in root:
            root = os.path.abspath(root)
        self.root = root.rstrip("/")
        self.storage_options = dict(storage_options) if storage_options else None
        self._spark = spark
        self.ledger = Ledger(self.root, self.storage_options)

    # ----------------------------------------------------------------- naming, opening
    @property
    def is_local(self) -> bool:
        return "://" not in self.root or self.root.startswith("file://")

    def writer_lock(self, timeout: float | None = None, say=None):
        """A context holding the lake's writer lock (see lock.py); on an object store, none."""
        if not self.is_local:
            return contextlib.nullcontext()
        from pipelines.lake.lock import writer_lock

        return writer_lock(self.root.removeprefix("file://"), timeout=timeout, say=say)

    def uri(self, name: str) -> str:
        if not TABLE_NAME.match(name):
            raise LakeError(f"bad table name {name!r}: lower-case letters, digits and _ only")
        return f"{self.root}/{name}"

    def exists(self, name: str) -> bool:
        return DeltaTable.is_deltatable(self.uri(name), storage_options=self.storage_options)

    def table(self, name: str, version: int | None = None) -> DeltaTable:
        try:
            return DeltaTable(self.uri(name), version=version, storage_options=self.storage_options)
        except TableNotFoundError:
            raise LakeError(f"no table {name!r} in the lake at {self.root}") from None

    def tables(self) -> list[str]:
        """Names of every Delta table directly under the root."""
        if self.is_local:
            root = self.root.removeprefix("file://")
            if not os.path.isdir(root):
                return []
            names = sorted(os.listdir(root))
        else:
            import pyarrow.fs as pafs

            fs, base = pafs.FileSystem.from_uri(self.root)
            names = sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(base)) if i.type == pafs.FileType.Directory)
        return [n for n in names if TABLE_NAME.match(n) and self.exists(n)]

    def schema(self, name: str) -> pa.Schema:
        return pa.schema(self.table(name).schema().to_arrow())

    def partition_by(self, name: str) -> list[str]:
        return list(self.table(name).metadata().partition_columns)

    def table_id(self, name: str) -> str:
        """The table's id in its log: set when it was created, so another table of the same
        name (another lake, or this one deleted and created again) has another."""
        return str(self.table(name).metadata().id)

    def version(self, name: str) -> int:
        return self.table(name).version()

    def protocol(self, name: str) -> tuple[int, int]:
        p = self.table(name).protocol()
        return p.min_reader_version, p.min_writer_version

    # ----------------------------------------------------------------- create, evolve
    def create(self, name: str, schema: pa.Schema, partition_by: Sequence[str] | None = None, description: str | None = None) -> None:
        """Create the table if it does not exist; if it does, add any new columns of `schema`."""
        if self.exists(name):
            self.evolve(name, schema)
            return
        DeltaTable.create(
            self.uri(name),
            schema=_nullable(schema),
            mode="ignore",
            partition_by=list(partition_by) if partition_by else None,
            name=name,
            description=description,
            storage_options=self.storage_options,
        )

    def evolve(self, name: str, schema: pa.Schema) -> list[str]:
        """Schema evolution: add `schema`'s columns the table lacks (nullable). A column
        whose type differs from the table's is an error, not a silent cast."""
        current = self.schema(name)
        added = []
        for f in schema:
            idx = current.get_field_index(f.name)
            if idx < 0:
                added.append(f.with_nullable(True))
            elif not current.field(idx).type.equals(f.type) and not _compatible(current.field(idx).type, f.type):
                raise LakeError(f"table {name}: column {f.name} is {current.field(idx).type}, not {f.type}")
        if added:
            from deltalake.schema import Field

            self.table(name).alter.add_columns([Field.from_arrow(f) for f in added])
        return [f.name for f in added]

    # ----------------------------------------------------------------- Arrow writes (no Spark)
    def _conform(self, name: str, data: pa.Table, evolve: bool) -> pa.Table:
        if evolve:
            self.evolve(name, data.schema)
        schema = self.schema(name)
        extra = [n for n in data.column_names if schema.get_field_index(n) < 0]
        if extra:
            raise LakeError(f"table {name} has no column(s) {extra} (pass evolve=True to add them)")
        cols = []
        for f in schema:
            if f.name in data.column_names:
                cols.append(data.column(f.name).cast(f.type))
            else:
                cols.append(pa.nulls(data.num_rows, f.type))
        return pa.Table.from_arrays(cols, schema=schema)

    def append(
        self,
        name: str,
        data: pa.Table,
        positions: Positions | None = None,
        metadata: Mapping[str, str] | None = None,
        evolve: bool = False,
    ) -> int:
        """Append Arrow rows (delta-rs) in one commit, with its positions. An empty `data`
        with positions still commits the positions. Returns the version."""
        data = self._conform(name, data, evolve)  # may evolve the schema: open the table after
        dt = self.table(name)
        txn = self._run(name, positions)
        if VERSION_COLUMN in data.column_names and data.num_rows:
            return self._append_stamped(dt, name, data, txn, metadata)
        props = _commit(txn, metadata)
        if data.num_rows == 0:
            if not txn:
                return dt.version()  # nothing to record: metadata alone is no reason to commit
            dt.create_write_transaction([], mode="append", schema=self.schema(name), partition_by=self.partition_by(name) or None, commit_properties=props)
        else:
            write_deltalake(dt, data, mode="append", commit_properties=props)
        return self.version(name)

    def _append_stamped(self, dt: DeltaTable, name: str, data: pa.Table, txn, metadata) -> int:
        """Append with every row's `ingest_version` set to the version of the commit itself.

        Downstream jobs read "rows committed after version N" by this column (see
        `read_since`); it survives compaction, which rewrites files but not rows. The commit
        is made with no automatic retry, so a concurrent writer that takes the expected
        version makes this one re-stamp and try again rather than commit a wrong stamp.
        """
        idx = data.schema.get_field_index(VERSION_COLUMN)
        for _ in range(20):
            dt.update_incremental()
            expected = dt.version() + 1
            stamped = data.set_column(idx, data.schema.field(idx), pa.array([expected] * data.num_rows, pa.int64()))
            props = _commit(txn, metadata) or CommitProperties()
            props.max_commit_retries = 0
            try:
                write_deltalake(dt, stamped, mode="append", commit_properties=props)
            except CommitFailedError:
                continue
            return self.version(name)
        raise LakeError(f"table {name}: could not commit after 20 attempts (concurrent writers?)")

    def read_since(self, name: str, column: str, since: int, upto: int | None = None):
        """Rows with since < `column` <= upto as a Spark DataFrame, reading only the files
        whose min/max statistics in the log can hold such rows: cost grows with the
        increment, not with the table."""
        from pyspark.sql import functions as F

        dt = self.table(name, upto)
        stats = pa.table(dt.get_add_actions(flatten=True))
        files = self._files(name, dt, stats)
        if f"max.{column}" in stats.column_names:
            lows, highs = stats.column(f"min.{column}").to_pylist(), stats.column(f"max.{column}").to_pylist()
            skip = {self._file_uri(name, path) for path, lo, hi in zip(stats.column("path").to_pylist(), lows, highs)
                    if hi is not None and (hi <= since or (upto is not None and lo is not None and lo > upto))}
            files = {u: v for u, v in files.items() if u not in skip}
        df = self._read_files(name, files, dt)
        cond = F.col(column) > since
        if upto is not None:
            cond = cond & (F.col(column) <= upto)
        return df.where(cond)

    def insert_if_absent(
        self,
        name: str,
        data: pa.Table,
        key: Sequence[str],
        range_column: str | None = None,
        positions: Positions | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> pa.Table:
        """Append the rows of `data` whose `key` is not in the table yet (and only the first
        of several equal keys in `data`), in one commit. Returns the rows inserted.

        Cost stays bounded by the batch, not the table: only files of the table partitions
        the batch touches whose `range_column` min/max (file statistics) overlap the batch's
        range per partition are read, and only their key columns.
        """
        dt = self.table(name)
        data = self._conform(name, data, evolve=False)
        data = _first_per_key(data, list(key))
        if data.num_rows:
            existing = self._existing_keys(dt, data, list(key), range_column)
            if existing.num_rows:
                data = _anti_join(data, existing, list(key))
        self.append(name, data, positions=positions, metadata=metadata)
        return data

    def _existing_keys(self, dt: DeltaTable, data: pa.Table, key: list[str], range_column: str | None) -> pa.Table:
        if dt.version() < 1 and not dt.file_uris():
            return data.select(key).slice(0, 0)
        expr = self._batch_filter(dt, data, range_column)
        return dt.to_pyarrow_dataset().to_table(columns=key, filter=expr)

    def _batch_filter(self, dt: DeltaTable, data: pa.Table, range_column: str | None):
        """A filter matching the batch's partitions and, per partition, its range_column
        span. pyarrow prunes whole files on it: partition values and the min/max stats
        delta-rs keeps per file are the fragments' guarantees."""
        parts = list(dt.metadata().partition_columns)
        group_cols = [c for c in parts if c in data.column_names]
        aggs = [(range_column, "min"), (range_column, "max")] if range_column else []
        if group_cols:
            groups = data.group_by(group_cols).aggregate(aggs) if aggs else data.select(group_cols).group_by(group_cols).aggregate([])
            ranges = groups.to_pylist()
        else:
            ranges = [
                {f"{range_column}_min": pc.min(data[range_column]).as_py(), f"{range_column}_max": pc.max(data[range_column]).as_py()}
                if range_column
                else {}
            ]
        has_nulls = bool(range_column) and data[range_column].null_count > 0
        expr = None
        for g in ranges:
            term = None
            for c in group_cols:
                t = ds.field(c).is_null() if g[c] is None else ds.field(c) == g[c]
                term = t if term is None else term & t
            if range_column:
                lo, hi = g[f"{range_column}_min"], g[f"{range_column}_max"]
                # min/max skip nulls: rows with a null range value match only null ones.
                t = (ds.field(range_column) >= lo) & (ds.field(range_column) <= hi) if lo is not None else None
                if has_nulls:
                    t = ds.field(range_column).is_null() if t is None else t | ds.field(range_column).is_null()
                term = t if term is None else term & t
            if term is not None:
                expr = term if expr is None else expr | term
        return expr

    def overwrite_where(
        self,
        name: str,
        data: pa.Table,
        predicate: str,
        positions: Positions | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> int:
        """Replace the rows matching `predicate` (SQL, e.g. "cluster = 'prod'") by `data`
        in one commit (Delta replaceWhere). Every row of `data` must match the predicate."""
        dt = self.table(name)
        data = self._conform(name, data, evolve=False)
        write_deltalake(dt, data, mode="overwrite", predicate=predicate, commit_properties=_commit(self._run(name, positions), metadata))
        return self.version(name)

    # ----------------------------------------------------------------- Arrow reads
    def read_arrow(self, name: str, version: int | None = None, columns: Sequence[str] | None = None, filter=None) -> pa.Table:
        dt = self.table(name, version)
        return dt.to_pyarrow_dataset().to_table(columns=list(columns) if columns else None, filter=filter)

    # ----------------------------------------------------------------- Spark
    @property
    def spark(self):
        if self._spark is None:
            from pipelines.spark import get_spark

            self._spark = get_spark()
        elif callable(self._spark) and not hasattr(self._spark, "sparkContext"):
            self._spark = self._spark()
        return self._spark

    def spark_uri(self, name: str) -> str:
        """The table's location as Spark's Hadoop filesystems name it (s3:// → s3a://)."""
        return sparkio.spark_path(self.uri(name))

    def read(self, name: str, version: int | None = None, clusters: Iterable[str] | None = None):
        """The table at `version` (default: its latest now) as a Spark DataFrame over that
        version's data files (sparkio.read_files). The version is pinned: a job that reads a
        table, rewrites it and then uses what it read (silver's parked transactional commits)
        sees the rows it read. With `clusters`, only the files of those `cluster` partitions
        (from the log, before Spark lists anything); a table not partitioned by cluster is
        read whole."""
        dt = self.table(name, None if version is None else int(version))  # LakeError if absent
        files = self._files(name, dt)
        if clusters is not None and "cluster" in dt.metadata().partition_columns:
            wanted = set(clusters)
            files = {u: v for u, v in files.items() if v.get("cluster") in wanted}
        return self._read_files(name, files, dt)

    def _read_files(self, name: str, files: Mapping[str, Mapping], dt: DeltaTable):
        return sparkio.read_files(self.spark, files, pa.schema(dt.schema().to_arrow()),
                                  list(dt.metadata().partition_columns))

    def _file_uri(self, name: str, path: str) -> str:
        """A data file's URI as `file_uris` names it, from its path in the log (relative and
        percent-encoded, or absolute)."""
        if "://" in path or path.startswith("/"):
            return path
        base = _decoded(self.uri(name)) if self.is_local else self.uri(name)
        return f"{base}/{unquote(path)}"

    def _files(self, name: str, dt: DeltaTable, actions: pa.Table | None = None) -> dict[str, dict]:
        """The data files of snapshot `dt` of table `name`: URI → partition values
        (`actions`: the snapshot's flattened add actions, when the caller has them)."""
        uris = dt.file_uris()
        parts = list(dt.metadata().partition_columns)
        if not parts:
            return {u: {} for u in uris}
        if actions is None:
            actions = pa.table(dt.get_add_actions(flatten=True))
        values = [dict(zip(parts, v)) for v in zip(*(actions.column(f"partition.{c}").to_pylist() for c in parts))]
        files = {self._file_uri(name, p): v for p, v in zip(actions.column("path").to_pylist(), values)}
        if set(files) == set(uris):
            return files
        # Paths named otherwise than `_file_uri` assumes (an object store's URI encoding):
        # ask delta-rs for each partition's files instead.
        files = {}
        for v in {tuple(sorted(v.items())) for v in values}:
            for uri in dt.file_uris(partition_filters=[(c, "=", str(x)) for c, x in v]):
                files[uri] = dict(v)
        if set(files) != set(uris):
            raise LakeError(f"table {name}: the files of its log cannot be matched to their partitions")
        return files

    def write_df(
        self,
        name: str,
        df,
        mode: str = "append",
        partition_by: Sequence[str] | None = None,
        positions: Positions | None = None,
    ) -> int:
        """Write a Spark DataFrame with delta-spark in ONE commit, with its positions (as
        delta-spark's idempotent-write options). mode "append" or "overwrite" (the whole
        table). `partition_by` applies when the table is created. New nullable columns of
        `df` are added to the table (schema evolution). Returns the table version."""
        if mode not in ("append", "overwrite"):
            raise LakeError(f"write mode must be append or overwrite, not {mode!r}")
        self.create(name, sparkio.arrow_schema(df.schema), partition_by)
        writer = _conform_df(df, self.schema(name)).write.format("delta").mode(mode)
        txn = self._run(name, positions)
        if txn:
            writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
        writer.save(self.spark_uri(name))
        return self.version(name)

    def files_added_since(self, name: str, version: int | None) -> dict[str, dict]:
        """The data files in the latest snapshot that were not in it at `version` (every
        file when `version` is None or negative), URI → partition values. No Spark, only the log."""
        return self.file_changes(name, version)[0]

    def file_changes(self, name: str, version: int | None) -> tuple[dict[str, dict], dict[str, dict]]:
        """(files with new rows, files whose rows are gone) between `version` and the
        latest snapshot, each URI → its partition values. A removed file means the table was
        not only appended to (overwrite, delete, MERGE). Compactions (`maintain`'s OPTIMIZE)
        of rows older than `version` are no change (see txlog.data_changes). `version` None
        or negative: every file is added."""
        dt = self.table(name)
        now = self._files(name, dt)
        if version is None or version < 0:
            return now, {}
        if version > dt.version():
            raise LakeError(f"table {name} is at version {dt.version()}, not at {version} or later (rewritten or replaced?)")
        if version == dt.version():
            return {}, {}
        walked = self._data_changes(name, dt, version, list(now))
        if walked is not None:
            # A file's partition values as the snapshots know them (the log's own are
            # strings, and a remove action may leave them out).
            added, removed = walked
            before = self._files(name, self.table(name, version)) if removed else {}
            return {u: now[u] for u in added}, {u: before.get(u, v) for u, v in removed.items()}
        # The log of the range is cleaned up (or names files otherwise): compare snapshots,
        # which counts a compaction as a change (safe: a consumer re-reads more, not less).
        before = self._files(name, self.table(name, version))
        return ({u: v for u, v in now.items() if u not in before},
                {u: v for u, v in before.items() if u not in now})

    def _data_changes(self, name: str, dt: DeltaTable, version: int,
                      now: list[str] | None = None) -> tuple[dict, dict] | None:
        """txlog.data_changes between `version` and `dt`'s, keyed by URI as `file_uris` names
        files (`now`: `dt.file_uris()` when the caller has them); None when the log cannot
        tell (see there)."""
        walked = txlog.data_changes(dt.to_pyarrow_dataset().filesystem, version, dt.version())
        if walked is None:
            return None
        added, removed = ({self._file_uri(name, p): v for p, v in files.items()} for files in walked)
        if not set(added) <= set(dt.file_uris() if now is None else now):
            return None  # paths written otherwise than this mapping assumes: do not guess
        return added, removed

    def added_partition_values(self, name: str, version: int | None, column: str) -> set | None:
        """The values of partition column `column` among the files added to `name` after
        `version` (every file when None or negative), from the log alone: which partitions
        (clusters) an increment touched, before any Spark job. None when `column` is not a
        partition column of the table (the values are then unknown without a scan)."""
        return self.changed_partition_values(name, version, column, removed=False)

    def changed_partition_values(self, name: str, version: int | None, column: str, removed: bool = True) -> set | None:
        """As `added_partition_values`, counting the files removed since `version` too."""
        dt = self.table(name)
        if column not in dt.metadata().partition_columns:
            return None
        if version is not None and version >= dt.version():
            return set()
        # The log keeps partition values as strings: typed columns take the snapshots' way.
        typed = not pa.types.is_string(pa.schema(dt.schema().to_arrow()).field(column).type)
        walked = None if typed or version is None or version < 0 else self._data_changes(name, dt, version)
        if walked is not None:
            return {v.get(column) for v in walked[0].values()} | (
                {v.get(column) for v in walked[1].values()} if removed else set())

        def files(t) -> dict[str, object]:
            a = pa.table(t.get_add_actions(flatten=True))
            return dict(zip(a.column("path").to_pylist(), a.column(f"partition.{column}").to_pylist()))

        now = files(dt)
        before = files(self.table(name, version)) if version is not None and version >= 0 else {}
        out = {v for p, v in now.items() if p not in before}
        if removed:
            out |= {v for p, v in before.items() if p not in now}
        return out

    def partition_values(self, name: str, column: str, version: int | None = None) -> set | None:
        """The values of partition column `column` among the files of `name` (at `version`),
        from the log; None when `column` is not a partition column."""
        dt = self.table(name, version)
        if column not in dt.metadata().partition_columns:
            return None
        return set(pa.table(dt.get_add_actions(flatten=True)).column(f"partition.{column}").to_pylist())

    def file_exists(self, uri: str) -> bool:
        """Whether a data file (a URI from `file_changes`) is still stored (not vacuumed).
        False when it cannot be told (an object store without credentials in the environment):
        callers treat the file as gone, which is the safe answer."""
        if uri.startswith("file:") or "://" not in uri:
            return os.path.exists(_decoded(uri))
        from pyarrow import fs as pafs

        try:
            filesystem, path = pafs.FileSystem.from_uri(uri)
            return filesystem.get_file_info(path).type != pafs.FileType.NotFound
        except (OSError, ValueError):
            return False

    def partition_max(self, name: str, column: str, version: int | None = None) -> dict[tuple, object]:
        """Per Delta partition (tuple of partition values, in partition-column order), the
        largest `column` value, from the files' statistics (no data read). A partition with
        a file lacking the statistic is left out: its maximum is unknown."""
        dt = self.table(name, version)
        parts = list(dt.metadata().partition_columns)
        actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
        out: dict[tuple, object] = {}
        unknown = set()
        for a in actions:
            key = tuple(a.get(f"partition.{c}") for c in parts)
            hi = a.get(f"max.{column}")
            if hi is None:
                if a.get("num_records"):
                    unknown.add(key)
                continue
            out[key] = hi if key not in out else max(out[key], hi)
        return {k: v for k, v in out.items() if k not in unknown}

    def rows_of_files(self, name: str, files: Mapping[str, Mapping]):
        """The rows of these data files of `name` (from `file_changes`: added ones, or
        removed ones not vacuumed yet), as a Spark DataFrame with the table's current schema."""
        return self._read_files(name, files, self.table(name))

    def added_since(self, name: str, version: int | None):
        """The rows of the files added to `name` after `version`, as a Spark DataFrame
        (the whole table when `version` is None or -1).

        Meant for append-only tables without a per-row version column (silver): a row is new
        when the file holding it is. A rewrite of old rows (`optimize`) makes them count as
        added again, so a consumer must treat the result as "possibly new" (idempotent use).
        """
        return self.rows_of_files(name, self.files_added_since(name, version))

    def replace_rows(
        self,
        name: str,
        df,
        keys,
        key_columns: Sequence[str],
        partition_by: Sequence[str] | None = None,
        positions: Positions | None = None,
        key_partitions: set[tuple] | None = None,
    ) -> int:
        """Replace every row whose `key_columns` match a row of `keys` (a Spark DataFrame)
        by the rows of `df`, in ONE delta-spark MERGE, with its positions.

        The MERGE's source is `df`'s rows (to insert) and the distinct keys (to delete):
        a target row matching a delete key is deleted, an insert row never matches and is
        inserted, so a key's old rows go and its new ones come in one commit. A key without
        rows in `df` is deleted. Every row of `df` must carry a key of `keys`. Keys are data
        (compared null-safely in the plan), never spliced into SQL, so untrusted strings are
        safe. Creates the table (partitioned by `partition_by`) when missing.
        `key_partitions`: the keys' values of the table's partition columns among
        `key_columns` (in partition-column order), when the caller knows them: the MERGE
        then reads only those partitions of the table. Returns the table version.
        """
        from delta.tables import DeltaTable as SparkDeltaTable
        from pyspark.sql import functions as F

        key_columns = list(key_columns)
        if not key_columns:
            raise LakeError("replace_rows needs at least one key column")
        missing = [c for c in key_columns if c not in df.columns or c not in keys.columns]
        if missing:
            raise LakeError(f"replace_rows on {name}: key column(s) {missing} missing from the rows or the keys")
        self.create(name, sparkio.arrow_schema(df.schema), partition_by)
        table_schema = self.schema(name)
        rows = _conform_df(df, table_schema).withColumn(_DELETE, F.lit(False))
        gone = _conform_df(keys.select(*[F.col(f"`{c}`") for c in key_columns]).distinct(), table_schema)
        source = rows.unionByName(gone.withColumn(_DELETE, F.lit(True)))
        on = F.col(f"s.{_DELETE}")
        for c in key_columns:
            on = on & F.col(f"t.`{c}`").eqNullSafe(F.col(f"s.`{c}`"))
        parts = [c for c in self.partition_by(name) if c in key_columns]
        if key_partitions is not None and parts:
            wanted = sorted({tuple(t) for t in key_partitions}, key=repr)
            if len(parts) == 1:
                on = on & F.col(f"t.`{parts[0]}`").isin([t[0] for t in wanted])
        # delta-spark's MERGE takes its idempotent-write ids from session settings: each
        # MERGE runs in a session of its own (same SparkContext and static settings, its own
        # runtime settings), so MERGEs of different tables run side by side.
        session = self.spark.newSession()
        txn = self._run(name, positions)
        if txn:
            session.conf.set("spark.databricks.delta.write.txnAppId", txn[0])
            session.conf.set("spark.databricks.delta.write.txnVersion", str(txn[1]))
        (SparkDeltaTable.forPath(session, self.spark_uri(name)).alias("t")
         .merge(source.alias("s"), on)
         .whenMatchedDelete()
         .whenNotMatchedInsert(condition=~F.col(f"s.{_DELETE}"),
                               values={f"`{f.name}`": F.col(f"s.`{f.name}`") for f in table_schema})
         .execute())
        return self.version(name)

    def register_views(self, spark=None, only: Iterable[str] | None = None) -> list[str]:
        """Register every table (with `only`, those of its names that are tables) as a
        Spark temp view by its name; returns the names."""
        spark = spark or self.spark
        if spark is not self._spark and self._spark is None:
            self._spark = spark
        names = self.tables()
        if only is not None:
            wanted = set(only)
            names = [n for n in names if n in wanted]
        for name in names:
            self.read(name).createOrReplaceTempView(name)
        return names

    # ----------------------------------------------------------------- maintenance
    def optimize(self, name: str) -> dict:
        """delta-spark's OPTIMIZE (bin-packing within each partition). It rewrites rows
        without changing them and says so (`dataChange: false`), so incremental readers
        skip it (txlog.data_changes). Returns its metrics (numFilesAdded, numFilesRemoved...)."""
        from delta.tables import DeltaTable as SparkDeltaTable

        row = SparkDeltaTable.forPath(self.spark, self.spark_uri(name)).optimize().executeCompaction().first()
        return row["metrics"].asDict(recursive=True) if row is not None else {}

    def vacuum(self, name: str, retain_hours: float | None = None, dry_run: bool = False) -> list[str]:
        """delta-spark's VACUUM: delete the files no version within the retention needs
        (default: the table's `delta.deletedFileRetentionDuration`, 7 days), and leftovers
        of writes that never committed. Below the table's retention delta-spark refuses
        (its `retentionDurationCheck`): time travel and readers still running need them.
        Returns the files deleted (with `dry_run`: the files it would delete)."""
        # The SQL form is the one that lists the files (DRY RUN); the path goes in as a quoted
        # identifier (backticks doubled), the hours as a number.
        target = "delta.`" + self.spark_uri(name).replace("`", "``") + "`"
        retain = "" if retain_hours is None else f" RETAIN {float(retain_hours)!r} HOURS"
        files = [r[0] for r in self.spark.sql(f"VACUUM {target}{retain} DRY RUN").collect()]
        if self.is_local:
            files = [_decoded(f) for f in files]  # as file_uris names them
        if files and not dry_run:
            self.spark.sql(f"VACUUM {target}{retain}").collect()
        return files

    def commit_rows(self, name: str, version: int | None = None) -> int:
        """Rows added by one commit (default: the latest), from its add actions' statistics:
        what a write put in the table, without a Spark pass to count it."""
        dt = self.table(name)
        v = dt.version() if version is None else version
        return txlog.rows_added(dt.to_pyarrow_dataset().filesystem, v)

    # ----------------------------------------------------------------- positions
    def _run(self, name: str, positions: Positions | None) -> tuple[str, int] | None:
        """Record `positions` in the ledger as a new run; the (writer, run) its commit carries."""
        if positions is None:
            return None
        current = self.table(name).transaction_version(positions.writer)
        if positions.partial and current is not None:
            merged = {**self.ledger.values(positions.writer, current), **positions.values}
            positions = Positions(positions.writer, merged)
        return positions.writer, self.ledger.record(positions, after=current)

    def positions(self, name: str, writer: str, version: int | None = None) -> dict[str, int]:
        """The positions `writer`'s last commit to `name` (as of `version`) carried; {} if none."""
        run = self.table(name, version).transaction_version(writer)
        return {} if run is None else self.ledger.values(writer, run)


def _compatible(have: pa.DataType, given: pa.DataType) -> bool:
    """Types that are the same column in the log (e.g. string vs large_string)."""
    pairs = [(pa.types.is_string, pa.types.is_large_string), (pa.types.is_binary, pa.types.is_large_binary)]
    for a, b in pairs:
        if (a(have) or b(have)) and (a(given) or b(given)):
            return True
    if pa.types.is_timestamp(have) and pa.types.is_timestamp(given):
        return (have.tz is None) == (given.tz is None)
    if pa.types.is_integer(have) and pa.types.is_integer(given):
        return given.bit_width <= have.bit_width
    return False


def _first_per_key(data: pa.Table, key: list[str]) -> pa.Table:
    if data.num_rows < 2:
        return data
    idx = pa.array(range(data.num_rows), pa.int64())
    keyed = data.select(key).append_column("__row", idx)
    first = keyed.group_by(key, use_threads=False).aggregate([("__row", "min")])["__row_min"]
    if len(first) == data.num_rows:
        return data
    return data.take(first.take(pc.sort_indices(first)))


def _anti_join(data: pa.Table, existing: pa.Table, key: list[str]) -> pa.Table:
    idx = pa.array(range(data.num_rows), pa.int64())
    keyed = data.select(key).append_column("__row", idx)
    existing = existing.select(key).cast(keyed.select(key).schema)
    kept = keyed.join(existing, keys=key, join_type="left anti", use_threads=False)["__row"]
    return data.take(kept.take(pc.sort_indices(kept))) if len(kept) != data.num_rows else data


# The MERGE source's marker column: true on a key to delete, false on a row to insert.
_DELETE = "__rebalance_audit_delete"


def _conform_df(df, table_schema: pa.Schema):
    """`df`'s columns in the table's order and types; columns it lacks are nulls."""
    from pyspark.sql import functions as F

    cols = []
    for f in table_schema:
        dtype = sparkio.spark_schema(pa.schema([f]))[0].dataType
        src = F.col(f"`{f.name}`") if f.name in df.columns else F.lit(None)
        cols.append(src.cast(dtype).alias(f.name))
    return df.select(*cols)


def _decoded(path: str) -> str:
    """A file path or URI without scheme and percent-encoding, for comparing the log's
    paths with the ones Spark reports (`file:/x`, `file:///x`, `/x` are the same file)."""
    p = unquote(path)
    if p.startswith("file:"):
        p = "/" + p[len("file:"):].lstrip("/")
    return p
