"""The operator object for each kind of plan Operator (see
translation/streaming_plan.py): one place that knows every operator
module, so they need not import each other."""

from beam_spark_runner.plans import GROUP, SDF, SIDE_INPUTS, STATEFUL
from beam_spark_runner.streaming.operators import GroupOperator, SdfOperator, SideInputOperator, StatelessOperator
from beam_spark_runner.streaming.stateful_operator import StatefulStageOperator


def build(op, plan, key_groups):
    """The operator object for a plan Operator."""
    if op.kind == GROUP:
        return GroupOperator(op, plan, key_groups)
    if op.kind == SIDE_INPUTS:
        return SideInputOperator(op, plan, key_groups)
    if op.kind == SDF:
        return SdfOperator(op, plan, key_groups)
    if op.kind == STATEFUL:
        return StatefulStageOperator(op, plan, key_groups)
    return StatelessOperator(op, plan, key_groups)
