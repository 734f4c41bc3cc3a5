"""The Beam side of benchmarks/streaming.py: run_beam runs the pipeline of
streaming_pipeline.py on SparkRunner --streaming, records each micro-batch
as the runner logs it (_BatchLog), reads back the panes' output times and
hands it all to streaming_analysis.analyze_beam; it adds where Spark says
the query's batches spent their time (_spark_breakdown, and every batch's
progress with --verbose)."""

import collections
import glob
import json
import logging
import os
import shutil
import sys
import tempfile
import time

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from beam_spark_runner.plans import OperatorKind

from procstat import CpuMeter
from streaming_analysis import analyze_beam
from streaming_config import MASTER, NAMESPACE, PARTITIONS, STREAMING_LOGGER
from streaming_pipeline import build_beam


class _BatchLog(logging.Handler):
    """Records each Beam micro-batch when the runner's driver sink logs it
    (logger beam_spark_runner.streaming.driver_sink, DEBUG): wall time, the
    batch's number and BatchTimes (from StreamingExecution.last_status, set
    just before the log line), and the run's counters at that moment."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.batches = []
        self.result = None

    def _status(self, record):
        # The StreamingExecution is the receiver of the result's cancel hook.
        execution = getattr(getattr(self.result, "_cancel_fn", None), "__self__", None)
        status = getattr(execution, "last_status", None)
        if status is not None:
            return status.batch, json.loads(status.times.to_json())
        return None, None

    def emit(self, record):
        if not record.getMessage().startswith("Streaming batch"):
            return
        now = time.time()
        beam_batch, times, events, tick_max = None, None, None, None
        try:
            beam_batch, times = self._status(record)
            if self.result is not None:
                metrics = self.result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
                events = sum(c.committed for c in metrics["counters"] if c.key.metric.name == "events")
                ticks = [d.committed for d in metrics["distributions"] if d.key.metric.name == "tick_ms"]
                tick_max = max((d.max for d in ticks if d and d.count), default=None)
        except Exception as e:  # noqa: BLE001 -- a measurement must not break the run
            print("benchmark: could not read batch status: %r" % e, file=sys.stderr)
        if self.batches and beam_batch is not None and self.batches[-1]["batch"] == beam_batch:
            return
        self.batches.append(
            {
                "t": now,
                "batch": beam_batch,
                "times": times,
                "events": events,
                "tick_max_s": tick_max / 1000.0 if tick_max is not None else None,
            }
        )


def run_beam(spark, listener, rate, seconds, interval, probe_every, group_stages, label, verbose=False, early_s=0):
    from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline

    out_dir = tempfile.mkdtemp(prefix="beam-spark-bench-panes-")
    log = _BatchLog()
    logger = logging.getLogger(STREAMING_LOGGER)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(log)
    logger.propagate = False
    try:
        options = PipelineOptions(
            [
                "--runner=beam_spark_runner.SparkRunner",
                "--streaming",
                "--spark_master=" + MASTER,
                "--parallelism=%d" % PARTITIONS,
            ]
        )
        p = beam.Pipeline(options=options)
        offered = build_beam(p, rate, seconds, interval, probe_every, out_dir, group_stages, early_s)
        plan = plan_streaming_pipeline(pipeline_proto_of(p))
        groups = [op.name for op in plan.operators if op.kind == OperatorKind.GROUP]
        keyed = [
            "%s %s" % (op.kind.value, op.display_name if op.kind == OperatorKind.GROUP else "")
            for op in plan.operators
            if op.is_keyed
        ]
        queries_before = set(listener.ids_named("beam-"))
        cpu = CpuMeter().start()
        submitted = time.time()
        result = p.run()
        log.result = result
        result.wait_until_finish()
        ended = time.time()
        cpu = cpu.stop()
        time.sleep(0.2)
        metrics = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
        counters = {c.key.metric.name: c.committed for c in metrics["counters"]}
        ticks = [d.committed for d in metrics["distributions"] if d.key.metric.name == "tick_ms"]
        lines = _read_lines(out_dir)
        progress = [p for q in set(listener.ids_named("beam-")) - queries_before for p in listener.of(q)]
    finally:
        logger.removeHandler(log)
        logger.setLevel(old_level)
        logger.propagate = True
        shutil.rmtree(out_dir, ignore_errors=True)
    out = analyze_beam(
        label, offered, seconds, submitted, ended, cpu, counters, ticks, log.batches, lines, groups, verbose
    )
    out["spark"] = _spark_breakdown(progress, keyed)
    if verbose:
        _print_spark_progress(label, progress)
    return out


def _spark_breakdown(progress, keyed):
    """Where Spark says the Beam query's batches spent their time (sums, s):
    durationMs phases, and per keyed operator (transformWithState) the time
    in its Python function and in committing its state. Spark lists state
    operators from the sink back to the source: reverse plan order."""
    total = collections.Counter()
    for p in progress:
        if p["batchId"] == 0:
            continue  # the query start
        for k, v in p.get("durationMs", {}).items():
            total[k] += v / 1000.0
        for name, op in zip(reversed(keyed), p.get("stateOperators", [])):
            total["%s: python" % name.strip()] += op.get("allUpdatesTimeMs", 0) / 1000.0
            total["%s: state commit" % name.strip()] += op.get("commitTimeMs", 0) / 1000.0
    return dict(total)


def _print_spark_progress(label, progress):
    print(
        "  Spark progress of the Beam query (%s): batch, rows in, durationMs, state operators from "
        "the last to the first (rows total, updates ms, commit ms)" % label
    )
    for p in progress:
        d = p.get("durationMs", {})
        ops = [
            "%s/%s/%s" % (o.get("numRowsTotal"), o.get("allUpdatesTimeMs"), o.get("commitTimeMs"))
            for o in p.get("stateOperators", [])
        ]
        print(
            "    %3d %7d trigger %6d addBatch %6d latestOffset %5d planning %5d wal %4d commit %4d  %s"
            % (
                p["batchId"],
                p["numInputRows"],
                d.get("triggerExecution", 0),
                d.get("addBatch", 0),
                d.get("latestOffset", 0),
                d.get("queryPlanning", 0),
                d.get("walCommit", 0),
                d.get("commitOffsets", 0),
                " ".join(ops),
            )
        )


def _read_lines(out_dir):
    lines = []
    for path in glob.glob(os.path.join(out_dir, "*.txt")):
        with open(path) as f:
            lines.extend(line.split() for line in f)
    return lines
