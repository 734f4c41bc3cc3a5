"""The Java class of an object Beam Java serialized into a proto payload
(a `beam:coders:javasdk:0.1` coder, a Java DoFn), without a JVM.

Beam Java writes such payloads with `SerializableUtils`: Java's object
serialization inside Snappy's framed stream (xerial's `SnappyOutputStream`:
an 8-byte magic, two version ints, then chunks of a 4-byte big-endian length
and a raw Snappy block). The bytes differ from one construction of a
pipeline to the next (a SchemaCoder carries a random schema id), while the
class stays: so a checkpoint's record of a Java coder is its class, as the
record of a pickled Python coder is its class (streaming/plan_fingerprint.py).
"""

import struct
from typing import Optional

_FRAMED_MAGIC = b"\x82SNAPPY\x00"
_JAVA_STREAM = b"\xac\xed\x00\x05"
_TC_OBJECT, _TC_CLASSDESC = 0x73, 0x72


def top_class(payload: bytes) -> Optional[str]:
    """The class name of the object serialized in `payload`, or None when
    the payload is not a Snappy-framed Java serialization stream."""
    try:
        data = _unframe(payload)
    except (IndexError, ValueError, struct.error):
        return None
    if data is None or not data.startswith(_JAVA_STREAM) or len(data) < 8:
        return None
    if data[4] != _TC_OBJECT or data[5] != _TC_CLASSDESC:
        return None
    (length,) = struct.unpack(">H", data[6:8])
    name = data[8 : 8 + length]
    if len(name) != length:
        return None
    return name.decode("utf-8", errors="replace")


def _unframe(payload):
    if not payload.startswith(_FRAMED_MAGIC):
        return None
    pos, out = 16, bytearray()  # magic, version, compatible version
    while pos < len(payload):
        (length,) = struct.unpack(">i", payload[pos : pos + 4])
        pos += 4
        out += _raw_block(payload[pos : pos + length])
        pos += length
        if len(out) >= 4096:  # the class descriptor comes first: enough
            break
    return bytes(out)


def _raw_block(block):
    """Decompresses one raw Snappy block (literals and back-references)."""
    _, pos = _varint(block, 0)
    out = bytearray()
    while pos < len(block):
        tag = block[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:
            length = (tag >> 2) + 1
            if length > 60:
                extra = length - 60
                length = int.from_bytes(block[pos : pos + extra], "little") + 1
                pos += extra
            if pos + length > len(block):
                raise ValueError("truncated literal")
            out += block[pos : pos + length]
            pos += length
            continue
        if kind == 1:
            length = ((tag >> 2) & 7) + 4
            offset = ((tag >> 5) << 8) | block[pos]
            pos += 1
        elif kind == 2:
            length = (tag >> 2) + 1
            offset = int.from_bytes(block[pos : pos + 2], "little")
            pos += 2
        else:
            length = (tag >> 2) + 1
            offset = int.from_bytes(block[pos : pos + 4], "little")
            pos += 4
        if offset == 0 or offset > len(out):
            raise ValueError("bad back-reference")
        for _ in range(length):  # may overlap what it copies
            out.append(out[-offset])
    return out


def _varint(data, pos):
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
