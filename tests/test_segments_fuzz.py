"""The segment reader under damage: a fast slice of the fuzzing harness (bench/fuzz_segments.py,
whose long run is `bench/fuzz_segments.py N`) on recorded and written segments, and the
hardening cases it was built for, one test each."""
from __future__ import annotations

import importlib.util
import random
import struct
import sys
import time

import pytest

from conftest import RECORDINGS, REPO
from pipelines.segments import SegmentError, SegmentRecord, iter_buffer_records, iter_segment_records
from pipelines.segments.writer import WriteRecord, build_batch_v2

_spec = importlib.util.spec_from_file_location("fuzz_segments", REPO / "bench" / "fuzz_segments.py")
fz = importlib.util.module_from_spec(_spec)
sys.modules["fuzz_segments"] = fz  # dataclasses look their module up by name
_spec.loader.exec_module(fz)

T0 = fz.T0


@pytest.fixture(scope="module")
def seeds():
    return fz.writer_seeds() + fz.recorded_seeds(RECORDINGS)


def records_of(items):
    return [i for i in items if isinstance(i, SegmentRecord)]


def errors_of(items):
    return [i for i in items if isinstance(i, SegmentError)]


def batches(n: int, start: int = 0, **kw) -> list[bytes]:
    """n batches of 3 OffsetCommit records each, offsets from `start`."""
    return [build_batch_v2(fz._commits(3, start + 3 * i), start + 3 * i, timestamp=T0, **kw) for i in range(n)]


# ------------------------------------------------------------------------------ the fuzz slice

def test_fuzz_slice(seeds):
    assert len(seeds) >= 23, "the 20 non-empty recorded segments are seeds too"
    started = time.perf_counter()
    tally = fz.run(fz.Fuzz(seeds, seed=20), 4000, codec_share=0.25)
    report = fz.report(tally, time.perf_counter() - started)
    assert tally.inputs["reader"] == 3000 and tally.inputs["codec"] == 1000
    assert not tally.crashes, report
    assert not tally.hangs, report
    assert not tally.lost, report
    assert not tally.unreported, report
    assert not tally.broken, report
    assert not tally.native_differs, report
    assert sum(tally.reasons.values()) > 1000  # the mutations did hit


def test_truncation_at_and_inside_every_batch(seeds):
    rng = random.Random(5)
    picked = [s for s in seeds if s.name.startswith("writer/")] + [
        s for s in seeds if s.name.startswith(("transactional_commits/", "compressed_lz4/"))]
    cases = 0
    for seed in picked:
        last = min(len(seed.batches), 40) - 1
        data = seed.data[: seed.batches[last][1]]
        for pos, end, *_ in seed.batches[: last + 1]:
            for cut in {pos, pos + 1, pos + 16, pos + 17, min(end - 1, pos + 61), rng.randrange(pos, end), end - 1}:
                mut = fz.Mutation("truncation", data[:cut], cut, len(data), 0)
                outcome = fz.check_reader(seed, (0, last), mut)
                assert not (outcome.crash or outcome.lost or outcome.unreported or outcome.broken_invariant), (
                    seed.name, cut, outcome)
                cases += 1
    assert cases > 500


# ------------------------------------------------------------------- resynchronisation (item 1)

@pytest.mark.parametrize("how", ["longer", "shorter", "into the next"])
def test_a_forged_length_never_skips_intact_batches(how):
    a, b, c, d = batches(4)
    b = bytearray(b)
    length = struct.unpack_from(">i", b, 8)[0]
    forged = {"longer": length + len(c), "shorter": length - 20, "into the next": length + 30}[how]
    struct.pack_into(">i", b, 8, forged)
    items = list(iter_buffer_records(a + bytes(b) + c + d, segment_base=0))
    assert [r.offset for r in records_of(items)] == [0, 1, 2, 6, 7, 8, 9, 10, 11]
    (err,) = errors_of(items)
    assert err.batch_position == len(a) and (err.offset, err.last_offset) == (3, 5)
    assert f"next readable batch at byte {len(a) + len(b)}" in err.error


def test_a_crc_mismatch_resumes_at_the_next_batch_that_proves_itself():
    a, b, c = batches(3, compression="gzip")
    damaged = bytearray(b)
    damaged[-5] ^= 0x10
    items = list(iter_buffer_records(a + bytes(damaged) + c))
    assert [r.offset for r in records_of(items)] == [0, 1, 2, 6, 7, 8]
    (err,) = errors_of(items)
    assert err.error.startswith("CRC-32C mismatch") and (err.offset, err.last_offset) == (3, 5)


def test_legacy_messages_are_found_again_after_damage():
    from pipelines.segments.writer import build_legacy_message_set

    sets = [build_legacy_message_set(fz._commits(2, o), o, magic=1, timestamp=T0, compression=c)
            for o, c in ((0, "none"), (2, "gzip"), (4, "none"))]
    data = sets[0] + b"\x01garbage\x00\x00" * 7 + sets[1] + sets[2]
    items = list(iter_buffer_records(data))
    assert [r.offset for r in records_of(items)] == [0, 1, 2, 3, 4, 5]
    (err,) = errors_of(items)
    assert err.batch_position == len(sets[0]) and "skipped 70 bytes" in err.error


# ------------------------------------------------------------------------- offsets (item 2)

def test_a_flipped_high_bit_in_a_base_offset_is_reported(tmp_path):
    a, b, c = batches(3)
    b = bytearray(b)
    b[1] ^= 0x01  # bit 48 of BaseOffset: offsets near 2^48, outside the CRC
    folder = tmp_path / "__consumer_offsets-4"
    folder.mkdir()
    path = folder / "00000000000000000000.log"
    path.write_bytes(a + bytes(b) + c)
    items = list(iter_segment_records(path))
    assert [r.offset for r in records_of(items)] == [0, 1, 2, 6, 7, 8]
    (err,) = errors_of(items)
    assert "implausible offsets" in err.error and err.batch_position == len(a)
    assert (err.file, err.partition) == (str(path), 4)


def test_a_low_bit_flip_is_caught_by_its_neighbours():
    a, b, c, d = batches(4)
    b = bytearray(b)
    b[5] ^= 0x40  # +2^22: inside the segment's window, past every later batch
    items = list(iter_buffer_records(a + bytes(b) + c + d, segment_base=0))
    assert [r.offset for r in records_of(items)] == [0, 1, 2, 6, 7, 8, 9, 10, 11]
    (err,) = errors_of(items)
    assert "out of order with the 2 batches" in err.error


def test_no_batch_below_the_segment_base_offset_from_the_file_name(tmp_path):
    folder = tmp_path / "__consumer_offsets-0"
    folder.mkdir()
    path = folder / "00000000000000012345.log"
    path.write_bytes(b"".join(batches(2, start=12342)))
    items = list(iter_segment_records(path))
    assert [r.offset for r in records_of(items)] == [12345, 12346, 12347]
    (err,) = errors_of(items)
    assert "below the segment's base offset 12345" in err.error and err.batch_position == 0


def test_offsets_and_timestamps_beyond_int64_are_errors():
    raw = fz._raw_record(fz.INT64_MAX - T0 + 1, 0, b"k", b"v")
    late_ts = fz.forged_v2(3, raw, 1, 0)
    near_end = fz.forged_v2(fz.INT64_MAX - 1, fz._raw_record(0, 0, b"k", b"v"), 1, 5)
    a, c = batches(1)[0], batches(1, start=4)[0]
    items = list(iter_buffer_records(a + late_ts + c + near_end))
    assert [r.offset for r in records_of(items)] == [0, 1, 2, 4, 5, 6]
    ts_err, offset_err = errors_of(items)
    assert "overflows int64" in ts_err.error and ts_err.batch_position == len(a)
    assert "overflows int64" in offset_err.error and offset_err.last_offset is None


def test_int64_overflow_is_quarantined_and_the_rest_ingests(tmp_path):
    from pipelines.ingest.segments import ingest_segments
    from pipelines.lake import Lake

    bad = tmp_path / "b1" / "__consumer_offsets-0"
    good = tmp_path / "b1" / "__consumer_offsets-1"
    bad.mkdir(parents=True)
    good.mkdir(parents=True)
    overflow = fz.forged_v2(3, fz._raw_record(fz.INT64_MAX, 0, b"k", b"v"), 1, 0)
    (bad / "00000000000000000000.log").write_bytes(batches(1)[0] + overflow)
    (good / "00000000000000000000.log").write_bytes(b"".join(batches(2)))
    lake = Lake(tmp_path / "lake")
    summary = ingest_segments(lake, [tmp_path / "b1"], cluster="c")
    assert summary.inserted == 3 + 6
    (row,) = lake.read_arrow("quarantine").to_pylist()
    assert "overflows int64" in row["reason"]
    assert (row["partition"], row["byte_position"], row["offset"]) == (0, len(batches(1)[0]), 3)


# -------------------------------------------------------------------- decompression (item 3)

@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_decompression_stops_at_the_cap_the_header_allows(codec):
    from pipelines.segments import compression as comp

    bomb = fz.forged_v2(3, fz._raw_record(0, 0, b"k", bytes(1100 * 1024)), 1, 0, codec=comp.CODEC_IDS[codec])
    a, c = batches(1)[0], batches(1, start=4)[0]
    items = list(iter_buffer_records(a + bomb + c))
    assert [r.offset for r in records_of(items)] == [0, 1, 2, 4, 5, 6]
    (err,) = errors_of(items)
    assert "more than the cap of 1,048,576 bytes" in err.error and (err.offset, err.last_offset) == (3, 3)
    # Two records may hold that much: the cap follows the records count.
    fine = build_batch_v2([WriteRecord(b"k", bytes(1100 * 1024)), WriteRecord(b"k2", b"v")], 3, compression=codec)
    assert [r.offset for r in records_of(iter_buffer_records(a + fine))] == [0, 1, 2, 3, 4]


# ----------------------------------------------------------- records count, duplicates (item 4)

def test_records_count_zero_with_records_is_reported():
    a, c = batches(1)[0], batches(1, start=4)[0]
    hidden = fz.forged_v2(3, fz._raw_record(0, 0, b"k", b"v"), 0, 0)
    items = list(iter_buffer_records(a + hidden + c))
    assert [r.offset for r in records_of(items)] == [0, 1, 2, 4, 5, 6]
    (err,) = errors_of(items)
    assert "records count 0 but" in err.error and err.batch_position == len(a)


def test_records_count_other_than_the_records_is_reported():
    body = b"".join(fz._raw_record(0, d, b"k", b"v") for d in range(3))
    for count in (2, 4):
        (err,) = errors_of(iter_buffer_records(fz.forged_v2(0, body, count, 3)))
        assert "after the batch's last record" in err.error or "ends early" in err.error


def test_a_duplicated_batch_is_reported_not_read_twice():
    a, b, c = batches(3)
    items = list(iter_buffer_records(a + b + b + c))
    assert [r.offset for r in records_of(items)] == list(range(9))
    (err,) = errors_of(items)
    assert err.error.startswith("duplicate batch: offsets 3-5 again") and err.batch_position == len(a) + len(b)
