"""The file sinks' differential property on SparkRunner, batch and streaming:
generated cases (tests/conformance/sink_cases.py: random streams with late and
out-of-order elements, every kind of WindowFn including a custom merging one
with its own window type, trigger trees, all three accumulation modes,
allowed lateness, each sink) must produce the pure driver's panes, and the
sink must publish exactly the records it was given.

CI runs a fixed share: seeds 0-11, each sink twice in each mode (about two
minutes); `tools/sink_property_search.py --seeds N` searches further."""

import pytest

from tests.conformance import sink_cases

SEEDS = range(12)


def _case(seed):
    return sink_cases.generate(seed, sink=sink_cases.SINKS[seed % len(sink_cases.SINKS)])


@pytest.mark.parametrize("seed", SEEDS)
def test_streaming_sinks_publish_exactly_the_produced_panes(seed, tmp_path):
    sink_cases.check(_case(seed), str(tmp_path), streaming=True)


@pytest.mark.parametrize("seed", SEEDS)
def test_batch_sinks_publish_exactly_the_produced_panes(seed, tmp_path):
    sink_cases.check(_case(seed), str(tmp_path), streaming=False)


def test_cases_are_the_same_for_a_seed_and_differ_between_seeds():
    assert sink_cases.generate(7).describe() == sink_cases.generate(7).describe()
    assert len({sink_cases.generate(seed).describe() for seed in range(20)}) == 20


def test_generated_cases_cover_every_dimension():
    cases = [sink_cases.generate(seed) for seed in range(200)]
    assert {c.sink for c in cases} == set(sink_cases.SINKS)
    assert {int(c.mode) for c in cases} == {1, 2, 3}
    kinds = {type(c.window_fn).__name__ for c in cases}
    assert kinds == {"FixedWindows", "SlidingWindows", "Sessions", "BucketSessions", "GlobalWindows"}
    late = [c for c in cases if _has_late_element(c)]
    assert len(late) > 20
    assert any(kind == "clock" for c in cases for kind, _ in c.events)


def _has_late_element(case):
    watermark = 0
    for kind, arg in case.events:
        if kind == "watermark":
            watermark = arg
        elif kind == "input" and any(ts < watermark for _, _, ts in arg):
            return True
    return False
