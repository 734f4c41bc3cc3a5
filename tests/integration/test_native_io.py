"""ReadFromText and bounded file writes run by Spark itself
(translation/native_io_overrides.py) give what Beam's own expansions give; settings
the runner does not reproduce keep Beam's expansion."""

import glob
import gzip
import os

import apache_beam as beam
import pytest
from apache_beam.io import textio
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from beam_spark_runner import SparkRunner
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_pipeline
from beam_spark_runner.translation import native_io_overrides

NATIVE_OR_BEAM = pytest.mark.parametrize("beam_io_only", [False, True], ids=["native", "beam"])


def _pipeline(beam_io_only):
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--beam_io_only"] if beam_io_only else []))


def _native_urns(build):
    p = beam.Pipeline()
    build(p)
    native_io_overrides.apply_native_io(p)
    plan = plan_pipeline(pipeline_proto_of(p))
    return sorted(stage.native.urn for stage in plan.stages if stage.native)


def _write_inputs(tmp_path):
    (tmp_path / "a.txt").write_bytes("one\r\ntwo\n\nθree".encode("utf-8"))
    (tmp_path / "b.txt").write_bytes(b"four\nfive\n")
    with gzip.open(tmp_path / "c.txt.gz", "wb") as f:
        f.write(b"six\nseven\n")
    return os.path.join(str(tmp_path), "*")


@NATIVE_OR_BEAM
def test_read_from_text_lines_of_every_file(tmp_path, beam_io_only):
    pattern = _write_inputs(tmp_path)
    with _pipeline(beam_io_only) as p:
        lines = p | textio.ReadFromText(pattern)
        assert_that(lines, equal_to(["one", "two", "", "θree", "four", "five", "six", "seven"]))


@pytest.mark.parametrize("relative", ["*.txt", "./*.txt"])
def test_a_relative_pattern_is_read_from_the_drivers_working_directory(tmp_path, monkeypatch, relative):
    """Spark's Python workers run in another working directory: the runner's
    read matched `*.txt` on the driver and read the relative paths in the
    workers, finding nothing (Beam's textio_test
    `test_read_from_text_file_pattern_with_dot_slash`). Beam's own expansion
    (`--beam_io_only`) still matches in the workers: not fixed yet."""
    beam_io_only = False
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    (tmp_path / "b.txt").write_text("three\n")
    monkeypatch.chdir(tmp_path)
    with _pipeline(beam_io_only) as p:
        assert_that(p | textio.ReadFromText(relative), equal_to(["one", "two", "three"]))


@NATIVE_OR_BEAM
def test_write_to_text_shards_header_and_returned_names(tmp_path, beam_io_only):
    prefix = str(tmp_path / "out" / "part")
    with _pipeline(beam_io_only) as p:
        names = (
            p
            | beam.Create(["x%d" % i for i in range(50)])
            | textio.WriteToText(prefix, file_name_suffix=".txt", header="H")
        )
        assert_that(names | beam.Map(os.path.basename), lambda got: _assert_shard_names(got, ".txt"))
    shards = sorted(glob.glob(prefix + "*"))
    assert shards and all(s.endswith("-of-%05d.txt" % len(shards)) for s in shards)
    lines = []
    for shard in shards:
        content = open(shard).read().splitlines()
        assert content[0] == "H"
        lines += content[1:]
    assert sorted(lines) == sorted("x%d" % i for i in range(50))
    assert not glob.glob(str(tmp_path / "out" / ".temp*")), "temporary files left behind"


def _assert_shard_names(names, suffix):
    assert names, "no file names returned"
    for name in names:
        assert name.startswith("part-") and name.endswith("-of-%05d%s" % (len(names), suffix)), names


@NATIVE_OR_BEAM
def test_empty_write_makes_one_empty_shard(tmp_path, beam_io_only):
    prefix = str(tmp_path / "empty")
    with _pipeline(beam_io_only) as p:
        _ = p | beam.Create([]) | beam.Map(str) | textio.WriteToText(prefix)
    assert [open(f).read() for f in glob.glob(prefix + "*")] == [""]


def test_wordcount_read_and_write_are_run_by_spark(tmp_path):
    pattern = _write_inputs(tmp_path)

    def build(p):
        _ = p | textio.ReadFromText(pattern) | textio.WriteToText(str(tmp_path / "o"))

    assert _native_urns(build) == sorted([native_io_overrides.READ_TEXT_URN, native_io_overrides.WRITE_FILES_URN])


def test_settings_the_runner_does_not_reproduce_keep_beams_expansion(tmp_path):
    pattern = _write_inputs(tmp_path)

    def build(p):
        _ = p | "Header" >> textio.ReadFromText(pattern, skip_header_lines=1)
        _ = p | "Delim" >> textio.ReadFromText(pattern, delimiter=b";")
        _ = p | "Names" >> textio.ReadFromTextWithFilename(pattern)
        _ = p | beam.Create(["a"]) | textio.WriteToText(str(tmp_path / "fixed"), num_shards=3)

    assert _native_urns(build) == []


def test_fixed_shard_count_and_header_skipping_still_work(tmp_path):
    pattern = _write_inputs(tmp_path)
    prefix = str(tmp_path / "fixed" / "f")
    with _pipeline(False) as p:
        lines = p | textio.ReadFromText(pattern, skip_header_lines=1)
        assert_that(lines, equal_to(["two", "", "θree", "five", "seven"]))
        _ = lines | textio.WriteToText(prefix, num_shards=3)
    assert len(glob.glob(prefix + "*")) == 3


def test_streaming_pipelines_are_not_rewritten(tmp_path):
    from apache_beam.testing.test_stream import TestStream

    pattern = _write_inputs(tmp_path)
    p = beam.Pipeline()
    _ = p | TestStream().add_elements(["a"])
    _ = p | textio.ReadFromText(pattern)
    native_io_overrides.apply_native_io(p)
    proto = pipeline_proto_of(p)
    assert not any(t.spec.urn in native_io_overrides.NATIVE_IO_URNS for t in proto.components.transforms.values())
