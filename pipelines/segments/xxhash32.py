"""XXH32 (the 32-bit xxHash), needed for the LZ4 frame format's checksums.

The LZ4 frame stores a one-byte header checksum (the second byte of XXH32 over the frame
descriptor) and optional block/content checksums. No dependency of the project provides
xxHash, and the inputs hashed on the hot path are a handful of header bytes, so a plain
implementation of the published algorithm (https://github.com/Cyan4973/xxHash,
doc/xxhash_spec.md) is enough. Block and content checksums are rare in Kafka (its LZ4
writer never sets them); when a frame carries them they are still verified.
"""
from __future__ import annotations

import struct

_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _M
    return (_rotl(acc, 13) * _P1) & _M


def xxh32(data: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """XXH32 of `data` with `seed`, as an unsigned 32-bit int."""
    data = memoryview(data).cast("B")
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M
        v2 = (seed + _P2) & _M
        v3 = seed & _M
        v4 = (seed - _P1) & _M
        stripes = n // 16
        lanes = struct.unpack_from(f"<{stripes * 4}I", data, 0)
        for k in range(0, stripes * 4, 4):
            v1 = _round(v1, lanes[k])
            v2 = _round(v2, lanes[k + 1])
            v3 = _round(v3, lanes[k + 2])
            v4 = _round(v4, lanes[k + 3])
        i = stripes * 16
        acc = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
    else:
        acc = (seed + _P5) & _M
    acc = (acc + n) & _M
    while i + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, i)
        acc = (_rotl((acc + lane * _P3) & _M, 17) * _P4) & _M
        i += 4
    while i < n:
        acc = (_rotl((acc + data[i] * _P5) & _M, 11) * _P1) & _M
        i += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M
    acc ^= acc >> 13
    acc = (acc * _P3) & _M
    acc ^= acc >> 16
    return acc
