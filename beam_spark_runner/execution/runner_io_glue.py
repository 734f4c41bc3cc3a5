"""The Spark side of the runner's I/O transforms (translation/runner_io.py),
by URN: what runs a source's or a sink's stage in a batch job, and what
stages a sink's rows at the end of each micro-batch of a streaming query.

A connector registers its glue here (`register_batch_stage`,
`register_micro_batch_staging`, `register_plan_resolution`); the runner
(before it plans), the batch execution and the streaming
query's foreachBatch end (execution/streaming_spark_io.SparkSinkWrites)
ask this registry and never name a connector. The built-in connectors'
glue modules are listed in `_BUILTINS` and loaded on first use.

A sink's streaming side is a `MicroBatchSinkStaging`: per micro-batch it
stages the sink's rows where a replay of the batch overwrites them and
returns the `SinkCommit` (worker/sink_commits.py) that publishes them,
which the checkpoint coordinator runs once the batch is a completed
checkpoint (Spark's `StreamingWrite.commit(epoch)`; an abandoned epoch is
overwritten by its replay).
"""

import abc
import dataclasses
import threading
from typing import Any, Callable, Dict

from beam_spark_runner.builtin_modules import BuiltinModules
from beam_spark_runner.worker.sink_commits import SinkCommit


@dataclasses.dataclass(frozen=True)
class StagingContext:
    """What a query gives its sinks' staging: its Spark session, the id its
    checkpoint names staged files with (the same for every restart of the
    checkpoint), the pipeline's components (coders) and the checkpoint's
    files (execution/checkpoint_files.py)."""

    spark: Any
    run_id: str
    components: Any
    files: Any


class MicroBatchSinkStaging(abc.ABC):
    """The sinks of one URN in one streaming query."""

    def prepare(self, sinks) -> None:
        """At the query's start, with every sink of the URN (plans.SparkSink):
        creates what their targets need."""

    @abc.abstractmethod
    def stage(self, selected, sink, batch_id: int) -> SinkCommit:
        """Stages the sink's rows of micro-batch `batch_id` (`selected`: a
        DataFrame of its DATA and KEYED query rows) where a replay of the
        batch overwrites them; returns the commit that publishes them."""


class DriverCollectedStaging(MicroBatchSinkStaging):
    """A staging that can also stage rows the driver already collected: a
    query whose sinks all are of this kind brings each batch to the driver
    in one Spark job (SparkSinkWrites)."""

    @abc.abstractmethod
    def stage_collected(self, rows, sink, batch_id: int) -> SinkCommit:
        """`stage` for the sink's rows collected on the driver (an Arrow
        table with `kind`, `payload` and the `part` that made each row, in
        collect order)."""


# The Spark glue modules of the connectors the runner ships: each
# registers when imported.
_BUILTINS = BuiltinModules(
    "beam_spark_runner.execution.batch_native_io",
    "beam_spark_runner.io.spark.schema_glue",
    "beam_spark_runner.io.spark.batch_glue",
    "beam_spark_runner.io.spark.streaming_glue",
    "beam_spark_runner.io.database.spark_glue",
    "beam_spark_runner.io.kafka.spark_glue",
)
_BATCH_STAGES: Dict[str, Callable] = {}
_STAGINGS: Dict[str, Callable[[StagingContext], MicroBatchSinkStaging]] = {}
_SOURCES: Dict[str, Callable] = {}
_RESOLUTIONS: Dict[str, Callable] = {}
_LOCK = threading.Lock()


def register_streaming_source(urn: str, source_frame: Callable) -> None:
    """`source_frame(spark, source, key_groups, shared, reader)`: the
    streaming DataFrame of query rows (streaming/rows.py) of one source of
    the streaming plan (plans.SparkSource), whose rows are addressed by the
    run's SharedPlan `shared` (execution/streaming_udfs.py), read by its
    fused operator `reader` ((OperatorRef, logs)) or None."""
    _register(_SOURCES, urn, source_frame, "the streaming source")


def streaming_source_frame(spark, source, key_groups, shared, reader):
    _BUILTINS.load()
    try:
        source_frame = _SOURCES[source.urn]
    except KeyError:
        raise ValueError("runner source URN %s has no streaming source registered" % source.urn) from None
    return source_frame(spark, source, key_groups, shared, reader)


def _register(table, urn, value, what):
    with _LOCK:
        known = table.get(urn)
        if known is not None and known is not value:
            raise ValueError("%s of runner I/O URN %s is already registered" % (what, urn))
        table[urn] = value


def register_batch_stage(urn: str, run_stage: Callable) -> None:
    """`run_stage(execution, stage)`: the RDD of the stage's (output index,
    block) records, as execution/batch_execution.py's stages give them."""
    _register(_BATCH_STAGES, urn, run_stage, "the batch stage")


def register_micro_batch_staging(urn: str, factory: Callable[[StagingContext], MicroBatchSinkStaging]) -> None:
    """`factory(context)`: the staging of the URN's sinks in one query."""
    _register(_STAGINGS, urn, factory, "the micro-batch staging")


def register_plan_resolution(urn: str, resolve: Callable) -> None:
    """`resolve(spark, transform_id, pipeline_proto)`: completes the
    transform in the pipeline proto, in place, with what only the session
    the pipeline runs on knows (a source's schema, and the coder of the rows
    it gives), before the runner plans; raises UnsupportedPipelineError
    naming the transform when it cannot run."""
    _register(_RESOLUTIONS, urn, resolve, "the plan resolution")


def needs_session_to_plan(pipeline_proto) -> bool:
    """Whether a transform of the pipeline is resolved with the session
    before the runner plans (`resolved_with_session`)."""
    _BUILTINS.load()
    return any(t.spec.urn in _RESOLUTIONS for t in pipeline_proto.components.transforms.values())


def resolved_with_session(pipeline_proto, spark):
    """A copy of the pipeline proto with every transform registered by
    `register_plan_resolution` resolved with `spark`, producers before the
    transforms that read their output (a sink's schema may be its source's)."""
    _BUILTINS.load()
    resolved = type(pipeline_proto)()
    resolved.CopyFrom(pipeline_proto)
    transforms = resolved.components.transforms

    def visit(transform_id):
        transform = transforms[transform_id]
        resolve = _RESOLUTIONS.get(transform.spec.urn)
        if resolve is not None:
            resolve(spark, transform_id, resolved)
        for sub in transform.subtransforms:
            visit(sub)

    # Beam lists a pipeline's transforms in the order they were applied,
    # which puts every producer before its readers.
    for root in resolved.root_transform_ids:
        visit(root)
    return resolved


def batch_stage(urn: str) -> Callable:
    _BUILTINS.load()
    try:
        return _BATCH_STAGES[urn]
    except KeyError:
        raise ValueError("runner I/O URN %s has no batch stage registered" % urn) from None


def micro_batch_staging(urn: str, context: StagingContext) -> MicroBatchSinkStaging:
    _BUILTINS.load()
    try:
        factory = _STAGINGS[urn]
    except KeyError:
        raise ValueError("runner sink URN %s has no micro-batch staging registered" % urn) from None
    return factory(context)
