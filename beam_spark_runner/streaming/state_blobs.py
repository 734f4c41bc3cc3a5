"""How a key-group's state blob is stored in Spark's state store.

A keyed operator keeps one pickled blob per key-group (operators.py). For a
GroupByKey over many keys it reaches megabytes, and PySpark's state API
moves it through a socket every micro-batch: reading and writing a 1 MB blob
took ~40 ms per key-group and batch. The pickles are repetitive (the same
window keys, trigger state names and small tuples for every user key), so
zstd at its fastest level shrinks them ~60x in well under a millisecond.

Stored form: b"Z" + uncompressed length (8 bytes, little-endian) + zstd
frame. Anything else is taken as an uncompressed blob (a pickle starts with
b"\\x80"), so state written before compression was added still restores.
Beam-free: Spark loads this module in its helper processes.
"""

import struct

import pyarrow as pa

_MARK = b"Z"
_LENGTH = struct.Struct("<Q")
_CODEC = pa.Codec("zstd", compression_level=1)


def pack(blob):
    """The bytes to store for `blob` (bytes)."""
    return _MARK + _LENGTH.pack(len(blob)) + _CODEC.compress(blob, asbytes=True)


def unpack(stored):
    """The blob `pack` was given (or `stored` itself if it was not packed)."""
    if not stored.startswith(_MARK):
        return stored
    (length,) = _LENGTH.unpack_from(stored, 1)
    return _CODEC.decompress(stored[1 + _LENGTH.size :], decompressed_size=length, asbytes=True)
