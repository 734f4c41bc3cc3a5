"""Runs trigger transcripts (Beam's YAML format) against our reduce driver.

Format (see apache_beam/testing/data/trigger_transcripts.yaml): a spec names
``window_fn``, ``trigger_fn`` (Python SDK syntax), ``timestamp_combiner``,
``allowed_lateness``, ``accumulation_mode`` and a ``transcript`` of actions:
``input`` (timestamps), ``watermark``, ``expect`` (list of partial pane
descriptions), ``state`` (ignored, as by Beam's own driver harness).

Our extensions (used by tests/core/data/*.yaml):
 * ``accumulation_mode: retracting`` (runner-API value 3);
 * ``closing_behavior: emit_always | emit_if_nonempty`` and
   ``on_time_behavior: fire_always | fire_if_nonempty`` (the windowing
   strategy's proto fields; default: what Beam's Python SDK writes,
   emit_always and fire_always);
 * action ``clock: t`` advances processing time to t (absolute seconds);
 * ``batch_expect``: every pane the same input gives in batch (all input
   arriving before the watermark jumps to +infinity, processing time still),
   checked by ``run_batch_transcript``;
 * expected panes may say ``retraction: true`` (default false is NOT implied:
   like every other attribute it is only checked when given);
 * ``expect_beam`` in a spec documents what Beam's Python driver produces where
   it is wrong, and ``reason`` says why.
"""

import importlib.resources
import re

import yaml
from apache_beam.transforms import trigger as beam_trigger
from apache_beam.transforms import window as beam_window
from apache_beam.transforms.window import TimestampCombiner
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import PaneInfoTiming
from apache_beam.utils.windowed_value import WindowedValue

from triggers import ReduceSpec
from triggers import ManualClock
from triggers.batch import group_by_window
from triggers.closing import ClosingRules
from triggers.retractions import unwrap


class CustomTimestampingFixedWindowsWindowFn(beam_window.FixedWindows):
    """FixedWindows whose transformed output time is input + 100 (as Beam's test)."""

    def get_transformed_output_time(self, unused_window, input_timestamp):
        return input_timestamp + 100


def beam_transcripts():
    """All specs of Beam's trigger_transcripts.yaml, from the installed wheel."""
    path = importlib.resources.files('apache_beam').joinpath('testing/data/trigger_transcripts.yaml')
    return list(yaml.safe_load_all(path.read_text()))


def _parse_int_list(s):
    s = s.strip()
    inner = s[1:-1].strip()
    return [int(x) for x in inner.split(',')] if inner else []


def _split_args(s):
    args, start, depth = [], 0, 0
    for i, c in enumerate(s):
        if c in '({[':
            depth += 1
        elif c in ')}]':
            depth -= 1
        elif c == ',' and depth == 0:
            args.append(s[start:i].strip())
            start = i + 1
    args.append(s[start:].strip())
    return [a for a in args if a]


def parse_expr(s, names):
    """Parses 'Foo(arg, kw=arg)' recursively, resolving names in ``names``."""
    s = s.strip()
    if s in names:
        return names[s]
    if s.startswith('['):
        return _parse_int_list(s)
    if '(' in s:
        callee = parse_expr(s[: s.index('(')], names)
        args, kwargs = [], {}
        for a in _split_args(s[s.index('(') + 1 : -1]):
            if re.match(r'^\w+=', a):
                k, v = a.split('=', 1)
                kwargs[k] = parse_expr(v, names)
            else:
                args.append(parse_expr(a, names))
        return callee(*args, **kwargs)
    return int(s)


def _parse_fn(s, names):
    fn = parse_expr(s, names)
    return fn() if isinstance(fn, type) else fn


WINDOW_NAMES = dict(beam_window.__dict__)
WINDOW_NAMES['CustomTimestampingFixedWindowsWindowFn'] = CustomTimestampingFixedWindowsWindowFn
TRIGGER_NAMES = dict(beam_trigger.__dict__)
TRIGGER_NAMES['Default'] = beam_trigger.DefaultTrigger
TRIGGER_NAMES['Never'] = beam_trigger._Never

MODES = {'discarding': 1, 'accumulating': 2, 'retracting': 3}


def parse_spec(spec):
    """-> (window_fn, trigger_fn, accumulation_mode, timestamp_combiner, lateness)."""
    window_fn = _parse_fn(spec.get('window_fn', 'GlobalWindows'), WINDOW_NAMES)
    trigger_fn = _parse_fn(spec.get('trigger_fn', 'Default'), TRIGGER_NAMES)
    mode = MODES[spec.get('accumulation_mode', 'accumulating').lower()]
    combiner = getattr(TimestampCombiner, spec.get('timestamp_combiner', 'OUTPUT_AT_EOW').upper())
    lateness = spec.get('allowed_lateness', 0)
    return window_fn, trigger_fn, mode, combiner, lateness


def closing_of(spec):
    """The spec's ``triggers.closing.ClosingRules``."""
    from apache_beam.portability.api import beam_runner_api_pb2 as pb

    return ClosingRules(
        pb.ClosingBehavior.Enum.Value(spec.get('closing_behavior', 'emit_always').upper()),
        pb.OnTimeBehavior.Enum.Value(spec.get('on_time_behavior', 'fire_always').upper()),
    )


def pane_description(wv):
    """The attributes transcripts match on (as Beam's _windowed_value_info)."""
    (window,) = wv.windows
    values, retraction = unwrap(wv.value)
    return {
        'window': [int(window.start), int(window.max_timestamp())],
        'values': sorted(values),
        'timestamp': int(wv.timestamp),
        'index': wv.pane_info.index,
        'nonspeculative_index': wv.pane_info.nonspeculative_index,
        'early': wv.pane_info.timing == PaneInfoTiming.EARLY,
        'late': wv.pane_info.timing == PaneInfoTiming.LATE,
        'final': wv.pane_info.is_last,
        'retraction': retraction,
    }


class TranscriptFailure(AssertionError):
    pass


def run_transcript(spec):
    """Runs ``spec`` against our driver; raises TranscriptFailure on mismatch.

    Returns the list of all pane descriptions produced (for inspection)."""
    window_fn, trigger_fn, mode, combiner, lateness = parse_spec(spec)
    spec_obj = ReduceSpec(window_fn, trigger_fn, mode, combiner, lateness, closing=closing_of(spec))
    clock = ManualClock(0)
    reducer = spec_obj.new_reducer(clock=clock)
    watermark = MIN_TIMESTAMP
    output = []
    everything = []

    def take(wvs):
        descs = [pane_description(wv) for wv in wvs]
        everything.extend(descs)
        output.extend(descs)

    for line in spec['transcript']:
        ((action, params),) = line.items()
        if action != 'expect' and output:
            raise TranscriptFailure('Unexpected output: %s before %s: %s' % (output, action, params))
        if action == 'input':
            bundle = [WindowedValue(t, t, window_fn.assign(WindowFn.AssignContext(t, t))) for t in params]
            take(reducer.process(bundle, watermark))
            take(reducer.advance_watermark(watermark))
        elif action == 'watermark':
            watermark = params
            take(reducer.advance_watermark(watermark))
        elif action == 'clock':
            take(reducer.advance_processing_time(params))
        elif action == 'expect':
            _consume_expected(output, params)
        elif action == 'state':
            # Beam's trigger-driver harness does not check state either; the only
            # Beam transcript using it (garbage_collection) is self-contradictory.
            pass
        else:
            raise TranscriptFailure('Unknown action: %s' % action)
    if output:
        raise TranscriptFailure('Unexpected output: %s' % output)
    return everything


def transcript_inputs(spec):
    """Every timestamp the transcript inputs, in order."""
    return [t for line in spec['transcript'] for action, ts in line.items() if action == 'input' for t in ts]


def run_batch_transcript(spec):
    """Runs the transcript's input as a bounded GroupByKey of one key
    (``triggers.batch.group_by_window``) and matches every pane against
    ``batch_expect``; raises TranscriptFailure on a mismatch."""
    from apache_beam.transforms.core import Windowing

    window_fn, trigger_fn, mode, combiner, lateness = parse_spec(spec)
    windowing = Windowing(window_fn, trigger_fn, mode, combiner, lateness)
    bundle = [WindowedValue(t, t, window_fn.assign(WindowFn.AssignContext(t, t))) for t in transcript_inputs(spec)]
    output = [
        pane_description(wv.with_value(wv.value[1])) for wv in group_by_window(windowing, 'k', bundle, closing_of(spec))
    ]
    everything = list(output)
    _consume_expected(output, spec['batch_expect'])
    if output:
        raise TranscriptFailure('Unexpected output: %s' % output)
    return everything


def run_transcript_on_beam(spec):
    """Runs ``spec`` against Beam's Python GeneralTriggerDriver, exactly as
    Beam's TriggerDriverTranscriptTest does (used to pin down divergences)."""
    window_fn, trigger_fn, mode, combiner, lateness = parse_spec(spec)

    class _Clock(object):
        def time(self):
            return 0

    from apache_beam.transforms.core import Windowing

    driver = beam_trigger.GeneralTriggerDriver(Windowing(window_fn, trigger_fn, mode, combiner, lateness), _Clock())
    state = beam_trigger.InMemoryUnmergedState()
    watermark = MIN_TIMESTAMP
    output = []

    def fire():
        fired = state.get_and_clear_timers(watermark)
        while fired:
            for w, (name, dom, ts, _) in fired:
                output.extend(pane_description(wv) for wv in driver.process_timer(w, name, dom, ts, state))
            fired = state.get_and_clear_timers(watermark)

    for line in spec['transcript']:
        ((action, params),) = line.items()
        if action != 'expect' and output:
            raise TranscriptFailure('Unexpected output: %s' % output)
        if action == 'input':
            bundle = [WindowedValue(t, t, window_fn.assign(WindowFn.AssignContext(t, t))) for t in params]
            output.extend(pane_description(wv) for wv in driver.process_elements(state, bundle, watermark, watermark))
            fire()
        elif action == 'watermark':
            watermark = params
            fire()
        elif action == 'expect':
            _consume_expected(output, params)
    if output:
        raise TranscriptFailure('Unexpected output: %s' % output)


def _consume_expected(output, expected_outputs):
    """Removes each expected output from `output`; fails on one not there."""
    for expected in expected_outputs:
        for candidate in output:
            if all(candidate[k] == expected[k] for k in candidate if k in expected):
                output.remove(candidate)
                break
        else:
            raise TranscriptFailure('Unmatched output %s in %s' % (expected, output))
