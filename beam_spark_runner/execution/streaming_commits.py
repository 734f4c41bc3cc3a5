"""Spark glue of the checkpoint coordinator (streaming/checkpoint_coordinator.py):
when Spark has committed a batch of the query, where Spark's commit log
stands on restart, and the side effects a durable batch releases.

Spark writes a batch's commit log entry after the foreachBatch sink
returned and before it posts the batch's progress event, so a
listener hearing the progress event of batch N knows N is
durable (checked: the entry exists when the event arrives).
"""

import json
import logging
import pickle

from beam_spark_runner.worker.beam_internals import pickler
from beam_spark_runner.execution import checkpoint_files, spark_internals
from beam_spark_runner.worker import sink_commits
from beam_spark_runner.worker.harness_stage import run_finalization_callbacks

_LOG = logging.getLogger(__name__)
_COMMITS_DIR = checkpoint_files.join(checkpoint_files.SPARK_DIR, "commits")


class CommitListener:
    """Calls `on_commit(batch_id)` for each batch of one query that Spark
    committed (a batch may be reported more than once), on Spark's listener
    thread, between `start()` and `stop()`."""

    def __init__(self, spark, on_commit):
        self._spark = spark
        self._on_commit = on_commit
        self._handle = None
        self.query_id = None  # set once the query started

    def start(self):
        self._handle = spark_internals.add_progress_listener(self._spark, self._on_progress)
        return self

    def stop(self):
        handle, self._handle = self._handle, None
        if handle is not None:
            spark_internals.remove_progress_listener(self._spark, handle)

    def _on_progress(self, event):
        if self.query_id is not None and event.query_id == self.query_id:
            self._on_commit(event.batch_id)


def last_spark_commit(files):
    """The newest batch in Spark's commit log under the checkpoint, or None."""
    batches = [int(name) for name in files.list(_COMMITS_DIR) if name.isdigit()]
    return max(batches) if batches else None


def damaged_spark_logs(files, entries=2):
    """Spark's checkpoint files a restart reads (the query metadata, the
    newest `entries` offset and commit log entries) that are damaged, each
    as "<uri>: <what is wrong>". Spark itself fails on them with a bare
    parse error that names no file (or, on a local file system, with a
    checksum error)."""
    problems = []
    metadata = checkpoint_files.join(checkpoint_files.SPARK_DIR, "metadata")
    data = files.read(metadata)
    if data is not None and _json_problem(data.decode("utf-8", "replace").strip()):
        problems.append("%s: not the JSON Spark writes" % files.uri(metadata))
    for log in ("offsets", "commits"):
        directory = checkpoint_files.join(checkpoint_files.SPARK_DIR, log)
        batches = sorted(int(name) for name in files.list(directory) if name.isdigit())
        for batch in batches[-entries:]:
            path = checkpoint_files.join(directory, str(batch))
            problem = _log_entry_problem(files.read(path))
            if problem:
                problems.append("%s: %s" % (files.uri(path), problem))
    return problems


def moved_state_schemas(files):
    """Spark's operator metadata (`spark/state/<operator>/_metadata/v2/<n>`,
    the newest entry of each keyed operator) names its state schema files by
    absolute URI, fixed where the checkpoint was first written. Copied or
    moved elsewhere, the checkpoint still points there, and Spark fails on
    the first batch with a bare "File ... does not exist". Returns, per
    schema file that cannot be found, "<metadata uri>: <recorded uri>"."""
    problems = []
    state_dir = checkpoint_files.join(checkpoint_files.SPARK_DIR, "state")
    for operator in files.list(state_dir):
        directory = checkpoint_files.join(state_dir, operator, "_metadata", "v2")
        batches = sorted(int(name) for name in files.list(directory) if name.isdigit())
        if not batches:
            continue
        path = checkpoint_files.join(directory, str(batches[-1]))
        for recorded in _schema_paths(files.read(path)):
            if not files.exists_at(recorded):
                problems.append("%s: %s" % (files.uri(path), recorded))
    return problems


def _schema_paths(data):
    """The state schema file URIs in one operator metadata entry (a version
    line, then JSON); none if it cannot be read (Spark reports that)."""
    lines = (data or b"").decode("utf-8", "replace").split("\n", 1)
    if len(lines) < 2 or _json_problem(lines[1]):
        return []
    metadata = json.loads(lines[1])
    infos = metadata.get("stateStoreInfo", []) if isinstance(metadata, dict) else []
    return [p for info in infos if isinstance(info, dict) for p in info.get("stateSchemaFilePaths", [])]


def _log_entry_problem(data):
    """What is wrong with one entry of Spark's offset or commit log (a
    version line "v<n>", then JSON lines, "-" for a source without offset),
    or None."""
    if data is None:
        return "missing"
    lines = data.decode("utf-8", "replace").split("\n")
    if not lines or not lines[0].startswith("v") or not lines[0][1:].isdigit():
        return "no version line (truncated or overwritten)"
    if len(lines) < 2 or not lines[1].strip():
        return "truncated after the version line"
    for number, line in enumerate(lines[1:], start=2):
        if line and line != "-" and _json_problem(line):
            return "line %d is not complete JSON (truncated?)" % number
    return None


def _json_problem(text):
    try:
        json.loads(text)
    except ValueError as e:
        return str(e)
    return None


def commit_context(spark):
    """The context the driver's sink commits run in: the checkpoint's files
    through the query's own Spark session."""
    return sink_commits.CommitContext(lambda root: checkpoint_files.open_checkpoint_files(spark, root))


def release(effects, context):
    """Runs a durable batch's bundle finalization callbacks on the driver.
    The sinks' commits (worker/sink_commits.py) of each stage run first and
    must succeed: one that fails fails the run, and the batch's pending
    record stays, so the next run publishes again. Other callbacks that
    fail are logged, as in Beam's SDK harness."""
    for payload in effects.finalizers:
        stage_name, blob = pickle.loads(payload)
        try:
            callbacks = pickler.loads(blob)
        except (ImportError, AttributeError) as e:
            # A pending record whose commits name code this installation
            # does not have: publishing nothing would lose the batch.
            raise RuntimeError(
                "%r: the checkpoint holds a completed batch whose finalization (its sinks' commits) this "
                "installation cannot load (%s); finish the run with the beam-spark-runner and pipeline code "
                "that wrote the checkpoint" % (stage_name, e)
            ) from None
        commits, others = sink_commits.split(callbacks)
        sink_commits.run_commits(commits, context)
        run_finalization_callbacks(others, stage_name)


def abort(effects):
    """A batch Spark will replay: its finalization callbacks never run (the
    replay hands over its own)."""
    if effects.finalizers:
        _LOG.info("Dropping %d finalization callbacks of a batch that will be replayed", len(effects.finalizers))
