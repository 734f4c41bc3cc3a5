"""Stable input for a streaming stage (Beam's @RequiresStableInput,
`beam:requirement:pardo:stable_input:v1`), without Spark.

A DoFn that requires stable input (KafkaIO's offset commits and its
exactly-once sink, a user DoFn with side effects keyed to its input) must
see the same elements whenever its work is retried. A micro-batch replayed
after a driver kill recomputes its rows: a source re-reads, upstream code
runs again, and what it hands the stage may differ (other bundles, other
random draws, another split of a restriction). So the stage's operator is
wrapped in a *delay line* (`StableInputOperator`), as Flink buffers such a
stage's input until the checkpoint that covers it completes:

* in micro-batch N the key-group stores the rows and time steps addressed
  to it (`HeldBatch`) in its state, beside the operator's own state, and
  runs the operator on the rows and steps it stored in batch N - 1;
* Spark's state store commits both with batch N, so batch N + 1, or a
  replay of it after any failure, starts from batch N's stored rows:
  the stage sees each element exactly as it was first stored, whatever
  upstream computes on a replay;
* the stage thus runs one micro-batch behind its input, exactly as it
  would have one batch earlier: the same rows between the same steps.
  Its output watermark follows: the key-group holds it at the input
  watermark of the last steps it ran (`HeldBatch.ran_to`), so nothing it
  emits from a stored batch is late downstream;
* while a stored batch has work (rows, or a watermark the operator has
  not run to), the key-group asks for another micro-batch at once (its
  wake-up is the batch's processing time), so an idle or finished input
  still gets its last batch run.

The wrapped operator's state and the held batch share one slot: the
key-group's blob (operators keeping one blob) or the meta value of its
per-key store (`keyed_state.Store`), written as one record with a format
version. Splittable DoFns and stages reading side inputs keep state the
delay would have to reproduce in other ways; they are refused at planning.
"""

import dataclasses
import pickle
from typing import Optional, Tuple

from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.operators import KeyGroupResult, earliest
from beam_spark_runner.streaming.timestamp_summary import TimestampSummary
from windowing.timestamps import MAX_US as MAX_MICROS
from windowing.timestamps import MIN_US as MIN_MICROS

# Format of the slot a StableInputOperator writes: a pickled dict with
# "v", "held" (HeldBatch's fields) and "inner" (the wrapped operator's own
# bytes, None for none).
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class HeldBatch:
    """What one micro-batch addressed to the stage: its data rows (as
    `rows.QueryRow` tuples), its time steps (as a CONTROL row carries them;
    None: no CONTROL row) and whether the pipeline was draining; `ran_to`:
    the input watermark of the last steps the stage ran (micros)."""

    rows: Tuple[tuple, ...] = ()
    steps: Optional[Tuple[tuple, ...]] = None
    draining: bool = False
    ran_to: int = MIN_MICROS

    def last_watermark(self) -> Optional[int]:
        return max((step[1] for step in self.steps), default=None) if self.steps else None

    def last_processing_time(self) -> Optional[int]:
        return max((step[2] for step in self.steps), default=None) if self.steps else None

    def has_work(self) -> bool:
        """Whether running it would do anything: rows, or a watermark past
        what the stage ran to."""
        wm = self.last_watermark()
        return bool(self.rows) or (wm is not None and wm > self.ran_to)

    def to_state(self) -> dict:
        return {
            "rows": [tuple(r) for r in self.rows],
            "steps": [list(s) for s in self.steps] if self.steps is not None else None,
            "draining": self.draining,
            "ran_to": self.ran_to,
        }

    @classmethod
    def from_state(cls, state: dict) -> "HeldBatch":
        steps = state["steps"]
        return cls(
            rows=tuple(R.QueryRow._make(r) for r in state["rows"]),
            steps=tuple(tuple(s) for s in steps) if steps is not None else None,
            draining=state["draining"],
            ran_to=state["ran_to"],
        )


def dump_slot(held: HeldBatch, inner: Optional[bytes]) -> bytes:
    return pickle.dumps({"v": FORMAT_VERSION, "held": held.to_state(), "inner": inner})


def load_slot(data: Optional[bytes], operator_name: str) -> Tuple[HeldBatch, Optional[bytes]]:
    """(the held batch, the wrapped operator's bytes) of a slot (empty for
    None); a slot of another format version is refused, naming the
    operator and both versions."""
    if not data:
        return HeldBatch(), None
    saved = pickle.loads(data)
    found = saved.get("v") if isinstance(saved, dict) else None
    if found != FORMAT_VERSION:
        raise ValueError(
            "%s: its checkpointed stable-input state has format version %r; this runner reads version %d"
            % (operator_name, found, FORMAT_VERSION)
        )
    return HeldBatch.from_state(saved["held"]), saved["inner"]


class HeldMetaStore:
    """A `keyed_state.Store` for the wrapped operator whose meta value
    travels in the slot beside the held batch: reads and writes of the
    key tables go to the key-group's store, the meta value stays here
    until `finish` writes the slot."""

    def __init__(self, store, operator_name):
        self._store = store
        self.held, self._meta = load_slot(store.get_meta(), operator_name)

    def get_meta(self):
        return self._meta

    def put_meta(self, value):
        self._meta = value

    def get_many(self, table, keys):
        return self._store.get_many(table, keys)

    def put_many(self, table, items):
        self._store.put_many(table, items)

    def remove_many(self, table, keys):
        self._store.remove_many(table, keys)

    def finish(self, held: HeldBatch):
        self._store.put_meta(dump_slot(held, self._meta))


class StableInputOperator:
    """Runs `inner` (an operator of streaming/operators.py or
    stateful_operator.py) one micro-batch behind its input (the module's
    docstring). `run(state, data_rows, steps, draining)` takes and returns
    what a keyed operator's does: `state` is the key-group's per-key store
    when `per_key`, else its blob. A stateless inner operator (`run(rows)`)
    gets the held rows alone."""

    def __init__(self, inner, op, per_key: bool, stateless: bool):
        self._inner = inner
        self._op = op
        self._per_key = per_key
        self._stateless = stateless

    def close(self):
        self._inner.close()

    def run(self, state, data_rows, steps, draining=False):
        if self._per_key:
            store = HeldMetaStore(state, self._op.display_name)
            held, inner_state = store.held, store
        else:
            held, inner_state = load_slot(state, self._op.display_name)
        result = self._run_inner(inner_state, held)
        ran_to = max(held.ran_to, held.last_watermark() or MIN_MICROS)
        now_held = HeldBatch(
            rows=tuple(data_rows),
            steps=tuple(tuple(s) for s in steps) if steps is not None else None,
            draining=draining,
            ran_to=ran_to,
        )
        if self._per_key:
            store.finish(now_held)
            blob = None
        else:
            empty = not now_held.has_work() and result.blob is None and ran_to == MIN_MICROS
            blob = None if empty else dump_slot(now_held, result.blob)
        return self._result(result, now_held, blob)

    def _run_inner(self, inner_state, held):
        if self._stateless:
            out = self._inner.run(list(held.rows)) if held.rows else []
            return KeyGroupResult(None, out, None)
        return self._inner.run(inner_state, list(held.rows), held.steps, draining=held.draining)

    def _result(self, result, held, blob):
        """The inner result with the delay's hold and wake-up: the output
        watermark waits at the watermark the stage ran to, and a held batch
        with work asks for the next micro-batch now."""
        lag = held.ran_to if held.ran_to < MAX_MICROS else None
        hold = earliest(result.hold, lag)
        event_hold = earliest(result.hold_without_processing_time, lag)
        wake = result.wake
        if held.has_work():
            wake = earliest(wake, held.last_processing_time() if held.steps else None)
        summary, event_summary = result.hold_summary, result.summary_without_processing_time
        if self._op.summarize_holds and lag is not None:
            point = TimestampSummary.of([lag])
            summary = point if summary is None else summary.merge(point)
            event_summary = point if event_summary is None else event_summary.merge(point)
        return KeyGroupResult(blob, result.rows, hold, event_hold, wake, summary, event_summary)
