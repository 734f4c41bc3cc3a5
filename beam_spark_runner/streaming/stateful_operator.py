"""The streaming operator of a stage with user state and/or timers
(stateful DoFns), without Spark: `StatefulStageOperator.run(store,
data_rows, steps, draining=False)` handles one key-group for one batch
(see operators.py for the shape every operator shares).

State lives per user key in the key-group's `keyed_state.Store`: a batch
loads only the keys with data, a due timer or an expiring window, and saves
them back at its end. On the plain path (worker/stateful_step.py) a key's
record is the runner's own (`worker.user_state`, versioned); in Beam's SDK
harness it is the harness's user state entries and pending timers, split
out of the harness by key.
"""

import functools
import pickle

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.keyed_state import KeyedState, Wake
from beam_spark_runner.streaming.progress import LATE_COUNTER
from beam_spark_runner.streaming.operators import (
    EVENT_TIME,
    KeyGroupResult,
    StageBase,
    clocked,
    earliest,
    schedule,
    warn_dropped_for_side_input,
)
from beam_spark_runner.streaming.side_input_wait import SideInputs, WaitingForSides
from beam_spark_runner.streaming.timestamp_summary import TimestampSummary
from beam_spark_runner.streaming.window_expiry import WindowExpiry
from beam_spark_runner.worker import context
from beam_spark_runner.worker.beam_internals import frozen_wall_clock
from beam_spark_runner.worker.harness_stage import HarnessStageRunner
from beam_spark_runner.worker.plain_stage import PlainStageRunner
from beam_spark_runner.worker.user_state import harness_state_of, state_coders_of
from windowing.timestamps import MIN_US as MIN_MICROS

_NO_WAKE = Wake(None, None, None, None)


class StatefulStageOperator(StageBase):
    """A stage with user state and/or timers, one key-group at a time: each
    key's state and timers are loaded from the key-group's store when the
    batch needs the key, and saved back when it ends. A stage the plain
    path can run (`worker/stateful_step.py`: the runner keeps the state)
    runs there, as in batch; others run in Beam's SDK harness.

    With side inputs, a main-input element waits in state until its side
    windows are ready (`side_input_wait.WaitingForSides`) and holds the output watermark at
    its timestamp meanwhile; timers fire with the side input data seen so
    far. Side windows go with the windows that could read them: once the
    watermark passes their end plus the allowed lateness, after the step's
    timers fired."""

    @staticmethod
    def _make_runner(op, plan, descriptor):
        if op.stage.plain_spec is not None and not op.side_inputs:
            return PlainStageRunner(op.stage, op.stage.plain_spec, plan.components, descriptor)
        return HarnessStageRunner(op.stage, (), plan.components, descriptor)

    def __init__(self, op, plan, key_groups):
        super().__init__(op, plan, key_groups)
        self._side_inputs = SideInputs(op, plan, self.descriptor) if op.side_inputs else None
        self.expiry = WindowExpiry(self.descriptor, plan.components)
        self._coders = context.components_context(plan.components).coders
        keyed = {R.dest_text(d): plan.keyed_dests[d] for d in op.inputs if plan.keyed_dests.get(d)}
        self._main_impls = {d: context.coder_impl(plan.components, coder_id) for d, coder_id in keyed.items()}
        self._key_impls = {
            d: context.components_context(plan.components).coders[coder_id].wrapped_value_coder.key_coder().get_impl()
            for d, coder_id in keyed.items()
        }

    def stateful_transform(self):
        """(transform id, {state id: coder}) of the stage's stateful ParDo."""
        for transform_id, transform in self.descriptor.transforms.items():
            if transform.spec.urn == common_urns.primitives.PAR_DO.urn:
                payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
                if payload.state_specs or payload.timer_family_specs:
                    return transform_id, state_coders_of(payload, self._coders)
        raise ValueError("Stage %r has no stateful ParDo" % self.op.display_name)

    def _live_rows(self, rows, wm):
        """`rows` without the windows expired at `wm` (Beam drops late input
        of a stateful DoFn); returns (rows, elements dropped, late windows
        kept: each element and window the watermark had passed, not
        expired)."""
        if not self.expiry.enabled:
            return rows, 0, 0
        kept, dropped, late = [], 0, 0
        for row in rows:
            impl = self._main_impls.get(row.dest)
            if impl is None:  # a side input row
                kept.append(row)
                continue
            wv = impl.decode_nested(row.payload)
            late += self.expiry.late_windows(wv, wm)
            live = self.expiry.live(wv, wm)
            if live is None:
                dropped += 1
            elif live is wv:
                kept.append(row)
            else:
                kept.append(row._replace(payload=impl.encode_nested(live)))
        return kept, dropped, late

    def run(self, store, data_rows, steps, draining=False):
        """`store`: the key-group's `keyed_state.Store`. Per user key: its
        user state and pending timers, loaded into the harness only for the
        keys with data, a due timer or an expiring window; the key-group's
        data (elements waiting for side inputs) is `KeyedState.extra`."""
        data_rows = R.unpacked(data_rows)
        state = KeyedState(store, MIN_MICROS, MIN_MICROS)
        runner = self.runner
        keys = _PlainKeys(self, state) if isinstance(runner, PlainStageRunner) else _HarnessKeys(self, state)
        saved = state.extra or {}
        if state.legacy is not None:
            saved = keys.move_in(state.legacy)
        waiting = WaitingForSides(self._side_inputs, saved, runner.harness) if self._side_inputs else None
        out = []
        wm, pt = state.wm, state.pt
        dropped = late = 0
        keys.load(row.key for row in data_rows if row.dest in self._main_impls)
        for what, seq, item, now in clocked(schedule(data_rows, steps), pt):
            with frozen_wall_clock(now):  # a re-run task computes the same
                if what == "data":
                    item, dropped_now, late_now = self._live_rows(item, wm)
                    dropped += dropped_now
                    late += late_now
                    if waiting is None:
                        if item:
                            self._emit(runner.process(self._bundle(item)), seq, out)
                        continue
                    waiting.take(item, seq)
                else:
                    wm, pt = max(wm, item[0]), max(pt, item[1])
                    if waiting is not None:
                        waiting.advance(item)
                    keys.load(state.due(wm, pt))
                if waiting is not None:
                    for ready_seq, bundle in waiting.ready_bundles(self._input_index):
                        keys.load(self._key_of(self._input_texts[index], element) for index, element in bundle)
                        self._emit(runner.process(bundle), ready_seq, out)
                if what == "step" and keys.has_timers():
                    if waiting is not None:
                        waiting.install()
                    self._emit(runner.fire_timers(functools.partial(self._is_due, wm, pt)), seq, out)
                if what == "step" and self.expiry.enabled:
                    # After the step's timers fired: a window's own timers run
                    # before its state goes (they are due by its expiry), and
                    # before the side windows only it could still read.
                    keys.collect_expired(wm)
                    if waiting is not None:
                        waiting.collect(wm)
        keys.save_all()
        hold, event_hold = state.hold(), state.event_hold()
        summaries = (state.hold_summary(), state.event_hold_summary()) if self.op.summarize_holds else (None, None)
        extra = None
        if waiting is not None:  # waiting main input holds the output watermark too
            hold, event_hold = earliest(hold, waiting.hold()), earliest(event_hold, waiting.hold())
            if self.op.summarize_holds and waiting.hold() is not None:
                point = TimestampSummary.of([waiting.hold()])
                summaries = tuple(s.merge(point) for s in summaries)
            extra = None if waiting.is_empty() else waiting.saved()
            warn_dropped_for_side_input(self.op, waiting.dropped)
        state.wm, state.pt, state.extra = wm, pt, extra
        wake = state.next_processing_time()
        state.commit()
        metrics = self._take_reports(
            len(data_rows),
            out,
            {
                "dropped_due_to_lateness": dropped,
                "dropped_late_for_side_input": waiting.dropped if waiting is not None else 0,
                LATE_COUNTER: late,
            },
        )
        return KeyGroupResult(None, out + metrics, hold, event_hold, wake, *summaries)

    def _key_of(self, dest, element):
        """The encoded user key of a main-input element (as RowWriter
        encodes it in a row's `key`)."""
        wv = self._main_impls[dest].decode_nested(element)
        return self._key_impls[dest].encode_nested(wv.value[0])

    def key_wake(self, windows, timers, decoded_windows=()):
        """A key's wake-up: its earliest event-time timer or window expiry,
        its earliest processing-time timer, and its holds. `windows`:
        encoded windows of its state (the harness's), `decoded_windows`
        windows as objects (the plain path's); `timers`: {family key: [timer]}."""
        event, processing, hold, event_hold = None, None, None, None
        for family, pending in timers.items():
            is_event = self.runner.timer_domain(family) == EVENT_TIME
            for timer in pending:
                fire, held = timer.fire_timestamp.micros, timer.hold_timestamp.micros
                if is_event:
                    event = earliest(event, fire)
                    event_hold = earliest(event_hold, held)
                else:
                    processing = earliest(processing, fire)
                hold = earliest(hold, held)
        if self.expiry.enabled:
            expiry = self.expiry.earliest_expiry(
                windows, list(decoded_windows) + [w for ts in timers.values() for t in ts for w in t.windows]
            )
            event = earliest(event, expiry)
        return Wake(event, processing, hold, event_hold)

    def _is_due(self, wm, pt, family_key, timer):
        domain = self.runner.timer_domain(family_key)
        limit = wm if domain == EVENT_TIME else pt
        return timer.fire_timestamp.micros <= limit


class _HarnessKeys:
    """The keys of one batch of a StatefulStageOperator: loads a key's
    state and timers into the harness before its first bundle, and at the
    end saves every key the batch loaded or created, split out of the
    harness by key. A key is the encoded user key of the rows (RowWriter),
    which is also how the SDK encodes it in state keys and timers."""

    def __init__(self, operator, state):
        self._op, self._state = operator, state
        self._runner = operator.runner
        self._loaded = set()
        self._runner.harness.restore_state(None)
        if self._runner.timers is not None:
            self._runner.timers.restore(None)

    def has_timers(self):
        return bool(self._runner.timers)

    def collect_expired(self, wm):
        self._op.expiry.collect(self._runner.harness, self._runner.timers, wm)

    def load(self, keys):
        new = sorted({k for k in keys if k not in self._loaded})
        if not new:
            return
        self._state.prefetch(new)
        for key in new:
            self._loaded.add(key)
            payload = self._state.load(key)
            if payload is None:
                continue
            record = pickle.loads(payload)
            if len(record) != 2:  # written on the runner's own path
                record = harness_state_of(record, key, *self._op.stateful_transform())
            user, timers = record
            self._runner.harness.add_state(user)
            if self._runner.timers is not None:
                self._runner.timers.add(timers)

    def move_in(self, legacy):
        """Format 1 (one pickled dict per key-group: "wm", "pt", "user",
        "timers" and the side-input wait's fields): loaded whole, so the
        batch saves every key in the per-key layout. Returns the rest."""
        state, runner = self._state, self._runner
        state.wm, state.pt = legacy["wm"], legacy["pt"]
        runner.harness.restore_state(legacy["user"])
        if runner.timers is not None:
            runner.timers.restore(legacy["timers"])
        for key in self._split():
            self._loaded.add(key)
        return {k: v for k, v in legacy.items() if k not in ("wm", "pt", "user", "timers")}

    def _split(self):
        """{key: (user state, windows, {family: [timer]})} of the harness."""
        runner = self._runner
        out = {key: (user, windows, {}) for key, (user, windows) in runner.harness.user_state_by_key().items()}
        if runner.timers is not None:
            for key, timers in runner.timers.by_key(runner.timer_key).items():
                out.setdefault(key, (({}, {}), [], {}))[2].update(timers)
        return out

    def save_all(self):
        split = self._split()
        timers = self._runner.timers
        for key in sorted(self._loaded | set(split)):
            entry = split.get(key)
            if entry is None:
                self._state.save(key, None)
                continue
            user, windows, pending = entry
            payload = pickle.dumps((user, timers.encode(pending) if timers is not None else {}))
            self._state.save(key, payload, self._op.key_wake(windows, pending))


class _PlainKeys:
    """The keys of one batch of a StatefulStageOperator on the plain path:
    a key's record goes into the stateful step's `UserStateTable` before
    its first bundle, and every key the batch loaded or created is saved at
    the end. Records the SDK-harness path wrote (a checkpoint of a run on
    that path, or format 1's blob) are moved in."""

    def __init__(self, operator, state):
        self._op, self._state = operator, state
        self._table = operator.runner.stateful.table
        self._table.keys.clear()
        self._loaded = set()

    def load(self, keys):
        new = sorted({k for k in keys if k not in self._loaded})
        if not new:
            return
        self._state.prefetch(new)
        table = self._table
        for key in new:
            self._loaded.add(key)
            payload = self._state.load(key)
            if payload is not None:
                table.load_key(key, payload)

    def move_in(self, legacy):
        """Format 1 (one pickled dict per key-group: "wm", "pt", "user"
        (the SDK harness's state), "timers" and the side-input wait's
        fields): loaded whole, so the batch saves every key. Returns the rest."""
        state = self._state
        state.wm, state.pt = legacy["wm"], legacy["pt"]
        entries = (legacy["user"] or ({}, {}))[0]
        self._loaded.update(self._table.load_harness_state(entries, legacy["timers"] or {}))
        return {k: v for k, v in legacy.items() if k not in ("wm", "pt", "user", "timers")}

    def has_timers(self):
        return self._table.has_timers()

    def collect_expired(self, wm):
        expiry = self._op.expiry
        self._table.drop_expired(lambda window: expiry.expired(window, wm))

    def save_all(self):
        table, op, save = self._table, self._op, self._state.save
        windows_matter = op.expiry.enabled
        for key in sorted(self._loaded | set(table.keys)):
            key_state = table.keys.pop(key, None)
            if key_state is None or key_state.is_empty():
                save(key, None)
                continue
            if key_state.timers or windows_matter:
                windows = key_state.windows() if windows_matter else ()
                wake = op.key_wake((), table.timers_by_family(key_state), windows)
            else:
                wake = _NO_WAKE  # what key_wake gives a key without timers or expiring windows
            save(key, table.encode_state(key_state), wake)
