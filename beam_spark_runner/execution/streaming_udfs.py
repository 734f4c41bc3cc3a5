"""The Python code Spark runs for a streaming query: the source, the
stateless (mapInArrow) and keyed (transformWithState) operators.

This module imports only pyspark, pyarrow and the Beam-free row, planner,
operator-cache and GC-settings modules: Spark unpickles these objects in its source-planning process and in
a driver-side worker per stateful operator at every query start, where
importing Beam would cost seconds each. Operators carry themselves
pickled, and the plan they share as a broadcast (SharedPlan), and build
their Beam objects lazily, on executors (whose workers fork from a daemon
with Beam already imported).
"""

import dataclasses
import functools
import pickle
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Row
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from beam_spark_runner.execution.state_store_calls import KEY_SCHEMA, VALUE_SCHEMA, MapTable, SparkKeyGroupStore
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.operator_cache import RUNS_KEPT, OperatorCache
from beam_spark_runner.streaming import state_blobs
from beam_spark_runner.streaming.source_planner import SourcePlanner
from beam_spark_runner.worker.gc_tuning import bulk_data_gc
from beam_spark_runner.worker.log_forwarding import forwarding

SOURCE_FORMAT = "beam_spark_runner_stream"


class BeamStreamSource(DataSource):
    """Spark's view of a pipeline's sources; option `script_path` names the
    pickled (SourceScript, run dir) the driver wrote."""

    @classmethod
    def name(cls):
        return SOURCE_FORMAT

    def schema(self):
        return R.SCHEMA

    def streamReader(self, schema):
        return _BeamStreamReader(self.options["script_path"], int(self.options["partitions"]))


class _BeamStreamReader(DataSourceStreamReader):
    def __init__(self, script_path, partitions):
        with open(script_path, "rb") as f:
            script, run_dir, resume_offset = pickle.load(f)
        self._planner = SourcePlanner(script, run_dir)
        self._partitions = max(1, partitions)
        # The end of the batch Spark runs next from, for a Spark that does not
        # pass it to latestOffset (PySpark before 4.2): the newest end this
        # reader planned or was asked to read, else the newest Spark logged.
        self._last_end = resume_offset

    def initialOffset(self):
        return self._planner.initial_offset()

    def latestOffset(self, start=None, limit=None):
        if start is None:
            start = self._last_end if self._last_end is not None else self.initialOffset()
        end = self._planner.next_offset(start)
        self._last_end = end
        return end

    def partitions(self, start, end):
        self._last_end = end  # a restarted query re-runs its unfinished batch first
        rows = self._planner.batch_rows(start, end)
        return [InputPartition(part) for part in R.input_partitions(rows, self._partitions)]

    def read(self, partition):
        return iter(partition.value)

    def commit(self, end):
        pass


# One operator object per Python worker, run and plan operator, for the
# most recently used runs.
_OPERATORS = OperatorCache(RUNS_KEPT)
# The SharedPlans' contents of the runs used last, unpickled once each.
_SHARED_PLANS = {}


class SharedPlan:
    """What every operator of one run's query needs of the plan besides
    itself (plans.StreamingPlan.for_operators(): components, row
    addressing) and the key-group count, sent to the executors once, as a
    Spark broadcast of their pickle that each operator's UDF names. A
    copy in each UDF made a query of 69 Java operators carry 43 MB of
    plans, and serializing its tasks ran out of a 1 GiB driver heap.

    Pickled (into a UDF), it names the broadcast, which PySpark then ships
    with that UDF, and keeps the reference pickled: a transformWithState
    processor is also unpickled in a driver-side worker that gets no
    broadcasts, and never loads the plan."""

    def __init__(self, token: str, broadcast: Any = None, broadcast_pickle: bytes = None):
        self.token = token  # the run's
        self.broadcast = broadcast  # pyspark.Broadcast of pickle.dumps((plan, key_groups)); on the driver
        self._broadcast_pickle = broadcast_pickle

    def __reduce__(self):
        # Pickling the Broadcast is what registers it with the UDF being pickled.
        reference = self._broadcast_pickle if self.broadcast is None else pickle.dumps(self.broadcast)
        return SharedPlan, (self.token, None, reference)

    def load(self):
        """(plan, key_groups), unpickled once per Python worker and run."""
        loaded = _SHARED_PLANS.get(self.token)
        if loaded is None:
            from beam_spark_runner.execution import main_session

            main_session.install()  # the driver script's classes as __main__.<name>
            broadcast = self.broadcast if self.broadcast is not None else pickle.loads(self._broadcast_pickle)
            loaded = _SHARED_PLANS[self.token] = pickle.loads(broadcast.value)
            while len(_SHARED_PLANS) > RUNS_KEPT:
                del _SHARED_PLANS[next(iter(_SHARED_PLANS))]
        return loaded


@dataclasses.dataclass(frozen=True)
class OperatorRef:
    """One plan operator as a UDF carries it: its own pickled
    plans.PlanOperator, and its run's SharedPlan."""

    shared: SharedPlan
    name: str
    pickled: bytes


def operator(ref: OperatorRef):
    """The operator object of this Python worker for `ref`."""
    return _OPERATORS.get(ref.shared.token, ref.name, functools.partial(_build_operator, ref))


def _build_operator(ref):
    from beam_spark_runner.streaming import operator_factory

    plan, key_groups = ref.shared.load()
    return operator_factory.build(pickle.loads(ref.pickled), plan, key_groups)


# The Row class of the query's rows, for transformWithState's output.
_SparkRow = Row(*R.FIELDS)

_ARROW_TYPES = (pa.int32(), pa.string(), pa.int32(), pa.binary(), pa.binary(), pa.int64(), pa.int64())


def record_batch(rows):
    """Query rows (rows.QueryRow or tuples in its field order) as one Arrow batch."""
    columns = list(zip(*rows))
    return pa.RecordBatch.from_arrays(
        [pa.array(columns[i], type=t) for i, t in enumerate(_ARROW_TYPES)], names=list(R.FIELDS)
    )


def stateless_batches(ref, inputs, pass_on, logs, batches):
    """mapInArrow body: DATA and KEYED rows for `inputs` run through the
    operator, all other rows, and those for `pass_on` too, pass through. `logs`: (LogSettings
    or None, operator name), where user code's log records go."""
    wanted = pa.array(list(inputs), pa.string())
    kept = pa.array(list(pass_on), pa.string())
    data_kinds = pa.array(R.DATA_KINDS, pa.int32())
    mine = []
    with bulk_data_gc():
        for batch in batches:
            is_mine = pc.fill_null(
                pc.and_(pc.is_in(batch.column("kind"), data_kinds), pc.is_in(batch.column("dest"), wanted)), False
            )
            passing = batch.filter(pc.or_(pc.invert(is_mine), pc.is_in(batch.column("dest"), kept)))
            if passing.num_rows:
                yield passing
            selected = batch.filter(is_mine)
            if selected.num_rows:
                mine.extend(map(R.QueryRow._make, zip(*(selected.column(f).to_pylist() for f in R.FIELDS))))
        if mine:
            with forwarding(*logs):
                out = operator(ref).run(mine)
            if out:
                yield record_batch(out)


class KeyGroupProcessor(StatefulProcessor):
    """transformWithState body: one key-group of a keyed operator per call.
    With `per_key` (GroupByKey, stateful DoFn) the operator keeps each key's
    state as its own entry (streaming/keyed_state.py, in the "beam" value
    and the "keys" and "due" maps); otherwise the key-group's state is one
    blob in the "beam" value, compressed (state_blobs)."""

    def __init__(self, ref, inputs, pass_on=(), logs=(None, ""), per_key=False):
        self._ref, self._name = ref, ref.name
        self._logs = logs  # as stateless_batches'
        self._inputs = frozenset(inputs)
        self._pass_on = frozenset(pass_on)
        self._control = R.control_dest(ref.name)
        self._per_key = per_key

    def init(self, handle):
        self._state = handle.getValueState("beam", "blob binary")
        self._store = None
        if self._per_key:
            tables = {
                name: MapTable(handle.getMapState(name, KEY_SCHEMA, VALUE_SCHEMA), name) for name in ("keys", "due")
            }
            self._store = SparkKeyGroupStore(self._state, tables)

    def handleInputRows(self, key, rows, timerValues):
        mine, control, batch = [], None, None
        for spark_row in rows:
            row = R.QueryRow._make(spark_row)
            if row.kind in R.DATA_KINDS and row.dest in self._inputs:
                mine.append(row)
                if row.dest in self._pass_on:
                    yield spark_row
            elif row.kind == R.CONTROL and row.dest == self._control:
                control, batch = R.parse_control(row.payload), row.batch
            else:
                yield spark_row
        if not mine and control is None:
            return
        steps = control.steps if control is not None else None
        draining = control is not None and control.draining
        if self._store is not None:
            with bulk_data_gc(), forwarding(*self._logs):
                result = operator(self._ref).run(self._store, mine, steps, draining=draining)
        else:
            saved = self._state.get() if self._state.exists() else None
            with bulk_data_gc(), forwarding(*self._logs):
                result = operator(self._ref).run(
                    state_blobs.unpack(saved[0]) if saved else None, mine, steps, draining=draining
                )
            if result.blob is None:
                self._state.clear()
            else:
                self._state.update((state_blobs.pack(result.blob),))
        for out in result.rows:
            yield _SparkRow(*out)
        if control is not None:
            summary, event_summary = result.hold_summary, result.summary_without_processing_time
            yield _SparkRow(
                *R.report(
                    self._name,
                    key[0],
                    batch,
                    result.hold,
                    result.hold_without_processing_time,
                    result.wake,
                    summary.to_json() if summary is not None else None,
                    event_summary.to_json() if event_summary is not None else None,
                )
            )

    def close(self):
        pass
