"""Per-cluster settings the records do not hold, with defaults.

A few timings that bound duplicate windows are configuration, not data:

* the classic client's `heartbeat.interval.ms` (a client setting, never sent to the broker);
* KIP-848's `group.consumer.session.timeout.ms` and `group.consumer.heartbeat.interval.ms`
  (broker settings: a consumer-protocol member's session lives on the broker, so
  `__consumer_offsets` carries neither).

Several clusters share one lake and each may be configured differently, so these are a
small table keyed by `cluster` (lake table `cluster_settings`), not global constants. A
cluster without a row, or a null column, falls back to `GoldParams`' default. The broker
settings come from the evidence where it is: `ingest logs` reads the configuration a broker
prints in server.log at start-up and fills what nobody has given (`runner.fill_cluster_settings`);
what a user gives (`run --broker-properties`, `--client-heartbeat-ms`) is kept over it.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipelines.spark import local_frame

from .model import GoldParams

TABLE = "cluster_settings"

# column → (GoldParams attribute holding its default, broker property it can be read from)
SETTINGS = {
    "classic_heartbeat_interval_ms": ("classic_heartbeat_interval_ms", None),
    "consumer_session_timeout_ms": ("consumer_session_timeout_ms", "group.consumer.session.timeout.ms"),
    "consumer_heartbeat_interval_ms": ("consumer_heartbeat_interval_ms", "group.consumer.heartbeat.interval.ms"),
}

SCHEMA = pa.schema([pa.field("cluster", pa.string())] + [pa.field(c, pa.int64()) for c in SETTINGS])


class SettingsError(ValueError):
    """A settings value that is not a positive whole number of milliseconds."""


def _ms(name: str, value) -> int | None:
    if value is None:
        return None
    try:
        n = int(str(value).strip())
    except ValueError:
        raise SettingsError(f"{name}: {value!r} is not a whole number of milliseconds") from None
    if n <= 0:
        raise SettingsError(f"{name}: {n} must be positive")
    return n


def from_broker_configs(cluster: str, configs: Mapping[str, str]) -> dict:
    """One `cluster_settings` row from broker settings as `key -> value` (the configuration a
    broker prints in server.log at start-up); settings it does not name are null."""
    row: dict[str, str | int | None] = {"cluster": cluster}
    for col, (_, prop) in SETTINGS.items():
        row[col] = _ms(prop, configs.get(prop)) if prop else None
    return row


def from_broker_properties(cluster: str, text: str, classic_heartbeat_interval_ms: int | None = None) -> dict:
    """One `cluster_settings` row from a broker's server.properties text.

    Only the `group.consumer.*` timings are read; anything else in the file is ignored.
    The classic heartbeat interval is a client setting and must be given separately.
    """
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!" or "=" not in line:
            continue
        k, v = line.split("=", 1)
        props[k.strip()] = v.strip()
    row = from_broker_configs(cluster, props)
    row["classic_heartbeat_interval_ms"] = _ms("classic_heartbeat_interval_ms", classic_heartbeat_interval_ms)
    return row


def rows_table(rows: Iterable[Mapping]) -> pa.Table:
    """`cluster_settings` rows (dicts; missing columns null) as an Arrow table, validated."""
    out = []
    for r in rows:
        if not r.get("cluster"):
            raise SettingsError(f"a cluster_settings row needs a cluster: {dict(r)!r}")
        out.append({"cluster": str(r["cluster"]), **{c: _ms(c, r.get(c)) for c in SETTINGS}})
    return pa.Table.from_pylist(out, schema=SCHEMA)


def to_spark(spark, rows: Iterable[Mapping]) -> DataFrame:
    """`cluster_settings` rows as a Spark DataFrame (validated; nulls stay null)."""
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("cluster", T.StringType())] + [T.StructField(c, T.LongType()) for c in SETTINGS])
    data = rows_table(rows).to_pylist()
    return local_frame(spark, [tuple(r[f.name] for f in schema) for r in data], schema)


def attach(df: DataFrame, settings: DataFrame | None, params: GoldParams) -> DataFrame:
    """`df` with one column per setting: the cluster's value, else the default."""
    if settings is not None:
        s = settings.select("cluster", *[F.col(c).cast("long").alias("_s_" + c) for c in SETTINGS]) \
            .dropDuplicates(["cluster"])
        df = df.join(F.broadcast(s), "cluster", "left")
    for c, (attr, _) in SETTINGS.items():
        default = F.lit(int(getattr(params, attr))).cast("long")
        value: Column = F.coalesce(F.col("_s_" + c), default) if settings is not None else default
        df = df.withColumn(c, value)
    return df.drop(*["_s_" + c for c in SETTINGS]) if settings is not None else df
