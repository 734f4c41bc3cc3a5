"""The pipeline test_cross_language_faults kills and restarts: Beam's
cross-language `ReadFromKafka` (KafkaIO's unbounded read, a Java
splittable DoFn run by Beam's Java SDK harness) -> each user's sessions
(10 s gap) in RETRACTING mode, a pane per score and per late score ->
`WriteToDatabase` into PostgreSQL keyed by (user, session_start): the
table always holds the current sessions. A message is JSON [user, score]
keyed by its user, its create time the score's event time (KafkaIO's
create-time watermark). KafkaIO commits the consumer group GROUP's offsets
when their checkpoint completed (`commit_offset_in_finalize`, whose commit
step requires stable input), and every message read is also written to
OFFSETS_TABLE as (partition, offset, run) keyed by (partition, offset),
`run` being the number in this driver's environment variable RUN_ENV
(its workers inherit it; the pipeline itself is the same in every run, as
resuming its checkpoint requires): the run whose micro-batch that read it
became a completed checkpoint. Run as a script, in its own process group:

    RUN=<n> python kafka_sessions_pipeline.py CHECKPOINT BOOTSTRAP_SERVERS TOPIC DATABASE_URL TABLE OFFSETS_TABLE GROUP

It runs until killed.
"""

import json
import os
import sys
import typing

import apache_beam as beam
from apache_beam.io.kafka import ReadFromKafka
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import trigger, window

import triggers
from beam_spark_runner.io import WriteToDatabase

GAP_S = 10
RUN_ENV = "SESSIONS_PIPELINE_RUN"


class SessionTotal(typing.NamedTuple):
    user: str
    session_start: int
    total: int


class _SessionRow(beam.DoFn):
    def process(self, element, w=beam.DoFn.WindowParam):
        user, total = element
        yield triggers.retractions.map_pane(lambda t: SessionTotal(user, int(w.start), t), total)


class ReadOffset(typing.NamedTuple):
    partition: int
    offset: int
    run: int


def _user_and_score(record):
    user, score = json.loads(record.value)
    return user, score


def _read_offset(record):
    return ReadOffset(record.partition, record.offset, int(os.environ[RUN_ENV]))


def main(checkpoint, servers, topic, database, table, offsets_table, group):
    options = PipelineOptions(
        ["--runner=beam_spark_runner.SparkRunner", "--streaming", "--checkpoint_dir=%s" % checkpoint]
    )
    with beam.Pipeline(options=options) as p:
        records = p | "Scores" >> ReadFromKafka(
            consumer_config={"bootstrap.servers": servers, "auto.offset.reset": "earliest", "group.id": group},
            topics=[topic],
            timestamp_policy=ReadFromKafka.create_time_policy,
            commit_offset_in_finalize=True,
            with_metadata=True,
        )
        _ = (
            records
            | "Offsets" >> beam.Map(_read_offset).with_output_types(ReadOffset)
            | "OffsetsTable" >> WriteToDatabase(database, offsets_table, key_columns=["partition", "offset"])
        )
        _ = (
            records
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
