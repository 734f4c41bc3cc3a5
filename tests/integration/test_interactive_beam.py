"""Interactive Beam (`ib.collect`) on this runner, as a notebook user runs it:
`InteractiveRunner(underlying_runner=SparkRunner())`."""

import apache_beam as beam
import pytest
from apache_beam.runners.direct.direct_runner import DirectRunner
from apache_beam.runners.interactive import interactive_beam as ib
from apache_beam.runners.interactive import interactive_environment as ie
from apache_beam.runners.interactive.interactive_runner import InteractiveRunner
from apache_beam.transforms import window

from beam_spark_runner import SparkRunner


@pytest.fixture
def fresh_interactive_environment():
    ie.new_env()
    yield
    ie.current_env().cleanup()
    ie.new_env()


def _windowed_sums(underlying):
    p = beam.Pipeline(InteractiveRunner(underlying_runner=underlying))
    sums = (
        p
        | beam.Create([("a", 1, 1), ("a", 2, 2), ("b", 3, 12), ("b", 4, 15)])
        | beam.Map(lambda t: window.TimestampedValue((t[0], t[1]), t[2]))
        | beam.WindowInto(window.FixedWindows(10))
        | beam.CombinePerKey(sum)
    )
    frame = ib.collect(sums, include_window_info=True)
    assert len(frame) == 2, frame  # one sum per key and window
    return frame.sort_values(by=[0]).reset_index(drop=True)


def test_ib_collect_of_a_windowed_aggregation_matches_the_direct_runner(fresh_interactive_environment):
    """Before SparkRunner.is_interactive, the run was still going when
    Interactive Beam read its cache: an empty DataFrame and no error."""
    on_spark = _windowed_sums(SparkRunner())
    on_direct = _windowed_sums(DirectRunner())
    assert on_spark[[0, 1, "event_time", "windows"]].equals(on_direct[[0, 1, "event_time", "windows"]])
    for spark_pane, direct_pane in zip(on_spark["pane_info"], on_direct["pane_info"]):
        assert (spark_pane.timing, spark_pane.is_first, spark_pane.index) == (
            direct_pane.timing,
            direct_pane.is_first,
            direct_pane.index,
        )
        # The window's final pane: the model (and Beam's Java runners) mark
        # it last; Beam's Python runners never do (docs/windowing_and_triggers.md).
        assert spark_pane.is_last and not direct_pane.is_last


def test_a_failing_run_under_interactive_beam_raises_instead_of_returning_nothing(fresh_interactive_environment):
    from beam_spark_runner import PipelineExecutionError

    def fail(x):
        raise ValueError("bad element %r" % x)

    p = beam.Pipeline(InteractiveRunner(underlying_runner=SparkRunner()))
    broken = p | beam.Create([1, 2]) | "Fail" >> beam.Map(fail)
    with pytest.raises(PipelineExecutionError, match="bad element"):
        ib.collect(broken)
