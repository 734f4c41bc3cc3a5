"""Bounded pipelines on Spark core.

Every buffer of the plan becomes an RDD of blocks (bytes holding runs of
encoded elements). A stage is a `mapPartitions` running the SDK harness; a
GroupByKey is a Spark shuffle keyed by the encoded key; Flatten is `union`;
side inputs are collected and broadcast. RDDs read more than once are
persisted so user code never runs twice for one element on a healthy run.
"""

import functools
import heapq
import threading
import uuid
import warnings
import zlib

from pyspark import StorageLevel

from beam_spark_runner.execution import main_session, batch_finalization
from beam_spark_runner.execution import metrics_accumulator as spark_metrics
from beam_spark_runner.execution import spark_internals, ui_metrics
from beam_spark_runner.result import RunCancelled
from beam_spark_runner.execution.naming import name_rdd, spark_call_site
from beam_spark_runner.execution import runner_io_glue
from beam_spark_runner import plans
from beam_spark_runner.worker import context, grouped_values, grouping, log_forwarding
from beam_spark_runner.worker.gc_tuning import bulk_data_gc
from beam_spark_runner.worker.impulse import ENCODED_IMPULSE_VALUE
from beam_spark_runner.worker.side_inputs import state_entries
from beam_spark_runner.worker.plain_stage import PlainStageRunner
from beam_spark_runner.worker.harness_stage import HarnessStageRunner


def key_partition(key: bytes) -> int:
    """Deterministic across processes (unlike hash() of bytes)."""
    return zlib.crc32(key)


class BatchExecution:
    """Builds and runs the Spark job(s) of one ExecutionPlan."""

    def __init__(
        self,
        spark,
        plan,
        parallelism=0,
        bundle_bytes=32 << 20,
        log_settings=None,
        grouped_inline_bytes=grouped_values.DEFAULT_INLINE_BYTES,
    ):
        self.spark = spark
        self.sc = spark.sparkContext
        self.plan = plan
        self.parallelism = parallelism or self.sc.defaultParallelism
        self.bundle_bytes = bundle_bytes
        # A key's grouped values above this many encoded bytes are streamed
        # to their consumer (worker/grouped_values.py).
        self.grouped_inline_bytes = grouped_inline_bytes
        # Where PySpark's grouping starts to spill, as RDD.groupByKey reads it.
        self._grouping_memory_mb = _memory_mb(self.sc.getConf().get("spark.python.worker.memory", "512m"))
        # Where executors send user code's log records (worker/log_forwarding.py).
        self.log_settings = log_settings
        self.metrics = self.sc.accumulator({}, spark_metrics.MonitoringInfosParam())
        self.warnings = self.sc.accumulator([], spark_metrics.WarningsParam())
        self.finalizer = batch_finalization.Finalizer(self.spark)
        self._written = {}  # BufferRef -> [RDD of blocks]
        self._grouped = {}  # BufferRef -> RDD of blocks after the shuffle
        self._persisted = []
        self._broadcasts = []
        self._uses = plan.consumers()
        self.job_group = "beam-%s" % uuid.uuid4().hex
        self._cancelled = threading.Event()

    def cancel(self):
        """Cancels the run's running Spark jobs and starts no further one."""
        self._cancelled.set()
        self.sc.cancelJobGroup(self.job_group)

    @property
    def cancelled(self):
        """True once `cancel()` was called."""
        return self._cancelled.is_set()

    def check_not_cancelled(self):
        if self._cancelled.is_set():
            raise RunCancelled("the pipeline was cancelled")

    # -- building ---------------------------------------------------------
    def run(self):
        """Runs the plan's Spark jobs; call on the thread that owns the run
        (Spark's job group is a thread-local property)."""
        self.sc.setJobGroup(self.job_group, "Beam pipeline", interruptOnCancel=True)
        # With spark.scheduler.mode=FAIR (the job server's default) each run
        # is its own pool, so concurrent runs share the executors; FIFO
        # ignores it.
        self.sc.setLocalProperty("spark.scheduler.pool", self.job_group)
        try:
            leaves = []
            for stage in self.plan.stages:
                stage_rdd = self._stage_rdd(stage)
                if not self._register_outputs(stage, stage_rdd):
                    leaves.append((stage, stage_rdd))
            for stage, rdd in leaves:
                self.check_not_cancelled()
                self.sc.setJobDescription("Beam: %s" % stage.display_name)
                with spark_call_site(self.sc, stage.display_name):
                    rdd.count()
                self.after_spark_job()
            self._publish_ui_metrics()
        finally:
            self.sc.setJobDescription(None)
            self._release()
            spark_metrics.reissue_warnings(self.warnings.value)
        return spark_metrics.by_stage(self.metrics.value)

    def metrics_so_far(self):
        return spark_metrics.by_stage(self.metrics.value)

    def after_spark_job(self):
        """Call after each Spark job of the run succeeded: runs the bundle
        finalization callbacks its tasks handed over (batch_finalization.py)."""
        self.finalizer.run_new()

    def persist(self, rdd):
        """Keeps `rdd` (read more than once) until the run ends."""
        rdd.persist(StorageLevel.MEMORY_AND_DISK)
        self._persisted.append(rdd)

    def _publish_ui_metrics(self):
        """The committed user metrics into the Spark UI (ui_metrics)."""
        self.check_not_cancelled()
        ui_metrics.UiMetricsPublisher(self.sc).publish_safely("Beam metrics: pipeline finished", self.metrics_so_far())

    def _stage_rdd(self, stage):
        if stage.native is not None:
            return runner_io_glue.batch_stage(stage.native.urn)(self, stage)
        side_entries = self._side_input_entries(stage)
        rounds = stage.finalizes and not stage.stateful
        with spark_call_site(self.sc, stage.display_name):
            inputs = self.input_rdd(stage)
            if stage.stable_input:
                inputs = self._stable(inputs, stage)
            run = functools.partial(
                _run_stage_partition,
                stage,
                self.plan.components,
                side_entries,
                self.bundle_bytes,
                self.metrics,
                self.warnings,
                self.finalizer.accumulator,
                rounds,
                self.log_settings,
            )
            if not rounds:
                rdd = inputs.mapPartitions(run, preservesPartitioning=True)
                return name_rdd(rdd, stage.display_name)
        return batch_finalization.run_in_rounds(self, stage, inputs, run)

    def _stable(self, inputs, stage):
        """The stage's input written out before the stage runs, for a DoFn
        that requires stable input: a Spark job materializes it on the
        executors' disks (`localCheckpoint`, which also cuts its lineage), so
        a retried task reads the very elements the first attempt read; if
        those blocks are lost with an executor the run fails instead of
        recomputing different input."""
        held = name_rdd(inputs.persist(StorageLevel.DISK_ONLY), "%s: stable input" % stage.display_name)
        held.localCheckpoint()
        self.check_not_cancelled()
        held.count()
        self._persisted.append(held)
        return held

    def feeds_plain_stage_in_process(self, stage):
        """True if `stage` has one output, read by exactly one plain-Python
        stage with no other input: Spark then runs both in one task and the
        blocks may stay Python objects (runs.DecodedBlock)."""
        if len(stage.outputs) != 1:
            return False
        buffer = stage.outputs[0].buffer
        if buffer.kind != plans.BufferKind.MATERIALIZE or self._uses.get(buffer, 0) != 1:
            return False
        readers = [s for s in self.plan.stages if any(p.buffer == buffer for p in s.inputs)]
        return (
            len(readers) == 1
            and readers[0].plain_spec is not None
            and len(readers[0].inputs) == 1
            and not readers[0].stateful
            and not readers[0].splittable
        )

    def _register_outputs(self, stage, stage_rdd):
        """Records each output buffer's RDD; False if nothing reads them."""
        uses = sum(self._uses.get(port.buffer, 0) for port in stage.outputs)
        if uses == 0:
            return False
        if uses > 1 or len(stage.outputs) > 1:
            self.persist(stage_rdd)
        for index, port in enumerate(stage.outputs):
            if len(stage.outputs) == 1:
                out = stage_rdd.map(_second)
            else:
                out = stage_rdd.filter(functools.partial(_is_output, index)).map(_second)
            self._written.setdefault(port.buffer, []).append(out)
        return True

    def input_rdd(self, stage):
        tagged = []
        for index, port in enumerate(stage.inputs):
            rdd = self._buffer_rdd(port)
            if stage.stateful:
                rdd = self._partition_by_key(rdd, port.coder_id)
            elif stage.splittable and port.buffer.kind == plans.BufferKind.MATERIALIZE:
                rdd = self._spread(rdd, port.coder_id)
            tagged.append(rdd.map(functools.partial(_tag, index)))
        if len(tagged) == 1:
            return tagged[0]
        return self.sc.union(tagged)

    def _buffer_rdd(self, port):
        ref = port.buffer
        if ref.kind == plans.BufferKind.IMPULSE:
            return self.sc.parallelize([ENCODED_IMPULSE_VALUE], 1)
        if ref.kind == plans.BufferKind.GROUP:
            return self._group_rdd(ref)
        return self._union(self._written.get(ref, []))

    def _union(self, rdds):
        if not rdds:
            return self.sc.emptyRDD()
        return rdds[0] if len(rdds) == 1 else self.sc.union(rdds)

    def _group_rdd(self, ref):
        if ref not in self._grouped:
            group = self.plan.groups[ref.name]
            components = self.plan.components
            with spark_call_site(self.sc, group.display_name):
                records = self._union(self._written.get(ref, [])).flatMap(
                    functools.partial(_shuffle_records, components, group)
                )
                grouped = records.partitionBy(self.parallelism, key_partition).mapPartitions(
                    functools.partial(_group_partition, self._grouping_memory_mb), preservesPartitioning=True
                )
                self._grouped[ref] = name_rdd(
                    grouped.mapPartitions(
                        functools.partial(_grouped_blocks, components, group, self.grouped_inline_bytes)
                    ),
                    group.display_name,
                )
        return self._grouped[ref]

    def _partition_by_key(self, rdd, coder_id):
        components = self.plan.components
        keyed = rdd.flatMap(functools.partial(_keyed_elements, components, coder_id))
        return keyed.partitionBy(self.parallelism, key_partition).map(_second)

    def _spread(self, rdd, coder_id):
        """Bounded SDF restrictions, one element each, spread over partitions
        by their size estimates (`repartition` would move PySpark's pickled
        batches, not elements, leaving a handful of restrictions together)."""
        components = self.plan.components
        assigned = rdd.mapPartitionsWithIndex(
            functools.partial(_assign_restrictions, components, coder_id, self.parallelism)
        )
        return assigned.partitionBy(self.parallelism, _identity).map(_second)

    def _side_input_entries(self, stage):
        if not stage.side_inputs:
            return None
        entries = []
        for si in stage.side_inputs:
            self.check_not_cancelled()
            name = "side input %s of %s" % (si.tag, si.transform_id)
            self.sc.setJobDescription("Beam: %s" % name)
            with spark_call_site(self.sc, name):
                blocks = self._union(
                    self._written.get(plans.BufferRef(plans.BufferKind.MATERIALIZE, si.pcollection), [])
                ).collect()
            self.after_spark_job()
            entries.extend(state_entries(si, blocks, self.plan.components))
        broadcast = self.sc.broadcast(entries)
        self._broadcasts.append(broadcast)
        return broadcast

    def _release(self):
        for rdd in self._persisted:
            rdd.unpersist()
        for b in self._broadcasts:
            b.unpersist()


# -- functions shipped to executors (module level so they pickle by name) --


def _run_stage_partition(
    stage, components, side_entries, bundle_bytes, metrics, warning_acc, finalizations, rounds, log_settings, iterator
):
    # The runner is built inside: what DoFns log in their setup is forwarded too.
    main_session.install()  # for workers of PySpark's own daemon (a session the runner did not create)
    with log_forwarding.forwarding(log_settings, stage.display_name):
        runner = _stage_runner(stage, components, side_entries)
        with warnings.catch_warnings(record=True) as caught, bulk_data_gc():
            warnings.simplefilter("default")
            try:
                yield from (runner.run_round if rounds else runner.run)(iterator, bundle_bytes)
            finally:
                if runner.monitoring_infos:
                    metrics.add({stage.name: spark_metrics.serialize(runner.monitoring_infos)})
                if getattr(runner, "finalizations", None):
                    # Merged by Spark only if this task succeeds (batch_finalization.py).
                    finalizations.add([(stage.display_name, blob) for blob in runner.finalizations])
                if caught:
                    warning_acc.add([spark_metrics.describe_warning(w) for w in caught])
                runner.close()


def _stage_runner(stage, components, side_entries):
    if stage.plain_spec is not None:
        return PlainStageRunner(stage, stage.plain_spec, components)
    runner = HarnessStageRunner(stage, side_entries.value if side_entries is not None else (), components)
    runner.finalize_after_commit = stage.finalizes
    return runner


def _group_partition(memory_mb, records):
    """One partition's (key, value) records grouped by key, as (key,
    re-iterable of values): the reduce side of PySpark's `RDD.groupByKey`
    (its ExternalGroupBy), which spills to disk above `memory_mb` and reads
    a key's values back as they are iterated. `RDD.groupByKey` also
    combines on the map side (ExternalMerger), which pickles a hot key's
    whole value list when it spills: with one key of 1M values under a
    900 MB worker limit that ran out of memory. So the map side here is a
    plain `partitionBy` (pyspark.shuffle has no documented API: reached
    through execution/spark_internals.py)."""
    return spark_internals.external_group_by(records, memory_mb, _one_value_list, _append_value, _extend_values)


def _memory_mb(size):
    """A Spark memory size ("512m", "2g", "1024k") in MiB, as PySpark reads
    spark.python.worker.memory."""
    units = {"k": 1.0 / 1024, "m": 1, "g": 1 << 10, "t": 1 << 20}
    size = size.strip().lower()
    if size[-1:] in units:
        return int(float(size[:-1]) * units[size[-1]])
    return int(int(size) / (1 << 20))  # bytes


def _one_value_list(value):
    return [value]


def _append_value(values, value):
    values.append(value)
    return values


def _extend_values(values, more):
    values.extend(more)
    return values


def _shuffle_records(components, group, block):
    return _group_codec(components, group).shuffle_records(block)


def _grouped_blocks(components, group, inline_bytes, grouped):
    return _group_codec(components, group).grouped_blocks(grouped, inline_bytes)


@functools.lru_cache(maxsize=64)
def _group_codec(components, group):
    return grouping.GroupCodec(components, group)


def _keyed_elements(components, coder_id, block):
    """(nested-encoded key, element encoding) for each windowed KV of a block."""
    coder = context.components_context(components).coders[coder_id]
    encode_key = coder.wrapped_value_coder.key_coder().get_impl().encode_nested
    if isinstance(block, grouped_values.GroupedValues):
        # A streamed group read by a keyed stage: Spark moves it to the
        # key's partition, as one encoded element.
        yield block.key, block.encoded()
        return
    for wv, element in grouping.decode_elements(block, coder.get_impl()):
        yield encode_key(wv.value[0]), element


def _assign_restrictions(components, coder_id, partitions, index, blocks):
    """(target partition, element) for each sized restriction of this input
    partition: largest first onto the least loaded target (LPT scheduling)."""
    impl = context.coder_impl(components, coder_id)
    decoded = [pair for block in blocks for pair in grouping.decode_elements(block, impl)]
    elements = [encoded for _, encoded in decoded]
    sized = sorted(((_restriction_size(wv), i) for i, (wv, _) in enumerate(decoded)), reverse=True)
    # Offset by input partition so several inputs do not all start at target 0.
    load = [(0.0, (index + t) % partitions) for t in range(partitions)]
    heapq.heapify(load)
    for size, i in sized:
        total, target = heapq.heappop(load)
        yield target, elements[i]
        heapq.heappush(load, (total + size, target))


def _restriction_size(wv):
    """The size estimate SplitAndSizeRestrictions attached: ((elem, restriction), size)."""
    try:
        size = float(wv.value[1])
    except (TypeError, ValueError, IndexError):
        return 1.0
    return size if size > 0 else 1.0


def _identity(x):
    return x


def _tag(index, block):
    return index, block


def _second(pair):
    return pair[1]


def _is_output(index, pair):
    return pair[0] == index
