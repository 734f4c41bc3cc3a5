"""The operator object for each kind of plan Operator (see
translation/streaming_plan.py): one place that knows every operator
module, so they need not import each other."""

from beam_spark_runner.plans import PER_KEY_STATE_KINDS, OperatorKind
from beam_spark_runner.streaming.operators import GroupOperator, SdfOperator, SideInputOperator, StatelessOperator
from beam_spark_runner.streaming.stable_input import StableInputOperator
from beam_spark_runner.streaming.stateful_operator import StatefulStageOperator

_OPERATORS = {
    OperatorKind.GROUP: GroupOperator,
    OperatorKind.SIDE_INPUTS: SideInputOperator,
    OperatorKind.SDF: SdfOperator,
    OperatorKind.STATEFUL: StatefulStageOperator,
    OperatorKind.STATELESS: StatelessOperator,
}


def build(op, plan, key_groups):
    """The operator object for a plan Operator: one that requires stable
    input runs behind a delay line (streaming/stable_input.py)."""
    operator = _OPERATORS[op.kind](op, plan, key_groups)
    if op.stable_input:
        return StableInputOperator(
            operator, op, per_key=op.kind in PER_KEY_STATE_KINDS, stateless=op.kind == OperatorKind.STATELESS
        )
    return operator
