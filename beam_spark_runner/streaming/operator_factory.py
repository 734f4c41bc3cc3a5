"""The operator object for each kind of plan Operator (see
translation/streaming_plan.py): one place that knows every operator
module, so they need not import each other."""

from beam_spark_runner.plans import OperatorKind
from beam_spark_runner.streaming.operators import GroupOperator, SdfOperator, SideInputOperator, StatelessOperator
from beam_spark_runner.streaming.stateful_operator import StatefulStageOperator

_OPERATORS = {
    OperatorKind.GROUP: GroupOperator,
    OperatorKind.SIDE_INPUTS: SideInputOperator,
    OperatorKind.SDF: SdfOperator,
    OperatorKind.STATEFUL: StatefulStageOperator,
    OperatorKind.STATELESS: StatelessOperator,
}


def build(op, plan, key_groups):
    """The operator object for a plan Operator."""
    return _OPERATORS[op.kind](op, plan, key_groups)
