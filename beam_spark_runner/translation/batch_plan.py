"""Batch planning: Beam's fused stages -> an `ExecutionPlan` (plans.py): the
stages' plans (translation/stage_plans.py) in topological order, and the
GroupByKeys the runner performs as Spark shuffles. Pure planning: no Spark.
"""

from beam_spark_runner.plans import ExecutionPlan
from beam_spark_runner.translation.stage_plans import StagePlanner


def build_plan(context, stages, plain_python=True, streamed_groups=False) -> ExecutionPlan:
    """Turns Beam's optimized stages into an ExecutionPlan (see
    stage_plans.StagePlanner for the flags)."""
    planner = StagePlanner(context, stages, plain_python=plain_python, streamed_groups=streamed_groups)
    stage_plans = tuple(planner.stage(stage, index) for index, stage in enumerate(stages))
    return ExecutionPlan(stage_plans, planner.groups, context.components.SerializeToString())
