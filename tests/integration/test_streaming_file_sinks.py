"""Beam's file writes on unbounded input run on SparkRunner in streaming
(translation/streaming_sink_overrides.py): `WriteToText` with Beam's
windowed shard names, `fileio.WriteToFiles` with its file naming, each
record in exactly one published file, nothing left staged; a Python worker
killed inside the sink's write changes nothing in what is published."""

import glob
import os

import apache_beam as beam
from apache_beam import coders
from apache_beam.io import fileio
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import window

from beam_spark_runner import SparkRunner
from tests.faults.injection import CRASH, fired, inject_once


def _stream():
    return (
        TestStream()
        .advance_watermark_to(0)
        .add_elements([window.TimestampedValue("a%d" % i, i) for i in range(7)])
        .advance_watermark_to(12)
        .add_elements([window.TimestampedValue("b%d" % i, 12 + i) for i in range(5)])
        .advance_watermark_to_infinity()
    )


def _run(build):
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    build(p | _stream() | beam.WindowInto(window.FixedWindows(10)))
    p.run().wait_until_finish()


def _files(directory):
    """{name: lines} of the published files (staging directories excluded)."""
    return {
        os.path.basename(path): open(path).read().splitlines()
        for path in glob.glob(os.path.join(directory, "*"))
        if os.path.isfile(path)
    }


def test_write_to_text_publishes_beam_windowed_shards(tmp_path):
    _run(lambda lines: lines | beam.io.WriteToText(str(tmp_path / "text"), num_shards=2))
    files = _files(tmp_path)
    # Beam's default windowed template for unbounded writes: -W-SSSSS-of-NNNNN.
    assert sorted(files) == [
        "text-[0.0, 10.0)-00000-of-00002",
        "text-[0.0, 10.0)-00001-of-00002",
        "text-[10.0, 20.0)-00000-of-00002",
        "text-[10.0, 20.0)-00001-of-00002",
    ]
    first = files["text-[0.0, 10.0)-00000-of-00002"] + files["text-[0.0, 10.0)-00001-of-00002"]
    second = files["text-[10.0, 20.0)-00000-of-00002"] + files["text-[10.0, 20.0)-00001-of-00002"]
    assert sorted(first) == ["a%d" % i for i in range(7)]
    assert sorted(second) == ["b%d" % i for i in range(5)]
    assert not [d for d in os.listdir(tmp_path) if d.startswith("beam-temp-")]  # staging removed


def test_write_to_text_in_the_global_window_uses_triggering_frequency(tmp_path):
    def build(lines):
        (
            lines
            | "global" >> beam.WindowInto(window.GlobalWindows())
            | beam.io.WriteToText(str(tmp_path / "t"), triggering_frequency=10)
        )

    _run(build)
    files = _files(tmp_path)
    assert sorted(files) == ["t-[0.0, 10.0)-00000-of-00001", "t-[10.0, 20.0)-00000-of-00001"]
    assert files["t-[10.0, 20.0)-00000-of-00001"] == ["b%d" % i for i in range(5)]


def test_write_to_files_publishes_each_record_once_with_file_results(tmp_path):
    names = [
        "output-1970-01-01T00:00:00-1970-01-01T00:00:10-00000-of-00002",
        "output-1970-01-01T00:00:00-1970-01-01T00:00:10-00001-of-00002",
        "output-1970-01-01T00:00:10-1970-01-01T00:00:20-00000-of-00002",
        "output-1970-01-01T00:00:10-1970-01-01T00:00:20-00001-of-00002",
    ]

    def build(lines):
        written = lines | fileio.WriteToFiles(str(tmp_path), shards=2)
        results = written | beam.Map(lambda r: (r.file_name, r.shard_index, r.total_shards))
        assert_that(results, equal_to([(name, i % 2, 2) for i, name in enumerate(names)]))

    _run(build)
    files = _files(tmp_path)
    assert sorted(files) == names
    assert sorted(line for lines in files.values() for line in lines) == sorted(
        ["a%d" % i for i in range(7)] + ["b%d" % i for i in range(5)]
    )


class _CrashingCoder(coders.Coder):
    """UTF-8, but kills the Python worker the first time it encodes `at`:
    a crash inside the sink's write of staged files."""

    def __init__(self, marker, at):
        self.marker, self.at = marker, at

    def encode(self, value):
        if value == self.at:
            inject_once(self.marker, CRASH)
        return value.encode("utf-8")

    def decode(self, encoded):
        return encoded.decode("utf-8")

    def is_deterministic(self):
        return True


def test_a_worker_killed_inside_the_sink_write_publishes_each_record_once(tmp_path):
    out = tmp_path / "out"
    marker = str(tmp_path / "crashed")
    _run(lambda lines: lines | beam.io.WriteToText(str(out / "text"), coder=_CrashingCoder(marker, "a3")))
    assert fired(marker)
    lines = [line for content in _files(out).values() for line in content]
    assert sorted(lines) == sorted(["a%d" % i for i in range(7)] + ["b%d" % i for i in range(5)])
