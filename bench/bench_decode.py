"""Benchmark: decode a large `__consumer_offsets` segment set (reader + codec).

Writes a segment set with the segment writer and the codec's encoders (OffsetCommit
records, value v3 as Kafka 3.x writes them, in commit-sized batches, plus a GroupMetadata
record every so often; several partitions; every Nth batch gzip), then times:

  reader           iter_paths over every file (batch parsing, CRC-32C, decompression)
  reader+codec     ... plus decode_record of every record
  reader+codec+json ... plus the JSON line `rebalance-audit decode` prints, record by record
  decode's path     what `decode` runs: whole batches of offset commits through the compiled
                    core (native/), the rest as above

and, as a calibration that makes the figures comparable across machines, `gzip -1 -c FILE
> /dev/null` over the same files (MB/s of segment bytes). Then, side by side on the same
files, the commands a user would run, output to /dev/null: `rebalance-audit decode` (one
process per CPU, and `--jobs 1`) and Kafka's own DumpLogSegments (`kafka-dump-log.sh
--offsets-decoder`, with kafka-run-class.sh's JVM options, from the set-up cache's JARs).

    .venv/bin/python bench/bench_decode.py                 # 3,000,000 records
    .venv/bin/python bench/bench_decode.py --records 200000 --gzip-every 2
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pipelines.codec import decode_record, encode_key, encode_value  # noqa: E402
from pipelines.segments import SegmentError, SegmentRecord, discover, iter_paths  # noqa: E402
from pipelines.segments.jsonlines import LineEncoder, _native  # noqa: E402
from pipelines.segments.writer import SegmentWriter, WriteRecord  # noqa: E402

T0 = 1_795_337_253_311
NATIVE = _native is not None  # decode's compiled core (native/) is built


def group_metadata(group: str, generation: int, members: int, topic: str, partitions: int) -> bytes:
    ms = []
    for m in range(members):
        mine = [p for p in range(partitions) if p % members == m]
        ms.append({
            "memberId": f"c{m}-{group}-{generation:08d}-6fe5d419-8cad-4de8-8646",
            "groupInstanceId": None, "clientId": f"c{m}", "clientHost": "/10.0.0.%d" % (m + 1),
            "rebalanceTimeout": 300000, "sessionTimeout": 10000,
            "subscription": {"_version": 3, "topics": [topic], "userData": "", "ownedPartitions": [],
                             "generationId": -1, "rackId": ""},
            "assignment": {"_version": 0, "assignedPartitions": [{"topic": topic, "partitions": mine}],
                           "userData": ""},
        })
    data = {"protocolType": "consumer", "generation": generation, "protocol": "range",
            "leader": ms[0]["memberId"], "currentStateTimestamp": T0, "members": ms}
    return encode_value(2, 3, data)


def write_set(root: Path, args) -> tuple[int, int]:
    """Returns (records written, batches written)."""
    groups = [f"bench-group-{g:03d}" for g in range(args.groups)]
    topic_partitions = 12
    keys = {
        (g, p): encode_key(1, {"group": g, "topic": "orders", "partition": p})
        for g in groups for p in range(topic_partitions)
    }
    written = batches = 0
    ts = T0
    offsets = dict.fromkeys(keys, 0)
    with SegmentWriter(root / "broker-1", segment_bytes=args.segment_bytes) as w:
        while written < args.records:
            g = groups[batches % len(groups)]
            partition = hash(g) % args.partitions
            ts += 7
            if batches % args.group_metadata_every == 0:
                gen = batches // args.group_metadata_every + 1
                recs = [WriteRecord(encode_key(2, {"group": g}), group_metadata(g, gen, 4, "orders", topic_partitions), ts)]
            else:
                recs = []
                for p in range(min(args.batch_size, args.records - written)):
                    k = (g, p % topic_partitions)
                    offsets[k] += 50
                    value = encode_value(1, 3, {"offset": offsets[k], "leaderEpoch": 0, "metadata": "",
                                                "commitTimestamp": ts})
                    recs.append(WriteRecord(keys[k], value, ts))
            codec = "gzip" if args.gzip_every and batches % args.gzip_every == 0 else "none"
            w.append(partition, recs, timestamp=ts, compression=codec)
            written += len(recs)
            batches += 1
    return written, batches


def timed(fn):
    """(result, wall seconds, CPU seconds of this process)."""
    t, c = time.perf_counter(), time.process_time()
    n = fn()
    return n, time.perf_counter() - t, time.process_time() - c


def run_reader(root):
    n = 0
    for item in iter_paths([root]):
        if isinstance(item, SegmentError):
            raise SystemExit(f"unexpected error: {item}")
        n += 1
    return n


def run_reader_codec(root):
    n = 0
    for item in iter_paths([root]):
        if isinstance(item, SegmentRecord):
            decode_record(item.key, item.value)
            n += 1
    return n


def run_reader_codec_json(root):
    """What `rebalance-audit decode` does per item, minus writing to stdout."""
    n = 0
    encode = LineEncoder().encode
    for item in iter_paths([root]):
        line, kind = encode(item)
        if kind == "error":
            raise SystemExit(f"unexpected error: {line}")
        n += 1
    return n


def run_decode_path(root):
    """What `rebalance-audit decode` does per segment file, minus writing to stdout: whole
    batches of offset commits through the compiled core where it is built."""
    n = 0
    for seg in discover([root]):
        for text, kind, count in LineEncoder().segment(seg.path, seg.partition, seg.broker):
            if kind == "error":
                raise SystemExit(f"unexpected error: {text}")
            n += count
    return n


def gzip_calibration(files) -> tuple[float, float]:
    """(wall, CPU) seconds of `gzip -1 -c FILE > /dev/null` over every file."""
    gzip = shutil.which("gzip")
    if gzip is None:
        raise SystemExit("gzip not found on PATH (needed for the calibration figure)")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    for f in files:
        with open(f, "rb") as src:
            subprocess.run([gzip, "-1", "-c"], stdin=src, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_command(argv, env=None) -> tuple[float, float]:
    """(wall, CPU of the children) seconds of one command, its stdout to /dev/null."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def dump_log_segments_argv(files) -> list[str]:
    """Kafka's own `kafka-dump-log.sh --offsets-decoder --files ...`, as kafka-run-class.sh runs
    it (its default heap and JVM performance options), from the set-up cache's Kafka JARs."""
    from testbed.kafka_home import find_java, find_kafka_libs

    libs = find_kafka_libs(install=True)
    classpath = os.pathsep.join(str(p) for p in sorted(libs.glob("*.jar")))
    return [find_java(), "-Xmx256M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
            "-Djava.awt.headless=true", "-Dlog4j2.configurationFile=" + (HERE.parent / "testbed" / "log4j2-tools.properties").as_uri(),
            "-cp", classpath, "org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder",
            "--files", ",".join(map(str, files))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=3_000_000, help="records to write (default 3,000,000)")
    ap.add_argument("--partitions", type=int, default=8, help="__consumer_offsets partitions (default 8)")
    ap.add_argument("--groups", type=int, default=40, help="consumer groups (default 40)")
    ap.add_argument("--batch-size", type=int, default=6, help="OffsetCommit records per batch (default 6)")
    ap.add_argument("--gzip-every", type=int, default=5, help="every Nth batch gzip, 0 = none (default 5)")
    ap.add_argument("--group-metadata-every", type=int, default=200,
                    help="one GroupMetadata batch every N batches (default 200)")
    ap.add_argument("--segment-bytes", type=int, default=104857600, help="segment roll size (default 100 MiB)")
    ap.add_argument("--dir", type=Path, help="where to write (default: a temporary folder, removed)")
    args = ap.parse_args()

    tmp = None
    root = args.dir
    if root is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench-decode-")
        root = Path(tmp.name)
    try:
        (written, batches), t_write, _ = timed(lambda: write_set(root, args))
        files = [s.path for s in discover([root])]
        size = sum(f.stat().st_size for f in files)
        print(f"wrote {written:,} records in {batches:,} batches, {len(files)} segment files, "
              f"{size / 1e6:.1f} MB in {t_write:.1f} s")
        # Wall-clock figures are what a user sees; CPU figures stay put on a busy machine.
        print(f"{'':<18} {'records/s':>12} {'MB/s':>8}   {'CPU rec/s':>12} {'CPU MB/s':>8}")
        for label, fn in (("reader", run_reader), ("reader+codec", run_reader_codec),
                          ("reader+codec+json", run_reader_codec_json),
                          ("decode's path" if NATIVE else "decode's path (no core)", run_decode_path)):
            n, wall, cpu = timed(lambda fn=fn: fn(root))
            print(f"{label:<18} {n / wall:>12,.0f} {size / wall / 1e6:>8.1f}   {n / cpu:>12,.0f} "
                  f"{size / cpu / 1e6:>8.1f}   ({n:,} items, {wall:.1f} s wall, {cpu:.1f} s CPU)")
        wall, cpu = gzip_calibration(files)
        print(f"{'gzip -1 (calib.)':<18} {'':>12} {size / wall / 1e6:>8.1f}   {'':>12} {size / cpu / 1e6:>8.1f}"
              f"   ({wall:.1f} s wall, {cpu:.1f} s CPU)")
        gzip_wall = wall
        # Side by side, the commands a user runs on the same files, output to /dev/null.
        cli = str(HERE.parent / ".venv" / "bin" / "rebalance-audit")
        print(f"\nside by side on the same {len(files)} files ({written:,} records), wall clock:")
        print(f"{'':<34} {'records/s':>12} {'s':>8} {'x gzip -1':>10}")
        figures = {}
        pure = {**os.environ, "REBALANCE_AUDIT_NO_NATIVE": "1"}
        for label, argv, env in (
                (f"rebalance-audit decode (--jobs {os.cpu_count()})", [cli, "decode", str(root)], None),
                ("rebalance-audit decode --jobs 1", [cli, "decode", "--jobs", "1", str(root)], None),
                ("  the same, pure Python", [cli, "decode", "--jobs", "1", str(root)], pure),
                ("Kafka DumpLogSegments", dump_log_segments_argv(files), None)):
            wall, _ = run_command(argv, env)
            figures[label] = wall
            print(f"{label:<34} {written / wall:>12,.0f} {wall:>8.1f} {wall / gzip_wall:>10.1f}")
        kafka = figures["Kafka DumpLogSegments"]
        for label, wall in figures.items():
            if label != "Kafka DumpLogSegments":
                print(f"{label}: {kafka / wall:.2f}x DumpLogSegments' records/s")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
