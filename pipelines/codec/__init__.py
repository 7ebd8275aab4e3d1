"""Decoder and encoder for every record of Kafka's `__consumer_offsets` topic.

One table of record schemas (`schemas.RECORDS`, Kafka's message JSON as data) and one
interpreter (`compiler`) that reads and writes any of them.  See docs/codec.md.
"""
from .control import decode_control_record, encode_control_record
from .errors import CodecError
from .records import (RECORD_TYPES, decode_key, decode_record, decode_value, encode_key,
                      encode_value, layouts_of, value_versions)

__all__ = [
    "CodecError", "RECORD_TYPES", "decode_key", "decode_value", "decode_record", "encode_key",
    "encode_value", "decode_control_record", "encode_control_record", "layouts_of",
    "value_versions",
]
