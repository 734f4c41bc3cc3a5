"""A connector the runner does not ship, written only against the I/O
contract: `WriteLines(directory)` writes each element of a streaming
pipeline as a JSON line into files under `directory`, exactly once.

It registers its URN with planning (translation/runner_io.py) and its
micro-batch staging with the execution (execution/runner_io_glue.py);
nothing in the runner names it. Per micro-batch the staging writes the
sink's rows to `<directory>/_staging/<run>-<batch>.jsonl` (a replay of the
batch overwrites it) and hands over a `LinesCommit` (worker/sink_commits.py),
which the checkpoint coordinator runs once the batch is a completed
checkpoint: it renames the staged file to its final name, idempotently."""

import dataclasses
import json
import os
import pickle

import apache_beam as beam

from beam_spark_runner.execution import runner_io_glue
from beam_spark_runner.execution.sink_rows import query_values
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
