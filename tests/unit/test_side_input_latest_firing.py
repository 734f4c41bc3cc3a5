"""What a side input's view shows of one key and window, from the panes
its values came in (worker/side_inputs.latest_firing)."""

from apache_beam.utils.windowed_value import PANE_INFO_UNKNOWN, PaneInfo, PaneInfoTiming

from beam_spark_runner.worker.side_inputs import latest_firing


def _pane(index, timing=PaneInfoTiming.EARLY, last=False):
    return PaneInfo(index == 0, last, timing, index, -1 if timing == PaneInfoTiming.EARLY else 0)


def test_one_value_per_firing_shows_the_latest_firings_value():
    fired = [(_pane(1), 6), (_pane(0), 3), (_pane(2, PaneInfoTiming.ON_TIME, last=True), 45)]
    assert latest_firing(fired) == [45]


def test_a_late_firing_is_the_latest():
    fired = [(_pane(0, PaneInfoTiming.ON_TIME), 10), (_pane(1, PaneInfoTiming.LATE), 12)]
    assert latest_firing(fired) == [12]


def test_one_value_is_shown_as_it_is():
    assert latest_firing([(_pane(0, PaneInfoTiming.ON_TIME), 7)]) == [7]


def test_values_of_several_keys_firings_are_all_shown():
    # Two keys' first panes share index 0: not one value per firing.
    fired = [(_pane(0), "a1"), (_pane(0), "b1"), (_pane(1), "a2")]
    assert latest_firing(fired) == ["a1", "b1", "a2"]


def test_values_of_no_grouping_are_all_shown():
    fired = [(PANE_INFO_UNKNOWN, 1), (PANE_INFO_UNKNOWN, 2)]
    assert latest_firing(fired) == [1, 2]
