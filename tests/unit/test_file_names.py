"""Final names of the streaming file sinks (worker/file_names.py): Beam's
names for a window's first pane, a pane marker on later panes, and no
failure for windows near the end of time."""

import pytest
from apache_beam.io import fileio, textio
from apache_beam.transforms.window import GlobalWindow, IntervalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import PaneInfo, PaneInfoTiming

from beam_spark_runner.worker.file_names import (
    FileBasedSinkNames,
    ShardTemplate,
    destination_file_name,
    pane_marker,
    with_pane_marker,
)

TEMPLATES = ["-W-SSSSS-of-NNNNN", "-SSSSS-of-NNNNN-W", "-V-SSS-of-NN", "-WW-V-SSSS", "_S", ""]
WINDOWS = [IntervalWindow(0, 10), IntervalWindow(Timestamp(1600000000.5), Timestamp(1600000004)), GlobalWindow()]


def _sink(template, suffix=".txt"):
    return textio._TextSink("/out/part", file_name_suffix=suffix, shard_name_template=template)


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("w", WINDOWS, ids=str)
def test_a_windows_first_pane_gets_exactly_beams_names(template, w):
    sink = _sink(template)
    names = FileBasedSinkNames(sink)
    total = 1 if template == "" else 3
    for shard in range(total):
        # Beam's own (private) naming is the oracle here.
        assert names.final_name(shard, total, w, 0) == sink._get_final_name(shard, total, w)
    assert names.glob(total, w, 0) == sink._get_final_name_glob(total, w)


def test_later_panes_carry_the_pane_before_the_suffix():
    names = FileBasedSinkNames(_sink("-W-SSSSS-of-NNNNN"))
    w = IntervalWindow(0, 10)
    assert names.final_name(1, 2, w, 0) == "/out/part-[0.0, 10.0)-00001-of-00002.txt"
    assert names.final_name(1, 2, w, 3) == "/out/part-[0.0, 10.0)-00001-of-00002-pane-3.txt"
    # Beam's glob (its window letter left as it is), for pane 3's names.
    assert names.glob(2, w, 3) == "/out/part-W-*-of-00002-pane-3.txt"


def test_names_of_every_pane_of_a_window_differ():
    names = FileBasedSinkNames(_sink("-W-SSSSS-of-NNNNN"))
    w = IntervalWindow(0, 10)
    produced = [names.final_name(s, 2, w, p) for p in range(20) for s in range(2)]
    assert len(set(produced)) == len(produced)


def test_windows_at_the_end_of_time_are_named():
    """Elements at the global window's max timestamp, windowed into fixed
    windows of a triggering frequency: Beam's naming raises OverflowError."""
    end = GlobalWindow().max_timestamp()
    w = IntervalWindow(end - 10, end + 1)
    with pytest.raises(OverflowError):
        _sink("-W-SSSSS-of-NNNNN")._get_final_name(0, 1, w)
    assert FileBasedSinkNames(_sink("-W-SSSSS-of-NNNNN")).final_name(0, 1, w, 0) == (
        "/out/part-%s-00000-of-00001.txt" % w
    )
    utc = FileBasedSinkNames(_sink("-V-SSSSS")).final_name(0, 1, w, 0)
    assert utc.startswith("/out/part-[") and utc.endswith("]-00000.txt".replace("]", ")"))


@pytest.mark.parametrize(
    "template, names_windows",
    [("-W-SSSSS-of-NNNNN", True), ("-V-SSSSS", True), ("-U-SSSSS", True), ("-SSSSS-of-NNNNN", False), ("", False)],
)
def test_templates_that_name_no_window_are_told_apart(template, names_windows):
    assert ShardTemplate(template).names_windows is names_windows


def test_pane_marker_goes_before_the_last_extension():
    assert pane_marker(0) == ""
    assert with_pane_marker("/a.b/out-00000-of-00001.json", 2) == "/a.b/out-00000-of-00001-pane-2.json"
    assert with_pane_marker("/a.b/out-00000-of-00001", 2) == "/a.b/out-00000-of-00001-pane-2"
    assert with_pane_marker("/a/.hidden", 1) == "/a/.hidden-pane-1"
    assert with_pane_marker("out.txt", 0) == "out.txt"


def _pane(index):
    timing = PaneInfoTiming.EARLY if index < 2 else PaneInfoTiming.LATE
    return PaneInfo(index == 0, False, timing, index, -1 if timing == PaneInfoTiming.EARLY else index - 2)


def test_write_to_files_default_naming_gets_a_marker_on_later_panes():
    naming = fileio.default_file_naming("out", ".txt")
    w = IntervalWindow(0, 10)
    first = destination_file_name(naming, w, _pane(0), 0, 1, None)
    assert first == naming(w, _pane(0), 0, 1, "", None)
    later = [destination_file_name(naming, w, _pane(i), 0, 1, None) for i in range(1, 5)]
    assert later[0] == first[: -len(".txt")] + "-pane-1.txt"
    assert len({first, *later}) == 5


def test_a_naming_that_names_the_pane_keeps_its_names():
    def naming(w, pane, shard, total, compression, destination):
        return "out-%d-%d.txt" % (pane.index, shard)

    assert destination_file_name(naming, IntervalWindow(0, 10), _pane(3), 1, 2, None) == "out-3-1.txt"


def test_a_naming_that_only_tells_the_first_pane_apart_gets_markers_after_it():
    def naming(w, pane, shard, total, compression, destination):
        return "first.txt" if pane.is_first else "rest.txt"

    w = IntervalWindow(0, 10)
    names = [destination_file_name(naming, w, _pane(i), 0, 1, None) for i in range(4)]
    assert names == ["first.txt", "rest-pane-1.txt", "rest-pane-2.txt", "rest-pane-3.txt"]
