"""The Java class of a payload Beam Java serialized (snappy-framed Java
serialization), read without a JVM (streaming/java_serialized.py)."""

import os
import struct

from beam_spark_runner.streaming.java_serialized import _raw_block, top_class

DATA = os.path.join(os.path.dirname(__file__), "..", "data")


def _framed(raw_block):
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw_block)) + raw_block


def _literal_block(data):
    """A raw Snappy block holding `data` as literals (each under 60 bytes)."""
    out = bytearray([len(data)]) if len(data) < 128 else bytearray([len(data) & 0x7F | 0x80, len(data) >> 7])
    for i in range(0, len(data), 50):
        part = data[i : i + 50]
        out.append((len(part) - 1) << 2)
        out += part
    return bytes(out)


def _java_object(class_name):
    name = class_name.encode()
    return b"\xac\xed\x00\x05\x73\x72" + struct.pack(">H", len(name)) + name + b"\x00" * 8


def test_the_class_of_a_schema_coder_beam_java_wrote():
    # Written by Beam Java 2.71.0's expansion of ReadFromKafka: its class
    # name crosses a Snappy back-reference.
    with open(os.path.join(DATA, "java_schema_coder.snappy"), "rb") as f:
        assert top_class(f.read()) == "org.apache.beam.sdk.schemas.SchemaCoder"


def test_the_class_of_a_literal_only_payload():
    payload = _framed(_literal_block(_java_object("org.example.SomeCoder")))
    assert top_class(payload) == "org.example.SomeCoder"


def test_back_references_repeat_what_they_point_at():
    # "abcd", then a copy of 8 bytes from 4 back (overlapping what it
    # writes), then one of 4 bytes from 6 back with a 2-byte offset.
    block = bytes([16, 3 << 2]) + b"abcd" + bytes([((8 - 4) << 2) | 1, 4]) + bytes([(3 << 2) | 2, 6, 0])
    assert bytes(_raw_block(block)) == b"abcdabcdabcd" + b"cdab"


def test_anything_else_has_no_class():
    assert top_class(b"") is None
    assert top_class(b"not a java payload") is None
    assert top_class(_framed(_literal_block(b"plain bytes, no java stream"))) is None
    assert top_class(b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\xff\xff") is None
