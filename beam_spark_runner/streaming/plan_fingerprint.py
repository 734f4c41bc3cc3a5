"""What a streaming checkpoint's state belongs to, and the check that a
restarted pipeline still matches it (as Flink records operator UIDs).

Spark keeps each `transformWithState` operator's state by its position in
the query, and the runner's offsets and hold reports name keyed operators
by plan name; the key-group count decides which key-group (and so which
state) a Beam key lands in. A restart whose plan differs in any of these
would run old state under other operators. So the checkpoint records a
`PlanFingerprint` when a run first starts, and a later run with the same
checkpoint must have the same one, or it is refused with the operators that
differ named.

What is recorded, per keyed operator in query order: its name, kind, the
row destinations it reads (what its waiting elements are addressed to) and
the ids of the state it keeps (user state and timer families of the stage's
stateful DoFns; a GroupByKey's WindowFn, accumulation mode and lifted
combine, which decide the shape of its panes' state). Stateless operators
hold nothing between micro-batches, so they may change freely, as may the
code inside any DoFn.
"""

import dataclasses
import json
from typing import Tuple

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2

from beam_spark_runner.errors import CheckpointMismatchError
from beam_spark_runner.plans import GROUP, StreamingPlan

FORMAT_VERSION = 1
FILE_NAME = "plan.json"


@dataclasses.dataclass(frozen=True)
class OperatorPrint:
    name: str
    kind: str
    reads: Tuple[str, ...]
    state: Tuple[str, ...]

    def to_json(self):
        return {"name": self.name, "kind": self.kind, "reads": list(self.reads), "state": list(self.state)}

    @classmethod
    def from_json(cls, d):
        return cls(d["name"], d["kind"], tuple(d["reads"]), tuple(d["state"]))


@dataclasses.dataclass(frozen=True)
class PlanFingerprint:
    key_groups: int
    sources: Tuple[str, ...]  # TestStream transform ids, "impulse" when Impulse feeds the query
    operators: Tuple[OperatorPrint, ...]  # keyed operators, in query order
    format_version: int = FORMAT_VERSION

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "format_version": self.format_version,
                "key_groups": self.key_groups,
                "sources": list(self.sources),
                "operators": [op.to_json() for op in self.operators],
            },
            indent=1,
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> "PlanFingerprint":
        """Parses a recorded fingerprint; `where` names the file in errors."""
        try:
            d = json.loads(data.decode())
            version = d["format_version"]
            if version != FORMAT_VERSION:
                raise CheckpointMismatchError(
                    "%s has plan format version %r; this runner reads version %d" % (where, version, FORMAT_VERSION)
                )
            return cls(
                key_groups=int(d["key_groups"]),
                sources=tuple(d["sources"]),
                operators=tuple(OperatorPrint.from_json(o) for o in d["operators"]),
            )
        except CheckpointMismatchError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointMismatchError(
                "%s is not a readable plan record (%s: %s); the checkpoint is damaged" % (where, type(e).__name__, e)
            ) from e

    def differences(self, recorded: "PlanFingerprint"):
        """Why a checkpoint recorded as `recorded` cannot run under this
        plan: one line per difference, empty when it can."""
        problems = []
        if recorded.key_groups != self.key_groups:
            problems.append(
                "the checkpoint's state is spread over %d key-groups, this run has %d (set --parallelism=%d)"
                % (recorded.key_groups, self.key_groups, recorded.key_groups)
            )
        if recorded.sources != self.sources:
            problems.append("sources: checkpoint %s, this run %s" % (list(recorded.sources), list(self.sources)))
        old = {op.name: op for op in recorded.operators}
        new = {op.name: op for op in self.operators}
        for name in old.keys() - new.keys():
            problems.append("keyed operator %s is in the checkpoint but not in this pipeline" % name)
        for name in new.keys() - old.keys():
            problems.append("keyed operator %s is new in this pipeline (not in the checkpoint)" % name)
        for name in old.keys() & new.keys():
            for field in ("kind", "reads", "state"):
                was, now = getattr(old[name], field), getattr(new[name], field)
                if was != now:
                    problems.append(
                        "keyed operator %s: %s was %s, is now %s" % (name, field, _listed(was), _listed(now))
                    )
        common_old = [op.name for op in recorded.operators if op.name in new]
        common_new = [op.name for op in self.operators if op.name in old]
        if not problems and common_old != common_new:
            problems.append("keyed operators run in another order: was %s, is now %s" % (common_old, common_new))
        return problems


def _listed(value):
    return list(value) if isinstance(value, tuple) else value


def fingerprint(plan: StreamingPlan, key_groups: int) -> PlanFingerprint:
    components = beam_runner_api_pb2.Components.FromString(plan.components)
    sources = tuple(s.name for s in plan.sources) + (("impulse",) if plan.impulse_dests else ())
    return PlanFingerprint(
        key_groups=key_groups,
        sources=sources,
        operators=tuple(
            OperatorPrint(op.name, op.kind, tuple(op.inputs), _state_of(op, components))
            for op in plan.operators
            if op.is_keyed
        ),
    )


def _state_of(op, components):
    if op.kind == GROUP:
        strategy = components.windowing_strategies[op.group.windowing_strategy_id]
        mode = beam_runner_api_pb2.AccumulationMode.Enum.Name(strategy.accumulation_mode)
        return (
            "window_fn:%s" % strategy.window_fn.urn,
            "accumulation:%s" % mode,
            "lifted_combine:%s" % ("yes" if op.group.combine is not None else "no"),
        )
    descriptor = beam_fn_api_pb2.ProcessBundleDescriptor.FromString(op.stage.descriptor)
    ids = []
    for transform_id, transform in descriptor.transforms.items():
        if transform.spec.urn != common_urns.primitives.PAR_DO.urn:
            continue
        payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
        ids.extend("state:%s/%s" % (transform_id, s) for s in payload.state_specs)
        ids.extend("timer:%s/%s" % (transform_id, t) for t in payload.timer_family_specs)
    return tuple(sorted(ids))
