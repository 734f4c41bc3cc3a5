"""Which keyed operators of a streaming plan pass their input watermark on
within a micro-batch (streaming/watermarks.py, "same-batch stages"). Pure
planning: no Spark.

A GroupByKey qualifies when its windowing strategy has no allowed lateness
and stamps its panes at the end of the window (TimestampCombiner
END_OF_WINDOW, Beam's default), and it runs on the exact watermark
(percentile 1). Then, once a batch's step advanced it to its new input
watermark W, it holds nothing behind W:

- every window ending before W fired in that step (its ON_TIME pane, or
  the final pane of a trigger that had not finished) and expired, since
  with no allowed lateness a window's garbage-collection time is its end;
- an element arriving later for such a window is droppably late and
  dropped; any other element joins a window ending at or after W;
- every pane is stamped with its window's end, so whatever the stage emits
  in a later batch is stamped at or after W, whatever its trigger.

Everything else keeps one batch of watermark lag per stage: a stateful or
splittable DoFn (its timers and watermark estimators hold it back), a
stage reading side inputs (it buffers elements), and a GroupByKey with
allowed lateness (a late pane is stamped behind its input watermark and
must not be late downstream) or with EARLIEST or LATEST timestamps (a
pane is stamped with one of its elements' times, which may be behind the
input watermark the stage reached while the element waited).
"""

from typing import FrozenSet, Iterable

from apache_beam.portability.api import beam_runner_api_pb2

from beam_spark_runner.plans import Operator, OperatorKind

_END_OF_WINDOW = beam_runner_api_pb2.OutputTime.END_OF_WINDOW


def same_batch_stages(operators: Iterable[Operator], components) -> FrozenSet[str]:
    """The names of the operators whose output watermark may be their
    input watermark of the same batch (the module's docstring);
    `components`: the pipeline's Components proto."""
    out = set()
    for op in operators:
        if op.kind != OperatorKind.GROUP or op.watermark_percentile < 1:
            continue
        strategy = components.windowing_strategies[op.group.windowing_strategy_id]
        if strategy.allowed_lateness == 0 and strategy.output_time == _END_OF_WINDOW:
            out.add(op.name)
    return frozenset(out)
