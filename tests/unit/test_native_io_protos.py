"""The Spark-native text read and file write found in a pipeline proto
(translation/native_io_protos.py), as a job service client sends it."""

import apache_beam as beam
from apache_beam.portability import common_urns

from beam_spark_runner.translation.native_io_overrides import READ_TEXT_URN, WRITE_FILES_URN, decode_payload
from beam_spark_runner.translation.native_io_protos import native_io_in_proto


def _proto(tmp_path, **write_args):
    source = tmp_path / "in.txt"
    source.write_text("a b\n")
    p = beam.Pipeline()
    lines = p | "Read" >> beam.io.ReadFromText(str(tmp_path / "in*"))
    _ = lines | "Write" >> beam.io.WriteToText(str(tmp_path / "out"), **write_args)
    return p.to_runner_api()


def _leaves(proto, urn):
    return [t for t in proto.components.transforms.values() if t.spec.urn == urn]


def _reachable(proto):
    seen, todo = set(), list(proto.root_transform_ids)
    while todo:
        tid = todo.pop()
        seen.add(tid)
        todo.extend(proto.components.transforms[tid].subtransforms)
    return seen


def test_text_read_and_file_write_become_native(tmp_path):
    original = _proto(tmp_path)
    rewritten = native_io_in_proto(original)
    (read,) = _leaves(rewritten, READ_TEXT_URN)
    (write,) = _leaves(rewritten, WRITE_FILES_URN)
    assert not read.subtransforms and not write.subtransforms
    assert decode_payload(read.spec.payload).pattern == str(tmp_path / "in*")
    assert decode_payload(write.spec.payload).sink.file_path_prefix.get() == str(tmp_path / "out")
    assert not _leaves(rewritten, common_urns.deprecated_primitives.READ.urn)
    # What was inside them is gone from the components, nothing dangles.
    assert set(rewritten.components.transforms) == _reachable(rewritten)
    assert len(rewritten.components.transforms) < len(original.components.transforms)
    assert _leaves(original, common_urns.deprecated_primitives.READ.urn)  # the input is left alone


def test_fixed_shards_and_custom_record_handling_keep_beams_expansions(tmp_path):
    assert not _leaves(native_io_in_proto(_proto(tmp_path, num_shards=3)), WRITE_FILES_URN)
    p = beam.Pipeline()
    (tmp_path / "in.txt").write_text("a;b")
    _ = p | beam.io.ReadFromText(str(tmp_path / "in*"), delimiter=b";")
    assert not _leaves(native_io_in_proto(p.to_runner_api()), READ_TEXT_URN)
