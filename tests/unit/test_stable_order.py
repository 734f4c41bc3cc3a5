"""The same pipeline gets the same plan in every process.

A streaming checkpoint's state and offsets belong to operators by position
and name; before `translation/stable_order.py` the plan of a pipeline with
two `fileio.WriteToFiles` sinks listed its stages in an order that followed
the interpreter's string-hash seed.
"""

import random
import subprocess
import sys
import textwrap

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.transforms.periodicsequence import PeriodicImpulse

from beam_spark_runner.translation import phases, planner, stable_order

# Plans two pipelines and prints what a checkpoint depends on: operator
# order, names, what each reads and writes, the row routing.
_PLAN_SCRIPT = textwrap.dedent(
    """
    import apache_beam as beam
    from apache_beam.io import fileio
    from apache_beam.transforms.periodicsequence import PeriodicImpulse
    from beam_spark_runner.translation import planner

    def two_sinks(p):
        ticks = p | PeriodicImpulse(start_timestamp=0, stop_timestamp=120, fire_interval=1) | beam.Map(int)
        windowed = ticks | beam.WindowInto(beam.window.FixedWindows(5))
        windowed | "fmt" >> beam.Map(str) | "write ticks" >> fileio.WriteToFiles(path="/nonexistent/t", shards=1)
        sums = windowed | beam.Map(lambda x: ("k", x)) | beam.CombinePerKey(sum)
        sums | "fmt2" >> beam.Map(str) | "write sums" >> fileio.WriteToFiles(path="/nonexistent/s", shards=1)

    def side_and_flatten(p):
        a = p | "a" >> beam.Create([1, 2, 3])
        b = p | "b" >> beam.Create([4, 5])
        side = p | "side" >> beam.Create([10])
        both = (a, b) | beam.Flatten()
        keyed = both | beam.Map(lambda x, s: (x % 2, x + s), s=beam.pvalue.AsSingleton(side))
        keyed | "g1" >> beam.GroupByKey() | "m1" >> beam.Map(print)
        keyed | "g2" >> beam.CombinePerKey(max) | "m2" >> beam.Map(print)

    for build in (two_sinks, side_and_flatten):
        p = beam.Pipeline()
        build(p)
        plan = planner.plan_streaming_pipeline(planner.pipeline_proto_of(p))
        print(plan.describe())
        for op in plan.operators:
            print(op.kind, op.name, op.inputs, op.pass_on, op.output_dests())
        print(sorted(plan.keyed_dests.items()), plan.broadcast_dests, plan.impulse_dests)
    """
)


def _plan_with_seed(seed):
    out = subprocess.run(
        [sys.executable, "-c", _PLAN_SCRIPT],
        env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def test_plans_do_not_depend_on_the_hash_seed():
    plans = {seed: _plan_with_seed(seed) for seed in (1, 2, 3)}
    assert "write ticks" in plans[1] and "write sums" in plans[1]
    assert plans[1] == plans[2] == plans[3]


def _stages_of(build):
    p = beam.Pipeline()
    build(p)
    proto = planner.pipeline_proto_of(p)
    phase_list = [ph for ph in phases.STREAMING_PHASES if ph is not stable_order.stable_stage_order]
    return phases.create_stages(proto, phases=phase_list, streaming=True)


def _build(p):
    ticks = p | PeriodicImpulse(start_timestamp=0, stop_timestamp=10, fire_interval=1) | beam.Map(int)
    windowed = ticks | beam.WindowInto(beam.window.FixedWindows(5))
    windowed | "fmt" >> beam.Map(str) | "write" >> fileio.WriteToFiles(path="/nonexistent/t", shards=1)
    windowed | beam.Map(lambda x: ("k", x)) | beam.CombinePerKey(sum) | beam.Map(print)


def _shape(stages):
    return [(s.name, [t.unique_name for t in s.transforms]) for s in stages]


def test_phase_output_does_not_depend_on_its_input_order():
    context, stages = _stages_of(_build)
    expected = _shape(stable_order.stable_stage_order(stages, context))
    rng = random.Random(7)
    for _ in range(5):
        shuffled = list(stages)
        rng.shuffle(shuffled)
        for s in shuffled:
            rng.shuffle(s.transforms)
        assert _shape(stable_order.stable_stage_order(shuffled, context)) == expected


def test_phase_keeps_data_order_within_and_across_stages():
    context, stages = _stages_of(_build)
    ordered = stable_order.stable_stage_order(stages, context)
    produced_by = {}
    for i, s in enumerate(ordered):
        seen = set()
        for t in s.transforms:
            for pcoll in t.inputs.values():
                if pcoll in produced_by:
                    assert produced_by[pcoll] <= i, "%s reads %s before it is written" % (s.name, pcoll)
                else:
                    # Produced inside the stage: by a transform listed earlier.
                    inside = {p for u in s.transforms for p in u.outputs.values()}
                    assert pcoll not in inside or pcoll in seen, t.unique_name
            seen.update(t.outputs.values())
        for t in s.transforms:
            for pcoll in t.outputs.values():
                produced_by[pcoll] = i
        for prev in s.must_follow:
            assert prev in ordered[:i]


def test_fused_names_follow_the_transform_order():
    context, stages = _stages_of(_build)
    for s in stable_order.stable_stage_order(stages, context):
        names = [t.unique_name for t in s.transforms]
        if len(names) > 1:
            assert s.name.startswith("(" * (len(names) - 1) + names[0])
            assert s.name.endswith("+(%s)" % names[-1])
