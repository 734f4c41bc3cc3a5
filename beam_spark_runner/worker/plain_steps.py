"""The steps of a plain-Python stage, each over runs (see runs.py).

Each step mirrors what Beam's SDK harness does for the same transform:
- ParDo of a `CallableWrapperDoFn` (Map, FlatMap, Filter, MapTuple, ...) or
  of a DoFn class with only `process` and the lifecycle methods (setup,
  start_bundle, finish_bundle, teardown; which ParDos qualify:
  worker/plain_callables.py):
  outputs keep the input's timestamp, windows and pane, except a
  `TimestampedValue` (re-windowed with the input's WindowFn), a
  `WindowedValue` (taken as is) and a `TaggedOutput` (routed by tag; a tag
  the transform does not declare is dropped), as `common._OutputHandler`
  does; a callable taking a WindowParam is called once per window; a DoFn
  class's `start_bundle` may output nothing, its `finish_bundle` only
  `WindowedValue`s (optionally tagged), and a `process` that returns (not
  yields) a str, bytes or dict fails, as in the harness;
- WindowInto: new windows from the WindowFn per input window, timestamp
  kept, pane reset, as the harness's WindowIntoDoFn;
- lifted pre-combine: one accumulator per (window, key) fed with the
  CombineFn's own `add_inputs`, compacted on output, the table bounded as in
  Beam's `PGBKCVOperation`;
- merge / extract / convert / grouped-values: `PhasedCombineFnExecutor`.
"""

import collections
import functools
import itertools
import operator
import traceback

from apache_beam.transforms import core, window
from apache_beam.transforms.combiners import CountCombineFn, PhasedCombineFnExecutor, curry_combine_fn
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from windowing.existing import ExistingWindows
from beam_spark_runner.worker.record_counting import RecordCountingCombineFn
from beam_spark_runner.worker.runs import GLOBAL_TEMPLATE

PARDO = "pardo"
ASSIGN_WINDOWS = "assign_windows"
PRECOMBINE = "precombine"
FLATTEN = "flatten"
# Outputs the harness treats specially (common._OutputHandler).
_SPECIAL_OUTPUTS = (core.pvalue.TaggedOutput, WindowedValue, TimestampedValue)
# Output types that are certainly not special: checked in C over a run.
_PLAIN_TYPES = frozenset([str, bytes, int, float, bool, tuple, list, dict, set, frozenset, type(None)])
# A ParDo hands its outputs on in pieces of about this many values.
OUTPUT_PIECE = 8192
# Beam's PGBKCVOperation bounds its table the same way.
MAX_PRECOMBINE_KEYS = 100 * 1000
# Values buffered per key before they are added to the accumulators.
PRECOMBINE_BUFFER = 1 << 19


class StepFailed(RuntimeError):
    """User code of a step raised; the message carries its traceback."""


class Step:
    """Base of the executors: `process(runs)` and `finish()` return
    iterables of (output pcollection, runs) (a ParDo's `process` is a
    generator)."""

    # At most one output per input value and window (WindowInto, combiner
    # phases): the stage hands such a step its input whole, unchunked.
    bounded_output = True

    def __init__(self, spec, scoped):
        self.spec = spec
        self._scoped = scoped
        # The harness's rule (operations.DoOperation): the main output is the
        # only output, else the one tagged 'None'.
        self._tags = dict(spec.outputs)
        if len(spec.outputs) == 1:
            self._main = spec.outputs[0][1]
        else:
            self._main = self._tags.get("None")

    def setup(self):
        """Once per step object, before its first bundle."""

    def start_bundle(self):
        """At the start of every bundle (a PlainStageRunner.run)."""

    def finish(self):
        """At the end of every bundle: [(output pcollection, runs)]."""
        return ()

    def teardown(self):
        pass

    def _failed(self):
        return StepFailed("%s\n[while running %r]" % (traceback.format_exc().rstrip(), self.spec.name))


def _check_not_returned_whole(output):
    """The harness's rule for a DoFn class's process that returns (rather
    than yields) a str, bytes or dict."""
    if isinstance(output, (str, bytes, dict)):
        raise TypeError(
            "Returning a %s from a ParDo or FlatMap is not allowed. Please use "
            "list(%r) if you really want this behavior." % (type(output).__name__, output)
        )


class ParDoStep(Step):
    bounded_output = False  # any number of outputs per value

    def __init__(self, spec, plain, windowfn, scoped):
        super().__init__(spec, scoped)
        self._plain = plain
        self._per_window = "window" in plain.params.values()
        self._windowfn = windowfn
        self._check_output = plain.check_first_output
        self._dofn = plain.dofn
        self._timestamp_only_windowfn = type(windowfn) in _TIMESTAMP_ONLY_WINDOWFNS
        # Set once one value has made OUTPUT_PIECE outputs (see _results).
        self._slice_outputs = False

    def setup(self):
        if self._dofn is not None:
            self._call(self._dofn.setup)

    def start_bundle(self):
        if self._dofn is not None:
            self._call(self._dofn.start_bundle, outputs_allowed=False)

    def teardown(self):
        if self._dofn is not None:
            self._call(self._dofn.teardown)

    def finish(self):
        """A DoFn class's finish_bundle outputs, as the harness's
        `finish_bundle_outputs`: WindowedValues only, TaggedOutput routed."""
        if self._dofn is None:
            return ()
        outputs = collections.defaultdict(list)
        with self._scoped:
            try:
                for r in self._dofn.finish_bundle() or ():
                    target, r = self._target_of(r)
                    if not isinstance(r, WindowedValue):
                        raise RuntimeError("Finish Bundle should only output WindowedValue type but got %s" % type(r))
                    outputs[target].append((r, [r.value]))
            except Exception:
                raise self._failed() from None
        return [(pcoll, out) for pcoll, out in outputs.items() if pcoll is not None]

    def _target_of(self, r):
        """(output pcollection, value) of an output: a TaggedOutput goes to
        its tag's PCollection (None for a tag the transform does not
        declare: dropped), anything else to the main output."""
        if not isinstance(r, core.pvalue.TaggedOutput):
            return self._main, r
        if not isinstance(r.tag, str):
            raise TypeError("In %s, tag %s is not a string" % (self.spec.name, r.tag))
        return self._tags.get(r.tag), r.value

    def _call(self, method, outputs_allowed=True):
        with self._scoped:
            try:
                results = method()
                if results is not None and not outputs_allowed:
                    # The harness's rule (_OutputHandler.start_bundle_outputs).
                    raise RuntimeError("Start Bundle should not output any elements but got %s" % results)
            except Exception:
                raise self._failed() from None

    def process(self, runs):
        """Yields [(output pcollection, runs)] pieces of the outputs of
        `runs`, one whenever OUTPUT_PIECE values are held: a value making
        many outputs (a tick's events, a file's records) is handed on in
        pieces rather than held whole. Generated lazily: the caller consumes
        (or closes) it before its next call."""
        outputs, held = collections.defaultdict(list), 0
        with self._scoped:
            try:
                for template, values in runs:
                    if self._per_window and len(template.windows) != 1:
                        # As DoFnRunner: once per window, without the pane.
                        templates = [WindowedValue(None, template.timestamp, (w,)) for w in template.windows]
                    else:
                        templates = (template,)
                    for t in templates:
                        for results in self._results(t, values):
                            held += len(results)
                            self._route(t, results, outputs)
                            if held >= OUTPUT_PIECE:
                                yield from _pieces(outputs)
                                outputs, held = collections.defaultdict(list), 0
            except StepFailed:
                raise
            except Exception:
                raise self._failed() from None
        yield from _pieces(outputs)

    def _results_of_whole_elements(self, template, values, bound, whole):
        """`_results` for a callable taking a WindowedValueParam: called with
        each value's own WindowedValue (the template's metadata)."""
        plain = self._plain
        call = plain.single or plain.process
        with_value = template.with_value
        if plain.whole_positional:

            def call_one(v):
                return call(v, with_value(v))

        else:

            def call_one(v):
                return call(v, **bound, **dict.fromkeys(whole, with_value(v)))

        checked = ()
        if self._check_output and values:
            self._check_output = False
            first = call_one(values[0])
            _check_not_returned_whole(first)
            checked, values = (first,), values[1:]
        results = []
        for out in itertools.chain(checked, map(call_one, values)):
            if plain.single is not None:
                results.append(out)
            elif out is not None:
                results.extend(out)
            if len(results) >= OUTPUT_PIECE:
                yield results
                results = []
        if results:
            yield results

    def _results(self, template, values):
        """Yields lists of the outputs of `values` (all with `template`'s
        metadata as input), each list about OUTPUT_PIECE long or shorter."""
        plain = self._plain
        if plain.params:
            bound = {
                name: (
                    template.timestamp
                    if kind == "timestamp"
                    else template.windows[0]
                    if kind == "window"
                    else template.pane_info
                )
                for name, kind in plain.params.items()
                if kind != "windowed_value"
            }
            whole = [name for name, kind in plain.params.items() if kind == "windowed_value"]
            if whole:
                # The only parameter that differs from value to value.
                yield from self._results_of_whole_elements(template, values, bound, whole)
                return
        else:
            bound = None
        if plain.single is not None:
            single = plain.single
            yield [single(v, **bound) for v in values] if bound else [single(v) for v in values]
            return
        results = []
        extend = results.extend
        process, args, kwargs = plain.process, plain.args, plain.kwargs
        if bound:
            call = functools.partial(process, **bound)
        elif args or kwargs:
            call = functools.partial(_with_extra_args, process, args, kwargs)
        else:
            call = process
        checked = ()
        if self._check_output and values:
            self._check_output = False
            first = call(values[0])
            _check_not_returned_whole(first)
            checked, values = (first,), values[1:]
        for out in itertools.chain(checked, map(call, values)):
            if out is None:
                continue
            if not self._slice_outputs:
                before = len(results)
                extend(out)
                if len(results) < OUTPUT_PIECE:
                    continue
                # One value made a whole piece: from now on, take its
                # outputs a piece at a time.
                self._slice_outputs = len(results) - before >= OUTPUT_PIECE
                yield results
                results = []
                extend = results.extend
                continue
            it = iter(out)
            while True:
                extend(itertools.islice(it, OUTPUT_PIECE - len(results)))
                if len(results) < OUTPUT_PIECE:
                    break
                yield results
                results = []
                extend = results.extend
        if results:
            yield results

    def _route(self, template, results, outputs):
        if not results:
            return
        if _PLAIN_TYPES.issuperset(map(type, results)):
            outputs[self._main].append((template, results))
            return
        self._split_special(template, results, outputs)

    def _split_special(self, template, results, outputs):
        """Routes TaggedOutput / TimestampedValue / WindowedValue outputs as
        common._OutputHandler does; plain outputs keep the template.
        TimestampedValues with equal timestamps (and target) share one run
        when the WindowFn assigns windows from the timestamp alone."""
        plain = []
        shared = {} if self._timestamp_only_windowfn else None  # (target, timestamp) -> run
        # The previous TimestampedValue's run: a DoFn emitting many values
        # with one Timestamp object skips hashing it per value.
        last_ts = last_target = last_values = None
        # Main-output TimestampedValues: id(timestamp) -> (timestamp, values
        # of its run). A DoFn that reuses a few Timestamp objects (on time
        # and late, say) alternates between runs at the cost of an int hash,
        # not Timestamp's Python __hash__ and __eq__; the entry holds the
        # timestamp, so its id cannot be reused while the dict lives.
        by_id, main_ts, main_values = {}, None, None
        main = self._main
        for r in results:
            if type(r) is TimestampedValue:
                if shared is not None:
                    ts = r.timestamp
                    if ts is not main_ts:
                        hit = by_id.get(id(ts))
                        if hit is None:
                            hit = by_id[id(ts)] = (ts, self._shared_run(shared, main, ts, r.value, template, outputs))
                        main_ts, main_values = ts, hit[1]
                    main_values.append(r.value)
                    continue
                target = main
            elif not isinstance(r, _SPECIAL_OUTPUTS):
                plain.append(r)
                continue
            else:
                target, r = self._target_of(r)
            if isinstance(r, WindowedValue):
                wv = r
                if len(template.windows) != 1:
                    wv.windows *= len(template.windows)
            elif isinstance(r, TimestampedValue):
                if shared is not None:
                    ts = r.timestamp
                    if ts is not last_ts or target is not last_target:
                        last_values = self._shared_run(shared, target, ts, r.value, template, outputs)
                        last_ts, last_target = ts, target
                    last_values.append(r.value)
                    continue
                assign = window.WindowFn.AssignContext(r.timestamp, r.value)
                wv = WindowedValue(r.value, r.timestamp, self._windowfn.assign(assign))
                if len(template.windows) != 1:
                    wv.windows *= len(template.windows)
            else:
                wv = template.with_value(r)
            outputs[target].append((wv, [wv.value]))
        if plain:
            outputs[self._main].append((template, plain))

    def _shared_run(self, shared, target, ts, value, template, outputs):
        """The values list of the run for `target` at timestamp `ts` (equal
        timestamps share it), created on first use."""
        run = shared.get((target, ts))
        if run is None:
            windows = self._windowfn.assign(window.WindowFn.AssignContext(ts, value))
            run = shared[(target, ts)] = (WindowedValue(None, ts, windows * len(template.windows)), [])
            outputs[target].append(run)
        return run[1]


# WindowFns whose assign() reads only the timestamp and window (not the
# element): one assignment serves a whole run. Exact types: a subclass may
# override.
_TIMESTAMP_ONLY_WINDOWFNS = (
    window.GlobalWindows,
    window.FixedWindows,
    window.SlidingWindows,
    window.Sessions,
    ExistingWindows,
)


class AssignWindowsStep(Step):
    """WindowInto, as the harness's WindowIntoDoFn: per input window, the
    element's new windows from the WindowFn, same timestamp, default pane."""

    def __init__(self, spec, windowfn, scoped):
        super().__init__(spec, scoped)
        self._windowfn = windowfn
        self._per_run = type(windowfn) in _TIMESTAMP_ONLY_WINDOWFNS
        self._fixed = FixedWindowAssigner(windowfn) if type(windowfn) is window.FixedWindows else None

    def process(self, runs):
        out = []
        assign = self._windowfn.assign
        with self._scoped:
            try:
                for template, values in runs:
                    windows = template.windows
                    if len(windows) == 1:
                        self._assign(assign, template.timestamp, windows[0], values, out)
                    else:  # once per window, as for any WindowParam DoFn
                        for w in windows:
                            self._assign(assign, template.timestamp, w, values, out)
            except Exception:
                raise self._failed() from None
        return [(self._main, out)] if out else []

    def _assign(self, assign, timestamp, w, values, out):
        if self._fixed is not None:
            out.append((WindowedValue(None, timestamp, self._fixed.at(timestamp.micros)), values))
            return
        if self._per_run:
            new = assign(window.WindowFn.AssignContext(timestamp, element=values[0], window=w))
            out.append((WindowedValue(None, timestamp, new), values))
            return
        for v in values:
            new = assign(window.WindowFn.AssignContext(timestamp, element=v, window=w))
            out.append((WindowedValue(None, timestamp, new), [v]))


class FixedWindowAssigner:
    """FixedWindows.assign in integer microseconds, each window made once:
    Beam's own does its arithmetic in Timestamp objects, about 30 us an
    element, most of a WindowInto's cost. Assigns what Beam assigns (the
    window of `start = t - (t - offset) mod size`, floor modulo)."""

    def __init__(self, windowfn):
        self._size = windowfn.size.micros
        self._offset = windowfn.offset.micros
        self._windows = {}

    def __call__(self, context):
        """As WindowFn.assign."""
        return self.at(context.timestamp.micros)

    def at(self, micros):
        """The windows of an element at `micros`."""
        start = micros - (micros - self._offset) % self._size
        found = self._windows.get(start)
        if found is None:
            if len(self._windows) > 4096:
                self._windows.clear()
            found = self._windows[start] = [
                window.IntervalWindow(Timestamp(micros=start), Timestamp(micros=start + self._size))
            ]
        return list(found)


_first = operator.itemgetter(0)


def _pieces(outputs):
    return [(pcoll, out) for pcoll, out in outputs.items() if pcoll is not None]


def _with_extra_args(process, args, kwargs, value):
    return process(value, *args, **kwargs)


class PrecombineStep(Step):
    """Beam's lifted pre-combine over runs. For Beam's own CountCombineFn
    (Count.PerKey, Count.PerElement), whose accumulator is the number of
    inputs and which never looks at them, the buffer counts inputs per key
    (collections.Counter, in C) instead of listing them, and a fold adds
    each count to its accumulator: what CountCombineFn.add_inputs computes.

    A RecordCountingCombineFn (a streaming lifted combine) is unwrapped: the
    table folds with the user's CombineFn (and its fast paths), counts the
    inputs beside each accumulator, and outputs (count, accumulator) as the
    wrapper would."""

    def __init__(self, spec, combine_fn, windowing, scoped):
        super().__init__(spec, scoped)
        self._counts_records = isinstance(combine_fn, RecordCountingCombineFn)
        if self._counts_records:
            combine_fn = combine_fn.inner
        self._fn = curry_combine_fn(combine_fn, [], {})
        # Exact type: a subclass may count differently.
        self._counting = type(self._fn) is CountCombineFn
        self._default_windowing = windowing.is_default()
        tsc = windowing.timestamp_combiner
        self._timestamp_combiner = (
            None
            if tsc == window.TimestampCombiner.OUTPUT_AT_EOW
            else window.TimestampCombiner.get_impl(tsc, windowing.windowfn)
        )
        self._compact = None if type(self._fn).compact is core.CombineFn.compact else self._fn.compact
        # window -> {key: [accumulator, timestamp, inputs]} (default windowing: the
        # one window None). By window first: a window's hash is Python code.
        self._table, self._entries = {}, 0
        # Default windowing: key -> [values]; else window -> {key: [values]}.
        self._buffer = self._new_buffer()
        self._timestamps = {}
        self._buffered = 0

    def _new_buffer(self):
        if not self._default_windowing:
            return {}
        return collections.Counter() if self._counting else collections.defaultdict(list)

    def _per_window(self, batch):
        """(window, {key: values}) of a buffer; default windowing: (None, buffer)."""
        return ((None, batch),) if self._default_windowing else batch.items()

    def setup(self):
        with self._scoped:
            self._fn.setup()

    def start_bundle(self):
        # Empty already unless the previous bundle failed half-way: a retried
        # task in the same worker must not see its accumulators.
        self._table, self._entries = {}, 0
        self._buffer, self._timestamps, self._buffered = self._new_buffer(), {}, 0

    def process(self, runs):
        """Buffers values per (window, key); folds them into accumulators
        once PRECOMBINE_BUFFER values are buffered, so that `add_inputs` is
        called once per key per fold rather than once per key per block."""
        batch, timestamps = self._buffer, self._timestamps
        combine_ts = self._timestamp_combiner
        counting = self._counting
        for template, values in runs:
            self._buffered += len(values) * len(template.windows)
            if self._default_windowing:
                if counting:
                    batch.update(map(_first, values))
                    continue
                for key, value in values:
                    batch[key].append(value)
                continue
            for w in template.windows:
                # Keyed by window first: a window's hash is Python code,
                # paid once per run rather than once per value.
                per_key = batch.get(w)
                if per_key is None:
                    per_key = batch[w] = collections.Counter() if counting else collections.defaultdict(list)
                if counting:
                    per_key.update(map(_first, values))
                else:
                    for key, value in values:
                        per_key[key].append(value)
                if combine_ts is not None:
                    for key, _ in values:
                        prev = timestamps.get((w, key))
                        timestamps[(w, key)] = (
                            template.timestamp if prev is None else combine_ts.combine(prev, template.timestamp)
                        )
        if self._buffered < PRECOMBINE_BUFFER:
            return []
        out = self._fold()
        return [(self._main, out)] if out else []

    def _fold(self):
        """Adds the buffered values to the table; returns evicted runs."""
        batch, timestamps = self._buffer, self._timestamps
        self._buffer, self._timestamps = self._new_buffer(), {}
        self._buffered = 0
        out = []
        table, fn, combine_ts = self._table, self._fn, self._timestamp_combiner
        counting = self._counting
        with self._scoped:
            try:
                for w, per_key in self._per_window(batch):
                    entries = table.get(w)
                    if entries is None:
                        entries = table[w] = {}
                    for key, vals in per_key.items():
                        entry = entries.get(key)
                        if entry is None:
                            if self._entries >= MAX_PRECOMBINE_KEYS:
                                out.extend(self._evict())
                                entries = table.setdefault(w, {})  # eviction may have dropped w
                            entry = entries[key] = [fn.create_accumulator(), None, 0]
                            self._entries += 1
                        if counting:  # vals: how many inputs
                            entry[0] += vals
                            entry[2] += vals
                        else:
                            entry[0] = fn.add_inputs(entry[0], vals)
                            entry[2] += len(vals)
                        if timestamps:  # a timestamp combiner other than end of window
                            ts = timestamps.get((w, key))
                            if ts is not None:
                                entry[1] = ts if entry[1] is None else combine_ts.combine(entry[1], ts)
            except Exception:
                raise self._failed() from None
        return out

    def _evict(self):
        """Outputs and forgets the oldest tenth of the table (oldest windows
        first, their oldest keys first), as Beam does."""
        left, evicted = max(1, self._entries // 10), {}
        for w in list(self._table):
            entries = self._table[w]
            keys = list(itertools.islice(entries, left))
            evicted[w] = {key: entries.pop(key) for key in keys}
            left -= len(keys)
            if not entries:
                del self._table[w]
            if left <= 0:
                break
        self._entries -= sum(len(entries) for entries in evicted.values())
        return self._runs(evicted)

    def finish(self):
        evicted = self._fold()
        with self._scoped:
            try:
                out = evicted + self._runs(self._table)
            except Exception:
                raise self._failed() from None
        self._table, self._entries = {}, 0
        return [(self._main, out)] if out else []

    def _runs(self, table):
        """Runs of a table's (key, accumulator) values. Accumulators whose
        pane timestamp is their window's end share one run per window (one
        template, not one per key)."""
        compact, counts_records = self._compact, self._counts_records

        def value_of(acc, inputs):
            value = acc if compact is None else compact(acc)
            return (inputs, value) if counts_records else value

        if self._default_windowing:
            values = [
                (key, value_of(acc, inputs)) for entries in table.values() for key, (acc, _, inputs) in entries.items()
            ]
            return [(GLOBAL_TEMPLATE, values)] if values else []
        out = []
        for w, entries in table.items():
            shared = None
            for key, (acc, timestamp, inputs) in entries.items():
                value = value_of(acc, inputs)
                if self._timestamp_combiner is None or timestamp is None:
                    if shared is None:
                        shared = (WindowedValue(None, w.max_timestamp(), (w,)), [])
                        out.append(shared)
                    shared[1].append((key, value))
                else:
                    out.append((WindowedValue(None, timestamp, (w,)), [(key, value)]))
        return out

    def teardown(self):
        with self._scoped:
            self._fn.teardown()


class CombinePhaseStep(Step):
    """Merge / extract / convert / grouped-values: one call per element."""

    def __init__(self, spec, combine_fn, scoped):
        super().__init__(spec, scoped)
        self._executor = PhasedCombineFnExecutor(spec.kind, combine_fn, [], {})

    def setup(self):
        with self._scoped:
            self._executor.combine_fn.setup()

    def process(self, runs):
        apply = self._executor.apply
        with self._scoped:
            try:
                out = [(template, [(k, apply(v)) for k, v in values]) for template, values in runs]
            except Exception:
                raise self._failed() from None
        return [(self._main, out)]

    def teardown(self):
        with self._scoped:
            self._executor.combine_fn.teardown()


class FlattenStep(Step):
    """A Flatten of one input inside a stage (Beam's fusion leaves one per
    reader where a Flatten's input and output coders differ, e.g. in
    `assert_that`): the values pass unchanged; the output port's coder
    encodes them."""

    def process(self, runs):
        return [(self._main, runs)]
