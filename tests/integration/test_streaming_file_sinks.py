"""Beam's file writes on unbounded input run on SparkRunner in streaming
(translation/file_sink_overrides.py): `WriteToText` with Beam's
windowed shard names, `fileio.WriteToFiles` with its file naming, each
record in exactly one published file, nothing left staged; a Python worker
killed inside the sink's write changes nothing in what is published; a
window's later panes (and its empty final pane) never replace what its
earlier panes published. tests/conformance/test_file_sink_properties.py
searches the combinations."""

import glob
import os

import apache_beam as beam
import pytest
from apache_beam import coders
from apache_beam.io import fileio
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, window

from beam_spark_runner import SparkRunner
from beam_spark_runner.errors import UnsupportedPipelineError
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


def _lines(directory):
    return sorted(line for content in _files(directory).values() for line in content)


def _ticks():
    """Ticks 0-19, 40-59 and 80-99, a tenth of a second apart, all in one
    batch, then the end of input."""
    start = 1600000000
    ticks = [i for i in range(100) if i < 20 or 40 <= i < 60 or i >= 80]
    return (
        TestStream()
        .advance_watermark_to(start)
        .add_elements([window.TimestampedValue((i % 2, i), start + i / 10.0) for i in ticks])
        .advance_watermark_to_infinity()
    )


@pytest.mark.parametrize("windowfn", [window.FixedWindows(4), window.Sessions(1)], ids=["fixed", "sessions"])
@pytest.mark.parametrize("lateness", [0, 1])
def test_an_empty_final_pane_publishes_nothing_in_place_of_the_data(tmp_path, windowfn, lateness):
    """An early trigger that never fires and a window's final pane at expiry:
    each window's on-time pane holds its sums, and the empty final pane of
    the sink's own grouping must not replace their file."""
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming", "--allow_unsafe_triggers"]))
    (
        p
        | _ticks()
        | beam.WindowInto(
            windowfn,
            trigger=trigger.AfterWatermark(early=trigger.AfterCount(100000)),
            allowed_lateness=lateness,
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        )
        | beam.CombinePerKey(sum)
        | beam.MapTuple(lambda key, total: "%d,%d" % (key, total))
        | beam.io.WriteToText(str(tmp_path / "part"))
    )
    p.run().wait_until_finish()
    assert _lines(tmp_path) == ["0,490", "0,890", "0,90", "1,100", "1,500", "1,900"]


def test_each_pane_of_a_window_is_published_in_files_of_its_own(tmp_path):
    """Early panes in three batches and a late pane: Beam's names for a
    window's first pane, the pane index on the later ones, every line once."""
    stream = (
        TestStream()
        .advance_watermark_to(0)
        .add_elements([window.TimestampedValue("a%d" % i, i) for i in range(2)])
        .add_elements([window.TimestampedValue("b%d" % i, i) for i in range(2)])
        .add_elements([window.TimestampedValue("c0", 5)])
        .advance_watermark_to(30)
        .add_elements([window.TimestampedValue("late", 3)])
        .advance_watermark_to_infinity()
    )
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    (
        p
        | stream
        | beam.WindowInto(
            window.FixedWindows(10),
            trigger=trigger.AfterWatermark(early=trigger.AfterCount(1), late=trigger.AfterCount(1)),
            allowed_lateness=100,
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        )
        | beam.Map(lambda line: (None, line))
        | beam.GroupByKey()
        | beam.FlatMap(lambda kv: sorted(kv[1]))
        | beam.io.WriteToText(str(tmp_path / "part"))
    )
    p.run().wait_until_finish()
    files = _files(tmp_path)
    assert _lines(tmp_path) == sorted(["a0", "a1", "b0", "b1", "c0", "late"])
    assert "part-[0.0, 10.0)-00000-of-00001" in files
    assert len(files) >= 4 and all(
        name == "part-[0.0, 10.0)-00000-of-00001" or name.startswith("part-[0.0, 10.0)-00000-of-00001-pane-")
        for name in files
    )


def test_elements_at_the_end_of_the_global_window_are_written(tmp_path):
    """A GroupByKey in the global window emits at its max timestamp; fixed
    windows of the triggering frequency there end beyond what a datetime
    holds."""
    stream = (
        TestStream()
        .add_elements([("a", 1), ("b", 2)])
        .advance_processing_time(5)
        .add_elements([("a", 3)])
        .advance_processing_time(5)
        .advance_watermark_to_infinity()
    )
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    (
        p
        | stream
        | beam.WindowInto(
            window.GlobalWindows(),
            trigger=trigger.Repeatedly(trigger.AfterProcessingTime(1)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        )
        | beam.GroupByKey()
        | beam.MapTuple(lambda key, values: "%s:%s" % (key, sorted(values)))
        | beam.io.WriteToText(str(tmp_path / "part"), triggering_frequency=10)
    )
    p.run().wait_until_finish()
    # The final panes at the end of input are empty (the global window closes).
    assert _lines(tmp_path) == ["a:[1]", "a:[3]", "a:[]", "b:[2]", "b:[]"]


def test_a_shard_template_that_names_no_window_is_refused(tmp_path):
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    with pytest.raises(UnsupportedPipelineError, match=r"shard_name_template '-SSSSS' names neither"):
        (
            p
            | _stream()
            | beam.WindowInto(window.FixedWindows(10))
            | beam.io.WriteToText(str(tmp_path / "t"), shard_name_template="-SSSSS")
        )
