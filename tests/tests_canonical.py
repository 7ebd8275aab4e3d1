"""One canonical text per row, whichever engine read it: delta-spark's Rows (naive UTC
datetimes, bytearrays, dicts for maps) and delta-rs's pyarrow rows (aware datetimes, bytes,
maps as dicts) compare equal when they hold the same values."""
from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal


def _plain(v):
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return "0x" + bytes(v).hex()
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.isoformat()
    if isinstance(v, (dt.date, Decimal)):
        return str(v)
    if isinstance(v, float) and v != v:
        return "NaN"
    return v


def canonical(row: dict) -> str:
    return json.dumps(_plain(row), sort_keys=True)
