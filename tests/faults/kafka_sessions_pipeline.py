"""The pipeline test_cross_language_faults kills and restarts: Beam's
cross-language `ReadFromKafka` (KafkaIO's unbounded read, a Java
splittable DoFn run by Beam's Java SDK harness) -> each user's sessions
(10 s gap) in RETRACTING mode, a pane per score and per late score ->
`WriteToDatabase` into PostgreSQL keyed by (user, session_start): the
table always holds the current sessions. A message is JSON [user, score]
keyed by its user, its create time the score's event time (KafkaIO's
create-time watermark). Run as a script, in its own process group:

    python kafka_sessions_pipeline.py CHECKPOINT BOOTSTRAP_SERVERS TOPIC DATABASE_URL TABLE

It runs until killed.
"""

import json
import sys
import typing

import apache_beam as beam
from apache_beam.io.kafka import ReadFromKafka
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import trigger, window

import triggers
from beam_spark_runner.io import WriteToDatabase

GAP_S = 10


class SessionTotal(typing.NamedTuple):
    user: str
    session_start: int
    total: int


class _SessionRow(beam.DoFn):
    def process(self, element, w=beam.DoFn.WindowParam):
        user, total = element
        yield triggers.retractions.map_pane(lambda t: SessionTotal(user, int(w.start), t), total)


def _user_and_score(kv):
    user, score = json.loads(kv[1])
    return user, score


def main(checkpoint, servers, topic, database, table):
    options = PipelineOptions(
        ["--runner=beam_spark_runner.SparkRunner", "--streaming", "--checkpoint_dir=%s" % checkpoint]
    )
    with beam.Pipeline(options=options) as p:
        _ = (
            p
            | "Scores"
            >> ReadFromKafka(
                consumer_config={"bootstrap.servers": servers, "auto.offset.reset": "earliest"},
                topics=[topic],
                timestamp_policy=ReadFromKafka.create_time_policy,
            )
            | "ByUser" >> beam.Map(_user_and_score)
            | "Sessions"
            >> beam.WindowInto(
                window.Sessions(GAP_S),
                trigger=trigger.AfterWatermark(early=trigger.AfterCount(1), late=trigger.AfterCount(1)),
                accumulation_mode=triggers.RETRACTING,
                allowed_lateness=3600,
            )
            | "Sum" >> beam.CombinePerKey(sum)
            | "AsRows" >> beam.ParDo(_SessionRow()).with_output_types(SessionTotal)
            | "Table" >> WriteToDatabase(database, table, key_columns=["user", "session_start"])
        )


if __name__ == "__main__":
    main(*sys.argv[1:])
