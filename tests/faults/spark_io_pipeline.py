"""The pipeline test_spark_io_faults kills and restarts: a JSON directory
read with `ReadFromSpark`, or a Redis stream read with
`ReadFromRedisStreams` when SOURCE is `redis://...#STREAM`, or a NATS
JetStream stream read with `ReadFromNats` when it is `nats://...#STREAM`
(event time from the data every way), counted per user in
fixed 10-second windows, written with `WriteToSpark` as Parquet into the
directory OUT, or with `WriteToDatabase` into a table when OUT is
`URL#TABLE`. Run as a script, in its own process group (the test SIGKILLs
the group: this driver and its Spark JVM):

    python spark_io_pipeline.py SOURCE OUT CHECKPOINT

It runs until killed: the test appends files to SOURCE between kills, and
ends the last run once the published output is complete.
"""

import json
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window

from tests.window_totals import Total, WindowTotal

SCHEMA = "user string, score long, ts timestamp"
WINDOW_S = 10


def _user_and_score(message):
    """A NATS message's payload: JSON [user, score]."""
    user, score = json.loads(message.data)
    return user, score


def main(source, out, checkpoint):
    from beam_spark_runner.io import ReadFromNats, ReadFromRedisStreams, ReadFromSpark, WriteToDatabase, WriteToSpark

    options = PipelineOptions(
        ["--runner=beam_spark_runner.SparkRunner", "--streaming", "--checkpoint_dir=%s" % checkpoint]
    )
    p = beam.Pipeline(options=options)
    if source.startswith("redis://"):
        url, stream = source.split("#")
        scores = (
            p
            | "Read" >> ReadFromRedisStreams(url, stream, timestamp_field="ts", poll_interval=0.2)
            | beam.Map(lambda e: (e.fields["user"], int(e.fields["score"])))
        )
    elif source.startswith("nats://"):
        url, stream = source.split("#")
        scores = (
            p
            | "Read" >> ReadFromNats(url, stream, timestamp_header="ts", poll_interval=0.2)
            | beam.Map(_user_and_score)
        )
    else:
        scores = (
            p
            | "Read" >> ReadFromSpark(format="json", path=source, schema=SCHEMA, timestamp_column="ts")
            | beam.Map(lambda r: (r.user, r.score))
        )
    _ = (
        scores
        | beam.WindowInto(window.FixedWindows(WINDOW_S))
        | beam.CombinePerKey(sum)
        | beam.ParDo(WindowTotal()).with_output_types(Total)
        | "Write" >> (WriteToDatabase(*out.split("#")) if "#" in out else WriteToSpark(format="parquet", path=out))
    )
    p.run().wait_until_finish()


if __name__ == "__main__":
    main(*sys.argv[1:4])
