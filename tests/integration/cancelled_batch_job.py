"""A streaming run cancelled while a micro-batch runs, for
tests/integration/test_console.py.

    python -m tests.integration.cancelled_batch_job MARKER

A DoFn of the first micro-batch writes MARKER, then sleeps far longer than
the test waits; once MARKER exists the driver cancels the run, so the
stop interrupts the batch's Spark job. Prints the run's final state.
"""

import os
import sys
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.periodicsequence import PeriodicImpulse

# Far longer than the run lasts: the batch only ends by the cancel.
_SLEEP_S = 600


class _SleepInTheBatch(beam.DoFn):
    def __init__(self, marker):
        self._marker = marker

    def process(self, element):
        with open(self._marker, "a") as f:
            f.write("%s\n" % element)
        time.sleep(_SLEEP_S)
        yield element


def main(marker):
    start = time.time()
    p = beam.Pipeline(
        options=PipelineOptions(
            ["--runner=beam_spark_runner.SparkRunner", "--streaming", "--spark_conf=spark.ui.port=0"]
        )
    )
    (
        p
        | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + 600, fire_interval=1)
        | beam.Map(int)
        | beam.Reshuffle()
        | beam.ParDo(_SleepInTheBatch(marker))
    )
    result = p.run()
    deadline = time.time() + 300
    while not os.path.exists(marker) and time.time() < deadline:
        time.sleep(0.2)
    if not os.path.exists(marker):
        sys.exit("no micro-batch reached the sleeping DoFn within 300 s")
    time.sleep(1)  # the batch's job is surely waiting on the DoFn now
    result.cancel()
    print("final state: %s" % result.wait_until_finish(), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
