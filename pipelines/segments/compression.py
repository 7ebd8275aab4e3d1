"""Kafka's batch compression codecs, both directions.

Codec ids are the low three attribute bits of a record batch (v2) or legacy message:
0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (`CompressionType.java`). The byte formats are
what Kafka's Java producer and broker write:

* gzip  - a standard gzip stream (`GZIPOutputStream`).
* snappy - xerial `SnappyOutputStream` framing: an 8-byte magic `\\x82SNAPPY\\x00`, two
  big-endian int32 (version, min compatible version), then blocks of big-endian int32
  length + raw snappy. Some non-Java clients wrote plain raw snappy; both are read.
* lz4   - an LZ4 frame (`Lz4BlockOutputStream`: independent blocks, 64 KiB max block,
  no block or content checksum). Parsed here around cramjam's block decoder so the frame
  header checksum can be judged per message format: before Kafka 0.10 (KAFKA-3160) the
  HC byte was computed over the frame magic as well as the descriptor, and magic-0
  messages still carry that broken checksum.
* zstd  - a standard zstd frame (zstd-jni streaming output, so no content size).
"""
from __future__ import annotations

import struct
import zlib

import cramjam

from xxhash import xxh32_intdigest as xxh32

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: cid for cid, name in CODEC_NAMES.items()}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # SnappyOutputStream's default block size

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204 little-endian
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}


class CompressionError(ValueError):
    """A compressed payload that cannot be decompressed (corrupt, truncated, unknown codec)."""


def codec_id(name_or_id: str | int) -> int:
    """Accept a codec name (`"gzip"`) or id (`1`) and return the id."""
    if isinstance(name_or_id, int):
        if name_or_id not in CODEC_NAMES:
            raise ValueError(f"unknown compression codec id {name_or_id}")
        return name_or_id
    try:
        return CODEC_IDS[name_or_id.lower()]
    except KeyError:
        raise ValueError(
            f"unknown compression codec {name_or_id!r} (expected one of {', '.join(CODEC_IDS)})"
        ) from None


# ---------------------------------------------------------------------------- decompress

def decompress(codec: int, data, *, magic: int = 2, limit: int | None = None) -> bytes:
    """Decompress one batch's (or wrapper message's) payload.

    `magic` is the message format the payload came from; it only matters for LZ4, where
    magic 0 carries the pre-0.10 broken frame header checksum (KAFKA-3160). With `limit`,
    a payload that would decompress to more than `limit` bytes raises CompressionError
    without ever holding much more than `limit` bytes in memory (a decompression bomb).
    """
    try:
        if codec == GZIP:
            return gzip_decompress(data, limit)
        if codec == SNAPPY:
            return snappy_decompress(data, limit)
        if codec == LZ4:
            return lz4_frame_decompress(data, broken_header_checksum=(magic == 0), limit=limit)
        if codec == ZSTD:
            return zstd_decompress(data, limit)
    except CompressionError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError and others
        raise CompressionError(f"{CODEC_NAMES.get(codec, codec)} decompression failed: {exc}") from None
    if codec == NONE:
        return bytes(data)
    raise CompressionError(f"unknown compression codec id {codec}")


def _too_large(codec: str, limit: int) -> CompressionError:
    return CompressionError(f"{codec}: decompresses to more than the cap of {limit:,} bytes")


def gzip_decompress(data, limit: int | None = None) -> bytes:
    """A gzip stream, concatenated members included (Java's GZIPInputStream reads them;
    trailing bytes that are not another member are an error, as cramjam has it). zlib
    rather than cramjam: it stops at `max_length`, and is faster on small payloads."""
    out = []
    total = 0
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(wbits=31)
        chunk = d.decompress(rest, 0 if limit is None else limit - total + 1)
        total += len(chunk)
        if limit is not None and total > limit:
            raise _too_large("gzip", limit)
        out.append(chunk)
        if not d.eof:
            raise CompressionError("gzip: truncated stream")
        rest = d.unused_data
        if not rest:
            return b"".join(out)


def zstd_decompress(data, limit: int | None = None) -> bytes:
    """A zstd frame. Kafka's zstd-jni writes no content size, so with a `limit` the output
    buffer starts small and doubles up to the limit; cramjam stops (and raises) when a
    buffer is full, so a bomb costs at most the limit."""
    if limit is None:
        return bytes(cramjam.zstd.decompress(data))
    size = min(limit, max(64 * 1024, 8 * len(data)))
    while True:
        buf = bytearray(size)
        try:
            n = cramjam.zstd.decompress_into(data, buf)
        except Exception as exc:
            if "whole buffer" not in str(exc):  # cramjam's "failed to write whole buffer"
                raise
            if size >= limit:
                raise _too_large("zstd", limit) from None
            size = min(limit, 2 * size)
            continue
        return bytes(memoryview(buf)[:n])


def snappy_decompress(data, limit: int | None = None) -> bytes:
    """xerial-framed snappy (what the Java client writes) or plain raw snappy. Each raw
    snappy block states its uncompressed length up front: the limit is checked on that."""
    mv = memoryview(data)
    if bytes(mv[:8]) != XERIAL_MAGIC:
        _check_snappy_len(mv, 0, limit)
        return bytes(cramjam.snappy.decompress_raw(mv))
    if len(mv) < 16:
        raise CompressionError("snappy: truncated xerial header")
    pos = 16  # magic + version + compatible version
    out = []
    total = 0
    end = len(mv)
    while pos < end:
        if pos + 4 > end:
            raise CompressionError(f"snappy: truncated xerial block length at byte {pos}")
        (n,) = struct.unpack_from(">i", mv, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CompressionError(f"snappy: xerial block of {n} bytes overruns the payload at byte {pos}")
        block = mv[pos : pos + n]
        total += _check_snappy_len(block, total, limit)
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
        pos += n
    return b"".join(out)


def _check_snappy_len(block, total: int, limit: int | None) -> int:
    """The uncompressed length a raw snappy block declares, checked against the limit."""
    n = cramjam.snappy.decompress_raw_len(block)
    if limit is not None and total + n > limit:
        raise _too_large("snappy", limit)
    return n


def lz4_header_checksums(descriptor_with_magic) -> tuple[int, int]:
    """(correct, KAFKA-3160 broken) HC byte for a frame header given from its magic up to
    (excluding) the HC byte. The correct one hashes the descriptor only; Kafka < 0.10
    hashed the magic too."""
    d = bytes(descriptor_with_magic)
    return (xxh32(d[4:]) >> 8) & 0xFF, (xxh32(d) >> 8) & 0xFF


def lz4_frame_decompress(data, *, broken_header_checksum: bool = False, limit: int | None = None) -> bytes:
    """Decompress one LZ4 frame.

    With `broken_header_checksum` (magic-0 messages) the HC byte may be either Kafka's
    pre-0.10 value or the correct one: Kafka >= 0.10 reads such messages without
    checking it, and some clients wrote the correct value. Otherwise HC must be correct.
    With `limit`, blocks are decompressed only while the output stays within it.
    """
    mv = memoryview(data)
    n = len(mv)
    if n < 7 or bytes(mv[:4]) != LZ4_FRAME_MAGIC:
        raise CompressionError("lz4: not an LZ4 frame (bad magic)")
    flg, bd = mv[4], mv[5]
    if flg >> 6 != 1:
        raise CompressionError(f"lz4: unsupported frame version {flg >> 6}")
    if flg & 0x02 or bd & 0x8F:
        raise CompressionError("lz4: reserved frame descriptor bits set")
    block_max = _LZ4_BLOCK_SIZES.get((bd >> 4) & 0x07)
    if block_max is None:
        raise CompressionError(f"lz4: invalid block maximum size id {(bd >> 4) & 0x07}")
    independent = bool(flg & 0x20)
    block_checksum = bool(flg & 0x10)
    content_checksum = bool(flg & 0x04)
    pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if flg & 0x01:
        raise CompressionError("lz4: frames with a dictionary id are not supported")
    if pos >= n:
        raise CompressionError("lz4: truncated frame header")
    hc = mv[pos]
    correct, broken = lz4_header_checksums(mv[:pos])
    if hc != correct and not (broken_header_checksum and hc == broken):
        hint = " (a magic-0 message's KAFKA-3160 checksum in a newer format?)" if hc == broken else ""
        raise CompressionError(f"lz4: frame header checksum mismatch{hint}")
    pos += 1
    if not independent:
        # Linked blocks reference earlier blocks' output; Kafka never writes them, but
        # cramjam's frame decoder handles them once the header checksum is the real one.
        _check_linked_lz4_size(mv, pos, block_max, limit)
        header = bytearray(mv[:pos])
        header[-1] = correct
        return bytes(cramjam.lz4.decompress(bytes(header) + bytes(mv[pos:])))
    out = []
    total = 0
    while True:
        if pos + 4 > n:
            raise CompressionError("lz4: truncated frame (no end mark)")
        (size,) = struct.unpack_from("<I", mv, pos)
        pos += 4
        if size == 0:
            break
        stored = size & 0x80000000
        size &= 0x7FFFFFFF
        if size > block_max or pos + size > n:
            raise CompressionError(f"lz4: block of {size} bytes overruns the frame at byte {pos}")
        block = mv[pos : pos + size]
        pos += size
        if block_checksum:
            if pos + 4 > n:
                raise CompressionError("lz4: truncated block checksum")
            if struct.unpack_from("<I", mv, pos)[0] != xxh32(block):
                raise CompressionError("lz4: block checksum mismatch")
            pos += 4
        if stored:
            out.append(bytes(block))
        else:
            buf = bytearray(block_max)
            written = cramjam.lz4.decompress_block_into(block, buf)
            out.append(bytes(memoryview(buf)[:written]))
        total += len(out[-1])
        if limit is not None and total > limit:
            raise _too_large("lz4", limit)
    result = b"".join(out)
    if content_checksum:
        if pos + 4 > n:
            raise CompressionError("lz4: truncated content checksum")
        if struct.unpack_from("<I", mv, pos)[0] != xxh32(result):
            raise CompressionError("lz4: content checksum mismatch")
    return result


def _check_linked_lz4_size(mv, pos: int, block_max: int, limit: int | None) -> None:
    """Linked blocks go to cramjam's frame decoder whole, so bound their output first:
    each block yields at most the frame's block maximum."""
    if limit is None:
        return
    blocks = 0
    n = len(mv)
    while pos + 4 <= n:
        size = struct.unpack_from("<I", mv, pos)[0] & 0x7FFFFFFF
        if size == 0:
            break
        blocks += 1
        pos += 4 + size
    if blocks * block_max > limit:
        raise CompressionError(
            f"lz4: {blocks} linked blocks of up to {block_max:,} bytes may exceed the cap of {limit:,} bytes"
        )


# ------------------------------------------------------------------------------ compress

def compress(codec: int, data: bytes, *, magic: int = 2) -> bytes:
    """Compress a batch payload the way Kafka's Java producer would."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return snappy_xerial_compress(data)
    if codec == LZ4:
        return lz4_frame_compress(data, broken_header_checksum=(magic == 0))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec id {codec}")


def snappy_xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    for i in range(0, len(data), _XERIAL_BLOCK) or [0]:
        block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def lz4_frame_compress(data: bytes, *, broken_header_checksum: bool = False) -> bytes:
    """An LZ4 frame as Kafka writes it; `broken_header_checksum` reproduces KAFKA-3160
    (what Kafka < 0.10 wrote, and what magic-0 LZ4 messages carry)."""
    header = LZ4_FRAME_MAGIC + bytes([0x60, 0x40])  # v1 + independent blocks; 64 KiB blocks
    correct, broken = lz4_header_checksums(header)
    parts = [header, bytes([broken if broken_header_checksum else correct])]
    block_max = 64 * 1024
    for i in range(0, len(data), block_max):
        raw = data[i : i + block_max]
        packed = bytes(cramjam.lz4.compress_block(raw, store_size=False))
        if len(packed) >= len(raw):  # incompressible: store it, flagged by the high bit
            parts.append(struct.pack("<I", len(raw) | 0x80000000))
            parts.append(bytes(raw))
        else:
            parts.append(struct.pack("<I", len(packed)))
            parts.append(packed)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


def crc32_legacy(data) -> int:
    """CRC-32 (IEEE) as legacy messages use it."""
    return zlib.crc32(data) & 0xFFFFFFFF
