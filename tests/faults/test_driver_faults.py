"""The driver is SIGKILLed mid-run (its process group: the Spark JVM too)
and the same pipeline is started again from a fresh process in another
working directory, given only the checkpoint URI: every element's output is
there, and the counts kept in state show that no element was counted twice
or lost (a driver SIGKILLed mid-batch). The kill comes from the pipeline's
DoFn that requires stable input, right after it ran in its micro-batch:
the replayed batch draws new random numbers upstream, and the DoFn must
see the draws it saw before the kill. The run uses the 99% watermark
(--watermark_percentile=0.99: every key-group summarizes its holds and the
percentile lanes are journaled with each batch's times), which must not
change what is published. `tools/fault_matrix.py` runs the same with many
seeded kills in a row, on the exact watermark."""

from tests.faults.driver_cycles import SELF_KILL, run_with_kills

TICKS = 60  # 30 s of ticks, from the first run's first batch


def test_a_killed_driver_restarted_elsewhere_loses_and_doubles_nothing(tmp_path):
    outcome = run_with_kills(str(tmp_path), kill_delays=[SELF_KILL], ticks=TICKS, flags=["--watermark_percentile=0.99"])
    (written,) = outcome.files_at_kills
    assert 0 < written < TICKS, "killed too late to show a restart (%d of %d written)" % (written, TICKS)
    assert outcome.final_files == TICKS
    assert outcome.exact, outcome.problems
