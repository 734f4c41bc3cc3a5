"""The runner's own I/O transforms, by URN: what planning knows of a source
or a sink the runner (Spark) runs itself rather than an SDK harness.

A connector registers a `RunnerIO` for each URN its user transform expands
to (`register`); the submission checks, the fusion phases, the stage plans
and the streaming planner ask this registry (`lookup`, `urns`) and never
name a connector. Its Spark side registers likewise with the executions
(execution/runner_io_glue.py).

The built-in connectors register when their planning module is imported;
`_BUILTINS` lists them, loaded on the registry's first use, so the
registry is complete whichever module imported it first.
"""

import dataclasses
import enum
import threading
from typing import Callable, Dict, FrozenSet, List, Optional

from apache_beam import pvalue
from apache_beam.transforms import core, ptransform, window

from beam_spark_runner.builtin_modules import BuiltinModules


class IORole(enum.Enum):
    """Where the transform sits in a pipeline: a SOURCE has no input and
    its rows enter the pipeline (a streaming source's rows enter the
    query beside the Beam source); a SINK's input rows are staged where
    they are produced and published once their output is durable."""

    SOURCE = "source"
    SINK = "sink"


def no_check(name, transform, pipeline, streaming) -> List[str]:
    return []


@dataclasses.dataclass(frozen=True)
class RunnerIO:
    """One runner I/O transform. `label(payload)`: the user's name for it
    in messages. `check(name, transform proto, pipeline proto, streaming)`:
    its submission checks, each problem a message naming the transform."""

    urn: str
    role: IORole
    label: Optional[Callable[[bytes], str]] = None  # None: the URN
    batch: bool = True  # runs in a batch pipeline
    streaming: bool = True  # runs in a streaming pipeline
    check: Callable[..., List[str]] = no_check
    # A streaming SOURCE: (its stage plan) -> the plans.SparkSource whose
    # rows enter the query.
    plan_streaming_source: Optional[Callable] = None

    def label_of(self, payload: bytes) -> str:
        return self.label(payload) if self.label is not None else self.urn


# The planning modules of the connectors the runner ships: each registers
# its transforms when imported.
_BUILTINS = BuiltinModules(
    "beam_spark_runner.translation.native_io_overrides",
    "beam_spark_runner.io.spark.planning",
    "beam_spark_runner.io.database.planning",
    "beam_spark_runner.io.kafka.planning",
)
_REGISTRY: Dict[str, RunnerIO] = {}
_LOCK = threading.Lock()


def register(io: RunnerIO) -> RunnerIO:
    """Adds `io`; registering another transform under a URN already taken
    is an error naming the URN (the same one again is a no-op: a module
    imported twice)."""
    with _LOCK:
        known = _REGISTRY.get(io.urn)
        if known is not None and known != io:
            raise ValueError("runner I/O URN %s is already registered (as a %s)" % (io.urn, known.role.value))
        _REGISTRY[io.urn] = io
    return io


def lookup(urn: str) -> Optional[RunnerIO]:
    """The runner I/O transform of `urn`, or None for any other URN."""
    _BUILTINS.load()
    return _REGISTRY.get(urn)


def urns(streaming: Optional[bool] = None) -> FrozenSet[str]:
    """Every registered URN, or those that run in a streaming (True) or a
    batch (False) pipeline."""
    _BUILTINS.load()
    return frozenset(
        io.urn for io in _REGISTRY.values() if streaming is None or (io.streaming if streaming else io.batch)
    )


class SinkPrimitive(ptransform.PTransform):
    """The leaf a runner sink's user transform expands to: `urn` and
    `payload` (its config) go into the pipeline proto; its output is the
    destination written (a str), in the global window."""

    def __init__(self, urn: str, payload: bytes):
        super().__init__()
        self._urn = urn
        self._payload = payload

    def expand(self, pcoll):
        return pvalue.PCollection(pcoll.pipeline, element_type=str, is_bounded=pcoll.is_bounded)

    def get_windowing(self, inputs):
        return core.Windowing(window.GlobalWindows())

    def to_runner_api_parameter(self, context):
        return self._urn, self._payload


def input_windowing_strategies(transform, pipeline) -> List:
    """The windowing strategies of a transform proto's inputs (for checks of
    their accumulation mode)."""
    components = pipeline.components
    return [
        components.windowing_strategies[components.pcollections[p].windowing_strategy_id]
        for p in transform.inputs.values()
    ]


def engine_problems(name: str, io: RunnerIO, streaming: bool) -> List[str]:
    """The transform's problem with the kind of pipeline it is in, if any."""
    if streaming and not io.streaming:
        return ["%s: %s is a batch-only runner transform" % (name, io.urn)]
    if not streaming and not io.batch:
        return ["%s: %s is a streaming-only runner transform: pass --streaming" % (name, io.urn)]
    return []
