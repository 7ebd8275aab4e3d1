"""The group a bronze record's key names, read in Spark from the key bytes (gold tells the
groups with aborted transactions read live by it): what the codec decodes from the same key."""
from __future__ import annotations

import pytest

from pipelines.codec.records import decode_key, encode_key
from pipelines.gold.transactions import aborted, key_group
from tests.spark_fixture import spark  # noqa: F401

pytestmark = pytest.mark.spark

# Group ids are anyone's strings: non-ASCII, empty, long.
GROUPS = ["orders", "grüße-✓-群组", "", "g" * 300]


def test_key_group_is_the_group_the_codec_reads(spark):  # noqa: F811
    keys = []
    for i, group in enumerate(GROUPS):
        for rtype in (0, 1):
            keys.append(encode_key(rtype, {"group": group, "topic": "in", "partition": i}))
        keys.append(encode_key(2, {"group": group}))
    df = spark.createDataFrame(list(enumerate(keys)), "offset long, key binary")
    got = {r["offset"]: r["g"] for r in df.select("offset", key_group(df).alias("g")).collect()}
    assert got == {offset: decode_key(key)[1]["group"] for offset, key in enumerate(keys)}
    assert "grüße-✓-群组" in got.values()


def test_other_record_types_name_no_group(spark):  # noqa: F811
    member = encode_key(5, {"groupId": "g", "memberId": "m"})
    df = spark.createDataFrame([(0, member), (1, b"\x00"), (2, None)], "offset long, key binary")
    assert [r["g"] for r in df.select(key_group(df).alias("g")).collect()] == [None, None, None]


def test_aborted_is_false_where_unknown(spark):  # noqa: F811
    flagged = spark.createDataFrame([(0, True), (1, False), (2, None)], "offset long, aborted boolean")
    assert [r["a"] for r in flagged.orderBy("offset").select(aborted(flagged).alias("a")).collect()] == [True, False, False]
    older = spark.createDataFrame([(0,)], "offset long")
    assert older.select(aborted(older).alias("a")).collect()[0]["a"] is False
