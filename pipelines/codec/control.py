"""Transaction markers: the control records the transaction coordinator appends to
`__consumer_offsets` (clients/.../record/ControlRecordType.java, EndTransactionMarker).

key = int16 version (0) + int16 type (ABORT=0, COMMIT=1; Raft types 2-6 never appear in
this topic); value (ABORT/COMMIT) = int16 version (0) + int32 coordinatorEpoch.  Like
Kafka, a newer marker version is read by its known prefix; extra bytes are kept.
"""
from __future__ import annotations

import struct

from .compiler import b64
from .errors import CodecError

CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")


def decode_control_record(key: bytes | None, value: bytes | None) -> dict:
    if key is None or len(key) < 4:
        raise CodecError(f"control record key needs 4 bytes (int16 version, int16 type), "
                         f"got {0 if key is None else len(key)}")
    key_version, ctype = _KEY.unpack_from(key, 0)
    out = {"type": CONTROL_TYPES.get(ctype, f"UNKNOWN({ctype})"), "controlType": ctype,
           "keyVersion": key_version}
    if len(key) > 4:
        out["_keyTrailing"] = b64(key[4:])
    if ctype not in (ABORT, COMMIT):
        out["value"] = None if value is None else b64(value)
        return out
    if value is None or len(value) < 6:
        raise CodecError(f"{out['type']} marker value needs 6 bytes (int16 version, int32 "
                         f"coordinatorEpoch), got {0 if value is None else len(value)}")
    value_version, epoch = _MARKER.unpack_from(value, 0)
    out["valueVersion"] = value_version
    out["coordinatorEpoch"] = epoch
    if len(value) > 6:
        out["_valueTrailing"] = b64(value[6:])
    return out


def encode_control_record(control_type: int, coordinator_epoch: int) -> tuple[bytes, bytes]:
    if control_type not in (ABORT, COMMIT):
        raise CodecError(f"control_type must be 0 (ABORT) or 1 (COMMIT), got {control_type!r}")
    try:
        return _KEY.pack(0, control_type), _MARKER.pack(0, coordinator_epoch)
    except struct.error:
        raise CodecError(f"coordinator_epoch {coordinator_epoch!r} does not fit int32") from None
