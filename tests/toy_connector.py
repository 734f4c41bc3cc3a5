"""A connector the runner does not ship, written only against the I/O
contract: `WriteLines(directory)` writes each element of a streaming
pipeline as a JSON line into files under `directory`, exactly once, and
`ReadLines(path)` reads the JSON lines appended to one file.

`ReadLines` follows the source side of the contract (io/broker_reads.py's
`PositionRangeRead`): a line's position is its index in the file, the
runner keeps the range still to read in its checkpoint, the watermark is
the newest event time read, and nothing needs acknowledging.

It registers its URN with planning (translation/runner_io.py) and its
micro-batch staging with the execution (execution/runner_io_glue.py);
nothing in the runner names it. Per micro-batch the staging writes the
sink's rows to `<directory>/_staging/<run>-<batch>.jsonl` (a replay of the
batch overwrites it) and hands over a `LinesCommit` (worker/sink_commits.py),
which the checkpoint coordinator runs once the batch is a completed
checkpoint: it renames the staged file to its final name, idempotently."""

import dataclasses
import datetime
import json
import os
import pickle
import time

import apache_beam as beam
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner.execution import runner_io_glue
from beam_spark_runner.execution.sink_rows import query_values
from beam_spark_runner.io.broker_reads import PositionRangeRead, Read, read_partitions, rules_of
from beam_spark_runner.translation import runner_io
from beam_spark_runner.worker import context
from beam_spark_runner.worker.sink_commits import SinkCommit

WRITE_LINES_URN = "beam_spark_runner_tests:transform:write_lines:v1"
STAGING = "_staging"


@dataclasses.dataclass(frozen=True)
class LinesConfig:
    directory: str
    label: str = "WriteLines"


class WriteLines(beam.PTransform):
    """Each element (JSON-serializable) as one line, published once."""

    def __init__(self, directory):
        super().__init__()
        self._directory = directory

    def expand(self, pcoll):
        return pcoll | runner_io.SinkPrimitive(WRITE_LINES_URN, pickle.dumps(LinesConfig(self._directory, self.label)))


@dataclasses.dataclass(frozen=True)
class LinesCommit(SinkCommit):
    """Publishes one batch's staged lines: the staged file renamed to its
    final name. Run again after a complete run, it finds the final file and
    nothing staged: done. Neither there: the lines are lost, an error."""

    label: str
    staged: str
    final: str

    def commit(self, unused_context):
        if os.path.exists(self.staged):
            os.replace(self.staged, self.final)
        elif not os.path.exists(self.final):
            raise RuntimeError("%s: neither %s nor %s exists" % (self.label, self.staged, self.final))


class LinesStaging(runner_io_glue.MicroBatchSinkStaging):
    def __init__(self, query):
        self._query = query

    def prepare(self, sinks):
        for sink in sinks:
            os.makedirs(os.path.join(pickle.loads(sink.payload).directory, STAGING), exist_ok=True)

    def stage(self, selected, sink, batch_id):
        config = pickle.loads(sink.payload)
        impl = context.coder_impl(self._query.components, sink.coder_id)
        table = selected.select("kind", "payload").toArrow()
        lines = [json.dumps(list(v)) + "\n" for batch in table.to_batches() for v in query_values(batch, impl)]
        name = "%s-%08d.jsonl" % (self._query.run_id, batch_id)
        staged = os.path.join(config.directory, STAGING, name)
        with open(staged + ".tmp", "w") as f:
            f.writelines(lines)
        os.replace(staged + ".tmp", staged)  # a replay of the batch overwrites its attempt
        return LinesCommit(config.label, staged, os.path.join(config.directory, name))


runner_io.register(
    runner_io.RunnerIO(WRITE_LINES_URN, runner_io.IORole.SINK, lambda p: pickle.loads(p).label, batch=False)
)
runner_io_glue.register_micro_batch_staging(WRITE_LINES_URN, LinesStaging)


def published(directory):
    """Every line published under `directory`, parsed, sorted."""
    rows = []
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if name.endswith(".jsonl"):
            with open(os.path.join(directory, name)) as f:
                rows.extend(tuple(json.loads(line)) for line in f)
    return sorted(rows)


def staged(directory):
    path = os.path.join(directory, STAGING)
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


class ReadLines(beam.PTransform):
    """The JSON objects appended to the file at `path` (complete lines
    only), each timestamped by its `timestamp_field` (an ISO-8601 time),
    read on without end."""

    def __init__(self, path, timestamp_field):
        super().__init__()
        self._path, self._field = path, timestamp_field

    def expand(self, pbegin):
        rules = rules_of(self.label, 0, None, 1000, 0.2, broker_times=False)
        return read_partitions(pbegin, [self._path], _UnboundedLinesRead(rules, None, self._field), dict)


class _LinesRead(PositionRangeRead):
    def __init__(self, rules, ends, field):
        super().__init__(rules, ends)
        self._field = field

    def start_position(self, path):
        return 0

    def read(self, path, start, stop, count, wait_s):
        lines = _complete_lines(path)
        if len(lines) <= start:
            time.sleep(wait_s)  # nothing new: wait a little, as a broker's blocking read does
            lines = _complete_lines(path)
        found = []
        for position in range(start, min(stop, len(lines), start + count)):
            value = json.loads(lines[position])
            event_time = datetime.datetime.fromisoformat(value[self._field]).replace(tzinfo=datetime.timezone.utc)
            found.append(Read(position, value, Timestamp.from_utc_datetime(event_time)))
        return found, start + len(found) >= len(lines)


@beam.DoFn.unbounded_per_element()
class _UnboundedLinesRead(_LinesRead):
    pass


def _complete_lines(path):
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return []
    return text.split("\n")[:-1]  # a line still being written has no newline yet


def append_lines(path, values):
    """Appends `values` as JSON lines in one write."""
    with open(path, "a") as f:
        f.write("".join(json.dumps(v) + "\n" for v in values))
