"""`rebalance-audit decode` through the real command line, on good and bad segments."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pipelines.codec import encode_key, encode_value
from pipelines.segments.writer import SegmentWriter, WriteRecord, build_batch_v2

from conftest import RECORDINGS, REPO

T0 = 1_795_337_253_311


# The installed console script, as users run it. (`python -m rebalance_audit.cli` would
# load cli.py twice, as __main__ and as a module, so its UsageError would not be caught.)
CLI = str(Path(sys.executable).parent / "rebalance-audit")


def decode(*args: str | Path):
    proc = subprocess.run(
        [CLI, "decode", *map(str, args)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    return proc.returncode, lines, proc.stderr


def commit(group: str, partition: int, offset: int) -> WriteRecord:
    key = encode_key(1, {"group": group, "topic": "orders", "partition": partition})
    value = encode_value(1, 3, {"offset": offset, "leaderEpoch": 0, "metadata": "", "commitTimestamp": T0})
    return WriteRecord(key, value, T0)


def good_batch(base: int, n: int = 3, **kw) -> bytes:
    return build_batch_v2([commit("g1", i, 100 + base + i) for i in range(n)], base, **kw)


def write_segment(tmp_path: Path, data: bytes, partition: int = 7) -> Path:
    folder = tmp_path / "broker-1" / f"__consumer_offsets-{partition}"
    folder.mkdir(parents=True)
    path = folder / "00000000000000000000.log"
    path.write_bytes(data)
    return path


def split(lines):
    errors = [l for l in lines if "error" in l]
    records = [l for l in lines if "error" not in l and "empty_batch" not in l]
    return records, errors


def test_recording_decodes_cleanly():
    rc, lines, err = decode(RECORDINGS / "transactional_commits" / "offsets_segments")
    records, errors = split(lines)
    assert rc == 0 and errors == []
    assert len(records) == 821  # 524 data records + 297 transaction markers
    markers = [r for r in records if r["control"]]
    assert {r["control_type"] for r in markers} == {"COMMIT", "ABORT"} and len(markers) == 297
    assert all(r["key"] is None and r["marker"]["coordinatorEpoch"] == 0 for r in markers)
    commits = [r for r in records if not r["control"] and r["key"]["type"] == 1]
    assert commits and all(r["transactional"] and r["producer_id"] >= 0 for r in commits)
    assert "821 records, 0 empty batches, 0 errors in 3 segment files" in err


def test_a_partition_folder_named_from_inside_it():
    """`decode .` in a partition folder (or through a symlink to one) reads that partition,
    as naming the folder does."""
    folder = RECORDINGS / "crash_autocommit" / "offsets_segments" / "__consumer_offsets-2"
    proc = subprocess.run([CLI, "decode", "."], cwd=folder, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rc, named, _ = decode(folder)
    here = [json.loads(line) for line in proc.stdout.splitlines()]
    # The same records; each names its file as it was given ("./…" against the full path).
    assert rc == 0 and named and [(folder / r.pop("file")).resolve() for r in here] == \
        [Path(r.pop("file")).resolve() for r in named] and here == named


def test_truncated_batch(tmp_path):
    data = good_batch(0) + good_batch(3)
    path = write_segment(tmp_path, data[: len(data) - 10])
    rc, lines, err = decode(path)
    records, errors = split(lines)
    assert rc == 0
    assert [r["offset"] for r in records] == [0, 1, 2]
    assert [r["value"]["data"]["offset"] for r in records] == [100, 101, 102]
    (e,) = errors
    assert "truncated batch" in e["error"]
    assert (e["partition"], e["offset"], e["file"]) == (7, 3, str(path))
    assert "1 errors" in err


def test_flipped_byte_crc_mismatch(tmp_path):
    a, b, c = good_batch(0), good_batch(3, compression="gzip"), good_batch(6)
    data = bytearray(a + b + c)
    data[len(a) + len(b) - 3] ^= 0x40  # inside the gzip payload of the middle batch
    path = write_segment(tmp_path, bytes(data))
    rc, lines, _ = decode(path)
    records, errors = split(lines)
    assert rc == 0
    assert [r["offset"] for r in records] == [0, 1, 2, 6, 7, 8]
    (e,) = errors
    assert "CRC-32C mismatch" in e["error"]
    assert (e["offset"], e["last_offset"], e["batch_position"]) == (3, 5, len(a))
    rc, _, _ = decode("--strict", path)
    assert rc == 1


def test_unknown_record_type_and_unknown_value_version(tmp_path):
    unknown_type = WriteRecord(b"\x00\x63" + b"\x00\x01g", b"\x00\x00\x00", T0)
    good_key = encode_key(1, {"group": "g1", "topic": "orders", "partition": 0})
    unknown_version = WriteRecord(good_key, b"\x00\x63" + bytes(30), T0)
    data = build_batch_v2([commit("g1", 0, 10), unknown_type, commit("g1", 1, 11), unknown_version,
                           commit("g1", 2, 12)], 0)
    path = write_segment(tmp_path, data, partition=3)
    rc, lines, err = decode(path)
    assert len(lines) == 5  # one line per record, none dropped
    records, errors = split(lines)
    assert [r["offset"] for r in records] == [0, 2, 4]
    assert [e["offset"] for e in errors] == [1, 3]
    assert all(e["partition"] == 3 and e["file"] == str(path) for e in errors)
    assert "99" in errors[0]["error"] and errors[0]["key_hex"] == "0063000167"
    assert "99" in errors[1]["error"] and errors[1]["value_hex"].startswith("0063")
    assert rc == 0 and "2 errors" in err
    rc, lines_strict, _ = decode("--strict", path)
    assert rc == 1 and lines_strict == lines  # --strict changes the exit code, not the output


def test_garbage_file(tmp_path):
    path = write_segment(tmp_path, b"GET / HTTP/1.1\r\nHost: example\r\n\r\n" * 20)
    rc, lines, err = decode(path)
    (e,) = lines
    assert "error" in e and "magic" in e["error"] and e["partition"] == 7
    assert rc == 0 and "1 errors" in err
    assert decode("--strict", path)[0] == 1


def test_good_files_still_decoded_next_to_a_bad_one(tmp_path):
    bad = write_segment(tmp_path, b"\xff" * 100, partition=1)
    with SegmentWriter(tmp_path / "broker-1") as w:
        w.append(2, [commit("g2", 0, 5)], timestamp=T0, compression="lz4")
        w.append_empty(2, 4, producer_id=9, producer_epoch=0, timestamp=T0)
        w.append(2, [commit("g2", 0, 6)], timestamp=T0)
    rc, lines, err = decode(tmp_path)
    records, errors = split(lines)
    assert [(r["broker"], r["partition"], r["offset"]) for r in records] == [("broker-1", 2, 0), ("broker-1", 2, 5)]
    (empty,) = [l for l in lines if "empty_batch" in l]
    assert (empty["base_offset"], empty["last_offset"], empty["producer_id"]) == (1, 4, 9)
    assert [e["file"] for e in errors] == [str(bad)]
    assert rc == 0 and "2 records, 1 empty batches, 1 errors in 2 segment files" in err


def test_usage_errors():
    rc, _, err = decode("/definitely/not/here")
    assert rc == 2 and "no such file" in err
    rc, _, err = decode("--kafka-version", "latest", str(RECORDINGS))
    assert rc == 2 and "--kafka-version" in err
    proc = subprocess.run([CLI, "decode", "--help"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--strict" in proc.stdout and "--kafka-version" in proc.stdout


def test_kafka_version_chooses_the_layout():
    # KIP-848 records of types 4/5/7/8 changed layout between 3.7 and 3.8 without a version
    # bump. The recording was written by 3.9: read as 3.9 (or by elimination) they decode,
    # read as 3.7 they are error lines -- with their bytes -- and nothing else is lost.
    seg = RECORDINGS / "kip848_consumer_protocol" / "offsets_segments"
    rc, lines_39, _ = decode("--kafka-version", "3.9", seg)
    assert rc == 0 and split(lines_39)[1] == []
    rc, lines_37, err = decode("--kafka-version", "3.7", seg)
    records, errors = split(lines_37)
    assert rc == 0 and len(lines_37) == len(lines_39) == 809
    assert len(errors) == 40 and "40 errors" in err
    assert all("3.7" in e["error"] and e["value_hex"] for e in errors)
    by_offset = {(l["partition"], l["offset"]): l for l in lines_39}
    assert {by_offset[(e["partition"], e["offset"])]["key"]["type"] for e in errors} == {4, 5, 7, 8}


def test_fast_line_encoder_equals_the_plain_json_of_every_recorded_item():
    from pipelines.segments import iter_paths
    from pipelines.segments.jsonlines import LineEncoder, to_json_dict

    enc = LineEncoder()
    count = 0
    for scenario in sorted(p for p in RECORDINGS.iterdir() if (p / "offsets_segments").is_dir()):
        for item in iter_paths([scenario / "offsets_segments"]):
            line, kind = enc.encode(item)
            obj, is_error = to_json_dict(item)
            assert line == json.dumps(obj, separators=(",", ":"))  # byte for byte the standard library's text
            assert kind == ("error" if is_error else "record")
            count += 1
    assert count == 6572 + 297  # README: data records of all runs, plus the markers


def test_json_text_is_the_standard_librarys_text_for_every_kind_of_value():
    from pipelines.segments.jsonlines import json_text

    values = ["plain", "caf\u00e9", "\u4e2d\u6587", "\U0001f600", "del\x7f", "nul\x00esc\x1b", "tab\t\n\r\b\f",
              "quote\"back\\slash/", "\u202egnp.exe", "lone \ud800 surrogate", 1 << 63, -(1 << 63) - 1, 1 << 64,
              2**31, -1, True, False, None, [], {}, {"nested": [{"a": "\u00e9", "b": [1, None]}]}]
    for v in values:
        assert json_text(v) == json.dumps(v, separators=(",", ":")), v
        assert json_text({"k": v, "l": [v, v]}) == json.dumps({"k": v, "l": [v, v]}, separators=(",", ":")), v


def test_several_processes_print_the_very_same_lines_in_the_same_order(tmp_path):
    # Every recording at once (several brokers' segment files, errors and markers among
    # them): --jobs 3 hands the files to three processes and must print what one does.
    bad = write_segment(tmp_path, good_batch(0) + b"\x00" * 40 + good_batch(3))
    runs = {}
    for jobs in ("1", "3"):
        proc = subprocess.run([CLI, "decode", "--jobs", jobs, str(RECORDINGS), str(bad)],
                              cwd=REPO, capture_output=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs[jobs] = proc
    assert runs["3"].stdout == runs["1"].stdout and runs["3"].stderr == runs["1"].stderr
    assert b'"error"' in runs["1"].stdout and len(runs["1"].stdout.splitlines()) > 6572
    proc = subprocess.run([CLI, "decode", "--jobs", "0", str(bad)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--jobs must be at least 1" in proc.stderr
