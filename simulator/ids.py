"""Identifiers as a broker and its clients make them, drawn from the simulation's RNG."""
from __future__ import annotations

import base64
import random

from pipelines.assignors.javahash import coordinator_partition as partition_for  # noqa: F401  (re-exported)


def java_uuid(rng: random.Random) -> str:
    """A random (version 4) UUID in `UUID.toString()` form, as the classic coordinator
    appends to the client id to make a member id."""
    b = bytearray(rng.getrandbits(128).to_bytes(16, "big"))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def kafka_uuid(rng: random.Random) -> str:
    """A Kafka `Uuid.randomUuid().toString()`: 22 characters of base64url without padding
    (KIP-848 member ids on 3.9, topic ids)."""
    b = bytearray(rng.getrandbits(128).to_bytes(16, "big"))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return base64.urlsafe_b64encode(bytes(b)).decode("ascii").rstrip("=")


def classic_member_id(client_id: str, rng: random.Random, instance_id: str | None = None) -> str:
    """Classic member ids are `<client.id>-<UUID>`; static members use the instance id."""
    return f"{instance_id or client_id}-{java_uuid(rng)}"
