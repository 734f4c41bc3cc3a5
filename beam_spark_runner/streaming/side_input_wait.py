"""Side inputs of a keyed streaming operator: which rows are side input,
which side windows a main-input element waits for, and when they are ready.

`SideInputs` is one operator's side-input configuration (built once per
worker); `WaitingForSides` is one key-group's side data, side watermarks and
waiting main-input elements during one micro-batch, saved in the key-group's
state between batches. No Spark here.
"""

import collections

from apache_beam.portability.api import beam_runner_api_pb2

from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.window_expiry import main_input_strategies
from beam_spark_runner.worker import context
from beam_spark_runner.worker.side_inputs import latest_window_end_us
from windowing.timestamps import MIN_US as MIN_MICROS


class WaitingForSides:
    """One key-group's side inputs during one batch of a keyed operator: the
    side data and side watermarks seen so far, the main-input entries waiting
    for their side windows (`SideInputs.pending`), and the harness they are
    installed into, only before user code runs and only when changed.

    With `collect` (a stateless stage: no timer or residual reads side data
    later), side windows no main-input element can need any more are
    dropped as the watermark passes them (`SideInputs.expiry`), so the side
    data held stays bounded in a long-running pipeline; a stateful stage
    calls `collect` itself once a step's timers fired, a splittable stage
    once its due residuals ran, naming what its residuals read. A main-input element
    that arrives needing a dropped window is droppably late (behind the
    watermark by more than its allowed lateness): it is dropped and counted
    (`dropped`), never run against a side input that lost its data."""

    def __init__(self, sides, saved, harness, collect=False):
        self._sides = sides
        self._harness = harness
        self._collect = collect
        # dest -> [(latest window end micros or None: kept for good, encoded row)]
        self.side = {
            dest: [row if isinstance(row, tuple) else (None, row) for row in rows]
            for dest, rows in saved.get("side", {}).items()
        }
        self.side_wm = saved.get("side_wm", {})
        self.side_collected = saved.get("side_collected", {})  # dest -> windows ending before this are gone
        self.pending = saved.get("pending", [])
        self.dropped = 0
        self._stale = True
        # dest -> LatestFiring, for side inputs whose view is their latest
        # trigger firing; a new one's clock starts at the last step's time.
        self.side_pt = saved.get("side_pt", MIN_MICROS)
        saved_firings = saved.get("triggered", {})
        self._firings = {
            dest: LatestFiring(spec, impl, saved_firings.get(dest), self.side_pt)
            for dest, (spec, impl) in getattr(sides, "triggered", {}).items()
        }

    def take(self, rows, seq):
        """DATA rows of one seq: side rows are kept (or go through their
        trigger), main rows wait."""
        for row in rows:
            dest = row.dest
            firing = self._firings.get(dest)
            if firing is not None:
                if firing.take(row.payload, self.side_wm.get(dest, MIN_MICROS)):
                    self._show_latest(dest)
            elif dest in self._sides.dests:
                end = self._sides.window_end(dest, row.payload)
                self.side.setdefault(dest, []).append((end, row.payload))
                self._stale = True
            else:
                self.pending.append(self._sides.pending(row, seq))

    def advance(self, step):
        self._sides.advance(self.side_wm, step)
        self.side_pt = max(self.side_pt, step[1])
        for dest, firing in self._firings.items():
            if firing.advance(self.side_wm.get(dest, MIN_MICROS), step[1]):
                self._show_latest(dest)
        if self._collect:
            self.collect(step[0])

    def _show_latest(self, dest):
        """What the main input sees of `dest` is its latest firing."""
        self.side[dest] = [(None, self._firings[dest].pane)]
        self._stale = True

    def collect(self, wm, also_needed=()):
        """Drops the side rows of windows ending before wm - the main input's
        allowed lateness, except those a waiting element or an entry of
        `also_needed` ({side dest: earliest side window end it reads}: a
        splittable stage's residuals) still needs. A stateful stage calls it
        itself, after the step's timers fired and its expired windows went:
        a live window's timers map to side windows ending at or after its
        own end, which is not before the horizon."""
        needed = [_earliest_needs(p) for p in self.pending]
        needed.extend(also_needed)
        for dest, lateness in self._sides.expiry.items():
            horizon = min([wm - lateness] + [needs[dest] for needs in needed])
            if horizon <= self.side_collected.get(dest, MIN_MICROS):
                continue
            self.side_collected[dest] = horizon
            rows = self.side.get(dest, [])
            kept = [r for r in rows if r[0] is None or r[0] >= horizon]
            if len(kept) < len(rows):
                self.side[dest] = kept
                self._stale = True

    def ready_bundles(self, input_index):
        """[(seq, bundle)] of the waiting entries whose side windows are now
        ready, no longer waiting; the side data is installed if any."""
        if self.side_collected:
            kept = [
                p
                for p in self.pending
                if all(_earliest_needs(p)[dest] >= horizon for dest, horizon in self.side_collected.items())
            ]
            self.dropped += len(self.pending) - len(kept)
            self.pending = kept
        fired = {dest: firing.pane is not None for dest, firing in self._firings.items()}
        ready, self.pending = self._sides.split_ready(self.pending, self.side_wm, fired)
        if ready:
            self.install()
        return _bundles_by_seq(ready, input_index)

    def install(self):
        if self._stale:
            self._harness.install_side_inputs(
                self._sides.state_entries({dest: [row for _, row in rows] for dest, rows in self.side.items()})
            )
            self._stale = False

    def hold(self):
        """Earliest timestamp (micros) of a waiting element, or None."""
        return min((p[3] for p in self.pending), default=None)

    def saved(self):
        saved = {
            "side": self.side,
            "side_wm": self.side_wm,
            "side_collected": self.side_collected,
            "pending": self.pending,
        }
        if self._firings:
            saved["triggered"] = {dest: firing.saved() for dest, firing in self._firings.items()}
            saved["side_pt"] = self.side_pt
        return saved

    def is_empty(self):
        return (
            not self.side
            and not self.side_wm
            and not self.pending
            and all(firing.is_empty() for firing in self._firings.values())
        )


class LatestFiring:
    """An unbounded side input in the global window with a trigger other than
    the default: Beam's model gives the main input the elements of the side
    input's latest trigger firing (the "slowly updating side input" pattern:
    `Repeatedly(AfterProcessingTime(...))` over a PeriodicImpulse). The side
    input's elements go through the reduce driver (`triggers/`) as one key,
    under the side input's own trigger, accumulation mode and allowed
    lateness, at its watermark and the batch's processing time; each pane
    replaces what the main input sees (ACCUMULATING: everything so far;
    DISCARDING: what arrived since the previous firing). A main-input element
    waits until the first firing. Every key-group gets every side row and
    the same time steps, so all compute the same panes."""

    def __init__(self, spec, element_impl, saved=None, now_us=MIN_MICROS):
        from triggers.state import ManualClock

        self._impl = element_impl
        self._clock = ManualClock.at_us(saved["pt"] if saved else now_us)
        self._reducer = spec.restore(saved["reducer"], self._clock) if saved else spec.new_reducer(clock=self._clock)
        self.pane = saved["pane"] if saved else None  # encoded elements of the latest firing
        # Blocks that arrived before any time step: their processing time is
        # not known yet (a processing-time trigger would count from the
        # beginning of time); they join at the first step's time.
        self._early = list(saved.get("early", ())) if saved else []

    def take(self, block, wm):
        """Side elements (an encoded block) at side watermark `wm`; True if a pane fired."""
        if self._clock.micros() == MIN_MICROS:
            self._early.append(block)
            return False
        return self._process(block, wm)

    def _process(self, block, wm):
        from beam_spark_runner.worker.grouping import decode_elements

        elements = [wv.with_value(encoded) for wv, encoded in decode_elements(block, self._impl)]
        return self._latest(self._reducer.process_us(elements, wm))

    def advance(self, wm, pt):
        """The side watermark and processing time move; True if a pane fired."""
        panes = self._reducer.advance_processing_time_us(pt)
        early, self._early = self._early, []
        fired = any([self._process(block, wm) for block in early])
        panes += self._reducer.advance_watermark_us(wm)
        return self._latest(panes) or fired

    def _latest(self, panes):
        from triggers import is_retraction

        panes = [p for p in panes if not is_retraction(p.value)]
        if not panes:
            return False
        self.pane = b"".join(panes[-1].value)
        return True

    def saved(self):
        return {
            "reducer": self._reducer.snapshot(),
            "pt": self._clock.micros(),
            "pane": self.pane,
            "early": self._early,
        }

    def is_empty(self):
        return self.pane is None and not self._early and self._reducer.state.is_empty()


class SideInputs:
    """A stage's side inputs in streaming: which rows are side input, which
    side window a main-input element needs, and when that window is ready.

    A main input element may run once, for each side input, the side window
    its window maps to is complete: the side input's watermark passed the
    end of that window (a side input in the global window is complete at the
    end of its input). Guarantee: the DoFn sees every pane of the side
    window, never a part. Except `triggered`: an unbounded side input in the
    global window with a trigger other than the default, whose view is its
    latest trigger firing (`LatestFiring`); an element waits for its first."""

    def __init__(self, op, plan, descriptor):
        """`descriptor`: the stage's parsed ProcessBundleDescriptor."""
        from apache_beam.utils import proto_utils

        self._components = plan.components
        self._sides = []  # (dest, SideInputPlan, window mapping fn)
        # dest -> allowed lateness (micros) of the reading transform's main
        # input, for the side inputs whose windows can expire: Beam's default
        # window mapping (the side window holding the main window's end, so
        # a main element needs no side window that ends before its own
        # window) into non-global windows. A custom mapping may point
        # anywhere: its side data is kept.
        self.expiry = {}
        for side_dest, si in op.side_inputs:
            dest = R.dest_text(side_dest)  # as rows and saved state name it
            transform = descriptor.transforms[si.transform_id]
            payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.ParDoPayload)
            mapping = _window_mapping(payload.side_inputs[si.tag], si, plan.components)
            self._sides.append((dest, si, mapping))
            if _maps_via_end(mapping):
                strategies = main_input_strategies(descriptor, transform, payload)
                self.expiry[dest] = max((st.allowed_lateness for st in strategies), default=0) * 1000
        self.dests = frozenset(d for d, _, _ in self._sides)
        self._plans = {dest: si for dest, si, _ in self._sides}
        # dest -> (ReduceSpec of its windowing, element coder impl)
        self.triggered = triggered_side_inputs(op.side_inputs, plan.components)
        if self.triggered:
            # Before the stage's first bundle: its DoFns must read these side
            # inputs again in every bundle, not once per bundle processor.
            from beam_spark_runner.worker.beam_internals import reread_global_side_inputs_every_bundle

            reread_global_side_inputs_every_bundle()
        # Main inputs decode with the coder their rows carry: the element
        # coder, or for a keyed (stateful) stage the windowed KV coder.
        self._main_impls = {
            R.dest_text(d): context.coder_impl(plan.components, plan.element_coders.get(d) or plan.keyed_dests[d])
            for d in op.inputs
            if R.dest_text(d) not in self.dests
        }

    def pending(self, row, seq):
        """A main-input row as a pending entry: (dest, element, seq,
        timestamp micros, {side dest: latest side window end it needs},
        {side dest: earliest side window end it needs})."""
        timestamp, latest, earliest = self.needs(row.dest, row.payload)
        return (row.dest, row.payload, seq, timestamp, latest, earliest)

    def needs(self, dest, element):
        """What an encoded main-input element of `dest` reads: (its
        timestamp micros, {side dest: latest side window end its windows
        map to}, {side dest: earliest such end})."""
        wv = self._main_impls[dest].decode_nested(element)
        ends = {
            side_dest: [mapping(w).max_timestamp().micros for w in wv.windows] for side_dest, _, mapping in self._sides
        }
        return (wv.timestamp.micros, {d: max(e) for d, e in ends.items()}, {d: min(e) for d, e in ends.items()})

    def window_end(self, dest, row):
        """Latest window end (micros) of a side row, or None if it never expires."""
        if dest not in self.expiry:
            return None
        return latest_window_end_us(self._plans[dest], row, self._components)

    @staticmethod
    def advance(side_wm, step):
        """Applies a step's side-input watermarks ([seq, wm, pt, {dest: wm}])."""
        if len(step) > 2 and step[2]:
            for dest, wm in step[2].items():
                side_wm[dest] = max(side_wm.get(dest, MIN_MICROS), wm)

    @staticmethod
    def split_ready(pending, side_wm, fired=None):
        """(ready, still waiting) pending entries; `fired`: for the side
        inputs viewed at their latest firing, whether they fired yet. Such a
        side input is ready at its first firing, or once its watermark
        passed the window's end without one (the window is complete: the
        main input sees it empty, a singleton view its default)."""
        fired = fired or {}
        ready, waiting = [], []
        for p in pending:
            is_ready = all(fired.get(dest, False) or side_wm.get(dest, MIN_MICROS) > end for dest, end in p[4].items())
            (ready if is_ready else waiting).append(p)
        return ready, waiting

    def state_entries(self, side):
        """The harness state entries of the side input data seen so far."""
        from beam_spark_runner.worker.side_inputs import state_entries

        entries = []
        for dest, si, _ in self._sides:
            entries.extend(state_entries(si, side.get(dest, []), self._components))
        return entries


def triggered_side_inputs(side_inputs, components: bytes):
    """{dest text: (ReduceSpec, element coder impl)} of the side inputs viewed at
    their latest trigger firing: unbounded PCollections in the global window
    with a trigger other than the default. A bounded one completes with its
    input and is seen whole, as any other side window."""
    from apache_beam.portability import common_urns
    from triggers.driver import ReduceSpec

    ctx = context.components_context(components)  # parsed once per process and plan
    out = {}
    for side_dest, si in side_inputs:
        dest = R.dest_text(side_dest)
        pcoll = ctx.pcollections.get_proto_from_id(si.pcollection)
        strategy = ctx.windowing_strategies.get_proto_from_id(pcoll.windowing_strategy_id)
        if (
            pcoll.is_bounded == beam_runner_api_pb2.IsBounded.UNBOUNDED
            and strategy.window_fn.urn == common_urns.global_windows.urn
            and strategy.trigger.WhichOneof("trigger") != "default"
        ):
            out[dest] = (ReduceSpec.from_proto(strategy, ctx), context.coder_impl(components, si.coder_id))
    return out


def _earliest_needs(pending):
    """A pending entry's earliest side window end per side input (entries
    saved before they carried it: the latest)."""
    return pending[5] if len(pending) > 5 else pending[4]


def _window_mapping(side_input, si, components):
    """The function from a main-input window to the side window it reads.
    A side input of this SDK carries its own; another SDK's (Beam Java's
    serialized WindowMappingFn) is opaque here, and that SDK maps by the
    side input's WindowFn's default mapping, which is Beam Python's for the
    WindowFns both SDKs share (global, fixed, sliding). A side input under
    another SDK's own WindowFn fails naming it."""
    from apache_beam.portability import python_urns
    from apache_beam.pvalue import SideInputData
    from apache_beam.transforms.sideinputs import default_window_mapping_fn

    if side_input.view_fn.urn == python_urns.PICKLED_VIEWFN:
        return SideInputData.from_runner_api(side_input, None).window_mapping_fn
    proto = beam_runner_api_pb2.Components.FromString(components)
    strategy_id = proto.pcollections[si.pcollection].windowing_strategy_id
    try:
        window_fn = context.components_context(components).windowing_strategies.get_by_id(strategy_id).windowfn
    except Exception as e:  # noqa: BLE001 -- an SDK's own WindowFn: not decodable here
        raise ValueError(
            "side input %s of %s: its WindowFn (%s) is another SDK's own; a streaming side input of another "
            "SDK must be in global, fixed or sliding windows"
            % (si.tag, si.transform_id, proto.windowing_strategies[strategy_id].window_fn.urn)
        ) from e
    return default_window_mapping_fn(window_fn)


def _maps_via_end(mapping):
    """Is `mapping` Beam's default window mapping into non-global windows
    (apache_beam.transforms.sideinputs.default_window_mapping_fn)? Beam
    offers no public test; the function's qualified name is the one place
    that says so (a global-window mapping has another name)."""
    return (
        getattr(mapping, "__module__", None) == "apache_beam.transforms.sideinputs"
        and getattr(mapping, "__qualname__", "") == "default_window_mapping_fn.<locals>.map_via_end"
    )


def _bundles_by_seq(ready, input_index):
    """Ready pending entries as [(seq, bundle)] in seq order."""
    by_seq = collections.defaultdict(list)
    for dest, element, seq, *_ in ready:
        by_seq[seq].append((input_index[dest], element))
    return sorted(by_seq.items())
