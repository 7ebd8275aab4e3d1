"""Segment writer -> reader round trips over every format the reader claims to read, plus
format quirks checked against independent encoders (liblz4's frame decoder via cramjam,
hand-built xerial snappy framing, hand-assembled legacy wrappers)."""
from __future__ import annotations

import struct
import zlib

import cramjam
import pytest
from crc32c import crc32c

from pipelines.segments import (
    SegmentBatch,
    SegmentError,
    SegmentPathError,
    SegmentRecord,
    discover,
    iter_buffer_records,
    iter_paths,
    iter_segment_records,
)
from pipelines.segments import compression as comp
from pipelines.segments.writer import (
    SegmentWriter,
    WriteRecord,
    build_batch_v2,
    build_legacy_message,
    build_legacy_message_set,
)
from xxhash import xxh32_intdigest as xxh32

T0 = 1_795_337_253_311  # a CreateTime from the recordings era


def sample_records(n=12, big=False):
    recs = []
    for i in range(n):
        key = None if i == 5 else b"\x00\x01\x00\x07g-group" + bytes([i])
        value = None if i == 3 else bytes((i * 7 + j) % 251 for j in range(20 + 13 * i))
        recs.append(WriteRecord(key, value, T0 + i * 3))
    if big:  # over one 64 KiB LZ4 block and several 32 KiB xerial blocks
        recs.append(WriteRecord(b"big", bytes(range(256)) * 700 + b"tail", T0 + 100))
    return recs


def records_of(items):
    return [i for i in items if isinstance(i, SegmentRecord)]


def errors_of(items):
    return [i for i in items if isinstance(i, SegmentError)]


CASES = [(2, c) for c in ("none", "gzip", "snappy", "lz4", "zstd")] + [
    (m, c) for m in (0, 1) for c in ("none", "gzip", "snappy", "lz4")
]


@pytest.mark.parametrize("magic,codec", CASES)
@pytest.mark.parametrize("big", [False, True])
def test_round_trip_every_codec_and_magic(magic, codec, big):
    recs = sample_records(big=big)
    if magic == 2:
        data = build_batch_v2(recs, 1000, compression=codec)
    else:
        data = build_legacy_message_set(recs, 1000, magic=magic, compression=codec)
    items = list(iter_buffer_records(data, partition=4, broker="b1"))
    assert errors_of(items) == []
    got = records_of(items)
    assert [r.offset for r in got] == list(range(1000, 1000 + len(recs)))
    assert [r.key for r in got] == [r.key for r in recs]
    assert [r.value for r in got] == [r.value for r in recs]
    expected_ts = [-1] * len(recs) if magic == 0 else [r.timestamp for r in recs]
    assert [r.timestamp for r in got] == expected_ts
    for r in got:
        assert (r.magic, r.compression, r.partition, r.broker) == (magic, codec, 4, "b1")
        assert r.timestamp_type == ("NoTimestampType" if magic == 0 else "CreateTime")
    if codec != "none" or magic == 2:
        assert len({id(r.batch) for r in got}) == 1  # one batch / one wrapper
        assert got[0].base_offset == 1000


def test_v2_headers_and_log_append_time():
    recs = [WriteRecord(b"k", b"v", T0, headers=[("h1", b"x"), ("h2", None)]), WriteRecord(b"k2", b"v2", T0 + 5)]
    data = build_batch_v2(recs, 0, timestamp=T0 + 999, timestamp_type="LogAppendTime", compression="gzip")
    got = records_of(iter_buffer_records(data))
    assert got[0].headers == (("h1", b"x"), ("h2", None))
    assert got[1].headers == ()
    # LogAppendTime: every record takes the batch's MaxTimestamp (the append time).
    assert [r.timestamp for r in got] == [T0 + 999, T0 + 999]
    assert got[0].timestamp_type == "LogAppendTime"


def test_magic1_log_append_time_overrides_inner_timestamps():
    data = build_legacy_message_set(sample_records(3), 7, magic=1, timestamp=T0 + 50,
                                    compression="gzip", timestamp_type="LogAppendTime")
    got = records_of(iter_buffer_records(data))
    assert [r.timestamp for r in got] == [T0 + 50] * 3


def test_transactional_batch_facts_and_sequences():
    recs = sample_records(4)
    data = build_batch_v2(recs, 50, transactional=True, producer_id=4242, producer_epoch=3,
                          base_sequence=10, partition_leader_epoch=7, compression="zstd")
    got = records_of(iter_buffer_records(data))
    assert [r.sequence for r in got] == [10, 11, 12, 13]
    for r in got:
        assert r.transactional and not r.control
        assert (r.producer_id, r.producer_epoch, r.base_sequence, r.partition_leader_epoch) == (4242, 3, 10, 7)


def test_sequence_wraps_at_int32_max():
    # DefaultRecordBatch.incrementSequence: sequences wrap to 0 after Integer.MAX_VALUE.
    data = build_batch_v2(sample_records(3), 0, producer_id=1, producer_epoch=0, base_sequence=0x7FFFFFFF - 1)
    assert [r.sequence for r in records_of(iter_buffer_records(data))] == [0x7FFFFFFE, 0x7FFFFFFF, 0]


def test_control_batch_round_trip():
    from pipelines.codec import decode_control_record, encode_control_record

    from pipelines.segments.writer import build_control_batch

    for ctype in ("COMMIT", "ABORT"):
        data = build_control_batch(90, ctype, coordinator_epoch=5, producer_id=12, producer_epoch=2, timestamp=T0)
        items = list(iter_buffer_records(data, partition=2))
        assert errors_of(items) == []
        (rec,) = records_of(items)
        assert rec.control and rec.transactional and rec.offset == 90
        assert rec.control_type == ctype
        key, value = encode_control_record({"ABORT": 0, "COMMIT": 1}[ctype], 5)
        assert (rec.key, rec.value) == (key, value)
        assert rec.control_record == decode_control_record(key, value)


def test_empty_batch_is_reported_not_dropped():
    data = (
        build_batch_v2(sample_records(2), 0)
        + build_batch_v2([], 2, last_offset=9, producer_id=77, producer_epoch=1, base_sequence=40,
                         transactional=True, timestamp=T0)
        + build_batch_v2(sample_records(1), 10)
    )
    items = list(iter_buffer_records(data))
    assert [type(i) for i in items] == [SegmentRecord, SegmentRecord, SegmentBatch, SegmentRecord]
    empty = items[2]
    assert (empty.base_offset, empty.last_offset, empty.records_count) == (2, 9, 0)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence, empty.transactional) == (77, 1, 40, True)
    assert items[3].offset == 10


def test_delete_horizon_flag():
    horizon = T0 + 86_400_000
    recs = [WriteRecord(b"k", None, T0), WriteRecord(b"k2", b"v", T0 + 10)]
    data = build_batch_v2(recs, 0, delete_horizon_ms=horizon)
    assert struct.unpack_from(">h", data, 21)[0] & 0x40  # attribute bit 6 on the wire
    assert struct.unpack_from(">q", data, 27)[0] == horizon  # BaseTimestamp is the horizon
    got = records_of(iter_buffer_records(data))
    assert [r.delete_horizon_ms for r in got] == [horizon, horizon]
    assert [r.timestamp for r in got] == [T0, T0 + 10]  # record times survive via deltas
    plain = records_of(iter_buffer_records(build_batch_v2(recs, 0)))
    assert plain[0].delete_horizon_ms is None


def test_compacted_offset_gaps():
    recs = [WriteRecord(b"a", b"1", T0, offset=3), WriteRecord(b"b", b"2", T0, offset=8)]
    data = build_batch_v2(recs, 0, last_offset=11, compression="lz4")
    items = list(iter_buffer_records(data))
    assert [r.offset for r in records_of(items)] == [3, 8]
    assert (items[0].base_offset, items[0].batch.last_offset) == (0, 11)


# ------------------------------------------------------------------------------- xxh32 / LZ4

def test_xxh32_published_vectors():
    # Reference values of XXH32 with seed 0 (xxHash's own test suite / python-xxhash docs).
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_lz4_frames_agree_with_liblz4():
    data = bytes(range(256)) * 1000
    good = comp.lz4_frame_compress(data)
    assert bytes(cramjam.lz4.decompress(good)) == data  # liblz4 checks our header checksum
    # ...and our frame reader reads liblz4's own frames (block + content checksums on).
    assert comp.lz4_frame_decompress(bytes(cramjam.lz4.compress(data))) == data


def test_kafka_3160_broken_lz4_checksum_on_magic0():
    recs = sample_records(5)
    data = build_legacy_message_set(recs, 20, magic=0, compression="lz4")
    # The wrapper's value is an LZ4 frame whose HC byte was hashed over the magic too:
    # liblz4 rejects it, so this really is Kafka's pre-0.10 broken frame.
    frame = data[12 + 4 + 1 + 1 + 4 + 4 :]  # offset+size, crc, magic, attrs, key len (-1), value len
    assert frame[:4] == comp.LZ4_FRAME_MAGIC
    with pytest.raises(cramjam.DecompressionError):
        cramjam.lz4.decompress(frame)
    got = records_of(iter_buffer_records(data))
    assert [r.value for r in got] == [r.value for r in recs]
    assert [r.offset for r in got] == list(range(20, 25))

    # The same broken frame inside a magic-1 message is corrupt (Kafka >= 0.10 checks it).
    bad = build_legacy_message_set(recs, 20, magic=1, compression="lz4", lz4_broken_checksum=True)
    items = list(iter_buffer_records(bad))
    assert records_of(items) == []
    (err,) = errors_of(items)
    assert "header checksum" in err.error and (err.offset, err.last_offset) == (24, 24)

    # Magic 0 written with a correct checksum (newer clients) is read as well.
    fixed = build_legacy_message_set(recs, 20, magic=0, compression="lz4", lz4_broken_checksum=False)
    assert len(records_of(iter_buffer_records(fixed))) == 5


# ------------------------------------------------------------------------------------ snappy

def _rebatch_compressed(plain_batch: bytes, codec: int, payload: bytes) -> bytes:
    """Swap an uncompressed v2 batch's records for a compressed payload built by the test."""
    head = bytearray(plain_batch[:61])
    attrs = struct.unpack_from(">h", head, 21)[0] | codec
    struct.pack_into(">h", head, 21, attrs)
    after_crc = bytes(head[21:]) + payload
    struct.pack_into(">i", head, 8, 9 + len(after_crc))
    struct.pack_into(">I", head, 17, crc32c(after_crc))
    return bytes(head[:21]) + after_crc


@pytest.mark.parametrize("framing", ["xerial", "raw"])
def test_snappy_xerial_and_raw_payloads(framing):
    recs = sample_records(big=True)
    plain = build_batch_v2(recs, 0)
    body = plain[61:]
    if framing == "xerial":  # SnappyOutputStream: header, then int32-length-prefixed blocks
        payload = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        for i in range(0, len(body), 32768):
            block = bytes(cramjam.snappy.compress_raw(body[i : i + 32768]))
            payload += struct.pack(">i", len(block)) + block
        assert len(body) > 2 * 32768
    else:
        payload = bytes(cramjam.snappy.compress_raw(body))
    data = _rebatch_compressed(plain, 2, payload)
    got = records_of(iter_buffer_records(data))
    assert [r.value for r in got] == [r.value for r in recs]
    assert got[0].compression == "snappy"


# ------------------------------------------------------------------------- legacy wrappers

def test_magic1_wrapper_with_compacted_relative_offsets():
    # A magic-1 wrapper after compaction: inner relative offsets 0, 2, 5; the wrapper holds
    # the absolute offset of the last one (105), so absolute = 105 - 5 + relative.
    inner = b"".join(
        build_legacy_message(rel, b"k%d" % rel, b"v%d" % rel, magic=1, timestamp=T0 + rel) for rel in (0, 2, 5)
    )
    wrapper = build_legacy_message(105, None, bytes(cramjam.gzip.compress(inner)), magic=1,
                                   timestamp=T0 + 5, codec=1)
    got = records_of(iter_buffer_records(wrapper))
    assert [(r.offset, r.key, r.timestamp) for r in got] == [
        (100, b"k0", T0), (102, b"k2", T0 + 2), (105, b"k5", T0 + 5)
    ]


def test_magic0_wrapper_inner_offsets_are_absolute():
    inner = b"".join(build_legacy_message(off, b"k", b"v%d" % off, magic=0) for off in (40, 41, 44))
    wrapper = build_legacy_message(44, None, bytes(cramjam.gzip.compress(inner)), magic=0, codec=1)
    assert [r.offset for r in records_of(iter_buffer_records(wrapper))] == [40, 41, 44]


def test_legacy_crc_mismatch_is_an_error():
    data = bytearray(build_legacy_message_set(sample_records(2), 0, magic=1))
    data[-1] ^= 0xFF  # last byte of the second message's value
    items = list(iter_buffer_records(bytes(data)))
    assert [r.offset for r in records_of(items)] == [0]
    (err,) = errors_of(items)
    assert "CRC-32 mismatch" in err.error and err.offset == 1


# ------------------------------------------------------------------------ corruption / tails

def test_flipped_byte_costs_only_its_batch():
    a, b, c = (build_batch_v2(sample_records(3), base) for base in (0, 3, 6))
    data = bytearray(a + b + c)
    data[len(a) + 70] ^= 0x01
    items = list(iter_buffer_records(bytes(data), file="x.log", partition=1))
    assert [r.offset for r in records_of(items)] == [0, 1, 2, 6, 7, 8]
    (err,) = errors_of(items)
    assert "CRC-32C mismatch" in err.error
    assert (err.offset, err.last_offset, err.batch_position, err.partition) == (3, 5, len(a), 1)


def test_truncated_trailing_batch_is_an_error_record():
    a, b = build_batch_v2(sample_records(3), 0), build_batch_v2(sample_records(3), 3)
    for cut in (5, 30, len(b) - 1):
        items = list(iter_buffer_records(a + b[:cut]))
        assert [r.offset for r in records_of(items)] == [0, 1, 2]
        (err,) = errors_of(items)
        assert "truncated" in err.error and err.batch_position == len(a)
        if cut >= 12:
            assert err.offset == 3


def test_zero_padded_tail_of_a_preallocated_segment_is_not_data():
    items = list(iter_buffer_records(build_batch_v2(sample_records(2), 0) + bytes(4096)))
    assert len(items) == 2 and not errors_of(items)


def test_garbage_is_an_error_not_a_crash():
    items = list(iter_buffer_records(b"this is not a kafka segment at all, just text\n" * 3))
    (err,) = items
    assert isinstance(err, SegmentError) and "magic" in err.error


# ----------------------------------------------------------------------- files and folders

def test_segment_writer_rolls_and_reader_follows(tmp_path):
    with SegmentWriter(tmp_path / "b1", segment_bytes=2000) as w:
        for i in range(20):
            w.append(i % 2, sample_records(4), timestamp=T0, compression="gzip" if i % 3 else "none")
    part0 = sorted((tmp_path / "b1" / "__consumer_offsets-0").glob("*.log"))
    assert len(part0) > 1
    bases = [int(p.stem) for p in part0]
    assert bases[0] == 0 and bases == sorted(bases)
    # every segment starts with the batch whose base offset names it
    for p in part0:
        assert struct.unpack_from(">q", p.read_bytes(), 0)[0] == int(p.stem)
    recs = records_of(iter_paths([tmp_path / "b1"]))
    assert [(r.partition, r.offset) for r in recs] == [(p, o) for p in (0, 1) for o in range(40)]
    assert {r.broker for r in recs} == {"b1"}


def test_discovery_of_brokers_partitions_and_files(tmp_path):
    for label, part in (("broker-b/data", 1), ("broker-a", 0), ("broker-a", 2)):
        with SegmentWriter(tmp_path / "cluster" / label, start_offsets={part: 10}) as w:
            w.append(part, sample_records(2), timestamp=T0)
    # other topics and Kafka's leftovers are not __consumer_offsets segments
    (tmp_path / "cluster/broker-a/orders-0").mkdir()
    (tmp_path / "cluster/broker-a/orders-0/00000000000000000000.log").write_bytes(b"x")
    (tmp_path / "cluster/broker-a/__consumer_offsets-0/00000000000000000000.log.deleted").write_bytes(b"x")
    (tmp_path / "cluster/broker-a/__consumer_offsets-0/00000000000000000010.index").write_bytes(b"x")

    found = discover([tmp_path / "cluster"])
    assert [(f.broker, f.partition, f.base_offset) for f in found] == [
        ("broker-a", 0, 10), ("broker-a", 2, 10), ("broker-b/data", 1, 10)
    ]
    assert [f.broker for f in discover([tmp_path / "cluster/broker-b/data"])] == ["data"]
    seg = tmp_path / "cluster/broker-a/__consumer_offsets-2/00000000000000000010.log"
    (one,) = discover([seg, seg.parent])  # named twice, read once
    assert (one.broker, one.partition) == ("broker-a", 2)
    recs = records_of(iter_segment_records(seg))
    assert [(r.partition, r.offset) for r in recs] == [(2, 10), (2, 11)]

    with pytest.raises(SegmentPathError):
        discover([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SegmentPathError):
        discover([tmp_path / "empty"])


def _recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_bad_record_framing_under_a_valid_crc():
    # A writer bug rather than bit rot: the CRC is right but a record's length is not.
    recs = sample_records(4)
    batch = bytearray(build_batch_v2(recs, 30))
    first_len_at = 61
    assert batch[first_len_at] < 0x80  # a one-byte varint
    batch[first_len_at] += 2 * 3  # zig-zag: claim 3 more bytes than the record has
    items = list(iter_buffer_records(_recrc(batch)))
    (err,) = errors_of(items)
    assert "corrupt record" in err.error and (err.offset, err.last_offset) == (30, 33)
    assert records_of(items) == []


def test_unknown_codec_id_under_a_valid_crc():
    batch = bytearray(build_batch_v2(sample_records(2), 0))
    struct.pack_into(">h", batch, 21, 6)
    (err,) = list(iter_buffer_records(_recrc(batch)))
    assert isinstance(err, SegmentError) and "unknown compression codec id 6" in err.error


def test_corrupt_compressed_payload_under_a_valid_crc():
    batch = bytearray(build_batch_v2(sample_records(6), 0, compression="zstd"))
    batch[70:80] = b"\xaa" * 10
    items = list(iter_buffer_records(_recrc(batch) + build_batch_v2(sample_records(1), 6)))
    assert "cannot decompress batch" in errors_of(items)[0].error
    assert [r.offset for r in records_of(items)] == [6]


def test_hand_assembled_legacy_messages():
    # Built with struct/zlib straight from the LegacyRecord layout, not with our writer:
    # Offset int64, Size int32, Crc uint32 (CRC-32 of Magic..end), Magic int8,
    # Attributes int8, [Timestamp int64 (magic 1)], Key bytes(int32 len), Value bytes.
    def message(offset, magic, key, value, ts=None):
        body = struct.pack(">bb", magic, 0)
        if magic == 1:
            body += struct.pack(">q", ts)
        body += struct.pack(">i", len(key)) + key
        body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
        return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body

    data = message(0, 0, b"\x00\x00g", b"\x00\x00v0") + message(1, 1, b"\x00\x01k", None, ts=T0)
    a, b = records_of(iter_buffer_records(data))
    assert (a.offset, a.magic, a.timestamp, a.timestamp_type, a.key, a.value) == (
        0, 0, -1, "NoTimestampType", b"\x00\x00g", b"\x00\x00v0")
    assert (b.offset, b.magic, b.timestamp, b.timestamp_type, b.value) == (1, 1, T0, "CreateTime", None)
    # ...and our writer produces exactly these bytes.
    assert build_legacy_message(0, b"\x00\x00g", b"\x00\x00v0", magic=0) + build_legacy_message(
        1, b"\x00\x01k", None, magic=1, timestamp=T0) == data


@pytest.mark.parametrize("damage", ["length", "magic", "inserted-garbage"])
def test_broken_framing_resumes_at_the_next_batch(damage):
    a, b, c = (build_batch_v2(sample_records(3), base, compression="gzip") for base in (0, 3, 6))
    if damage == "length":
        b = bytearray(b)
        b[8] = 0x7F  # Length now runs far past the end of the file
        data = a + bytes(b) + c
    elif damage == "magic":
        b = bytearray(b)
        b[16] = 9
        data = a + bytes(b) + c
    else:
        data = a + b"\x02\x00garbage\x02 bytes from a bad disk\x02" * 5 + b + c
    items = list(iter_buffer_records(data))
    (err,) = errors_of(items)
    assert "skipped" in err.error and err.batch_position == len(a)
    if damage == "inserted-garbage":
        assert [r.offset for r in records_of(items)] == list(range(9))
        assert (err.offset, err.last_offset) == (None, None) and "no offsets are missing" in err.error
    else:
        assert [r.offset for r in records_of(items)] == [0, 1, 2, 6, 7, 8]
        assert (err.offset, err.last_offset) == (3, 5)  # the unreadable batch's offsets
