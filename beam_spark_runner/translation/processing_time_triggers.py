"""AfterProcessingTime triggers as this Python SDK reads them.

The runner runs every grouping's trigger with this Python SDK's trigger
state machines, whatever SDK wrote it. Beam Java writes
`AfterProcessingTime.pastFirstElementInPane()` with no timestamp
transforms and `plusDelayOf(a).plusDelayOf(b)` as two delays, while
Python's `AfterProcessingTime.from_runner_api` reads exactly one delay (it
fails on none, and would read a second one, or an `alignedTo`, as if it
were not there). So, before planning:

- `normalize_processing_time_delays` (a proto rewrite) gives each
  AfterProcessingTime exactly one delay: the sum of its delays, 0 when it
  has none, which fires at the same processing time;
- `processing_time_trigger_problems` (a submission check) refuses an
  AfterProcessingTime aligned to a period (`alignedTo`), which the Python
  trigger cannot run, naming the grouping, the PCollection and the trigger.
"""

import copy

from apache_beam.portability.api import beam_runner_api_pb2

_SUBTRIGGER_LISTS = ("after_all", "after_any", "after_each")


def _after_processing_times(trigger):
    """Every AfterProcessingTime message in the `trigger` tree."""
    kind = trigger.WhichOneof("trigger")
    if kind == "after_processing_time":
        yield trigger.after_processing_time
    elif kind in _SUBTRIGGER_LISTS:
        for sub in getattr(trigger, kind).subtriggers:
            yield from _after_processing_times(sub)
    elif kind == "after_end_of_window":
        window_end = trigger.after_end_of_window
        for field in ("early_firings", "late_firings"):
            if window_end.HasField(field):
                yield from _after_processing_times(getattr(window_end, field))
    elif kind == "or_finally":
        yield from _after_processing_times(trigger.or_finally.main)
        yield from _after_processing_times(getattr(trigger.or_finally, "finally"))
    elif kind == "repeat":
        yield from _after_processing_times(trigger.repeat.subtrigger)


def _aligned(after_processing_time):
    return any(t.WhichOneof("timestamp_transform") == "align_to" for t in after_processing_time.timestamp_transforms)


def processing_time_trigger_problems(pipeline, groupings):
    """One problem per grouping in `groupings` ((name, urn, pcollection id)
    of each GroupByKey-like transform) whose input's trigger has an
    AfterProcessingTime aligned to a period."""
    problems = []
    components = pipeline.components
    for name, urn, pcoll_id in groupings:
        pcoll = components.pcollections[pcoll_id]
        strategy = components.windowing_strategies[pcoll.windowing_strategy_id]
        if any(_aligned(apt) for apt in _after_processing_times(strategy.trigger)):
            problems.append(
                "%s: %s reads PCollection %s triggered by an AfterProcessingTime aligned to a period "
                "(alignedTo): the runner's triggers delay processing time, they do not align it"
                % (name, urn, pcoll.unique_name or pcoll_id)
            )
    return problems


def normalize_processing_time_delays(pipeline):
    """A copy of `pipeline` whose every AfterProcessingTime has exactly one
    delay (the sum of its delays; 0 when none); `pipeline` itself when
    every one already has."""

    def needs(apt):
        return (
            len(apt.timestamp_transforms) != 1
            or apt.timestamp_transforms[0].WhichOneof("timestamp_transform") != "delay"
        )

    strategies = pipeline.components.windowing_strategies
    if not any(
        needs(apt) and not _aligned(apt) for s in strategies.values() for apt in _after_processing_times(s.trigger)
    ):
        return pipeline
    rewritten = copy.deepcopy(pipeline)
    for strategy in rewritten.components.windowing_strategies.values():
        for apt in _after_processing_times(strategy.trigger):
            if not needs(apt) or _aligned(apt):
                continue
            millis = sum(t.delay.delay_millis for t in apt.timestamp_transforms)
            del apt.timestamp_transforms[:]
            apt.timestamp_transforms.add(delay=beam_runner_api_pb2.TimestampTransform.Delay(delay_millis=millis))
    return rewritten
