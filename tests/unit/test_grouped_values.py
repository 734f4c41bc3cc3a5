"""Streamed groups (worker/grouped_values.py): what leaves the shuffle for a
large group, how each execution path reads it, and the planner's coder."""

import pickle

from apache_beam.coders import coders
from apache_beam.coders.coder_impl import IterableCoderImpl, create_InputStream
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2

from beam_spark_runner.plans import BufferKind
from beam_spark_runner.translation.stage_plans import state_backed_group_coder
from beam_spark_runner.worker import grouped_values
from beam_spark_runner.worker.beam_internals import InProcessSdkHarness
from beam_spark_runner.worker.grouped_values import GroupedValues, LazyValues, ValuePages, group_runs
from beam_spark_runner.worker.grouping import _global_on_time
from tests.unit.state_backed import ServedPages

VALUE = coders.StrUtf8Coder().get_impl()
KEY = coders.StrUtf8Coder().get_impl()
PORT_CODER = coders.WindowedValueCoder(
    coders.TupleCoder([coders.StrUtf8Coder(), coders.IterableCoder(coders.StrUtf8Coder())]),
    coders.GlobalWindowCoder(),
)
# The encoded timestamp, window and pane of a grouped element in the global
# window (what GroupCodec writes before the key).
HEADER = (
    coders.WindowedValueCoder(coders.BytesCoder(), coders.GlobalWindowCoder())
    .get_impl()
    .encode_nested(_global_on_time(b""))[:-1]
)


class CountingValues:
    """A re-iterable of encodings that counts how often it was iterated."""

    def __init__(self, encodings):
        self.encodings = encodings
        self.iterations = 0

    def __iter__(self):
        self.iterations += 1
        return iter(self.encodings)

    def __len__(self):
        return len(self.encodings)


def _encodings(n, width=100):
    return [VALUE.encode_nested("%0*d" % (width, i)) for i in range(n)]


def test_pages_cover_the_values_after_the_inline_ones_once_in_order():
    values = _encodings(3000)
    pages = ValuePages(values, skip=7)
    data, n, more = [], 0, True
    while more:
        page, more = pages.page(n)
        assert len(page) <= grouped_values.PAGE_BYTES + 200
        data.append(page)
        n += 1
    assert n > 3  # several pages, not one
    assert b"".join(data) == b"".join(values[7:])


def test_asking_for_an_earlier_page_starts_over():
    values = CountingValues(_encodings(3000))
    pages = ValuePages(values)
    first, _ = pages.page(0)
    second, _ = pages.page(1)
    assert values.iterations == 1
    assert pages.page(0)[0] == first  # the DoFn iterates again
    assert pages.page(1)[0] == second
    assert values.iterations == 2


def test_state_token_encoding_decodes_with_beams_state_backed_iterable():
    values = _encodings(5000)
    state = ServedPages()
    element = GroupedValues(HEADER, KEY.encode_nested("k"), values).with_state_token(state.serve)
    assert len(element) < grouped_values.PAGE_BYTES + 500  # one page inline, not the group

    state_backed = coders.WindowedValueCoder(
        coders.TupleCoder(
            [coders.StrUtf8Coder(), coders.StateBackedIterableCoder(coders.StrUtf8Coder(), read_state=state.read_state)]
        ),
        coders.GlobalWindowCoder(),
    )
    wv = state_backed.get_impl().decode_nested(element)
    key, decoded = wv.value
    assert key == "k"
    assert list(decoded) == ["%0100d" % i for i in range(5000)]


def test_zero_inline_bytes_sends_one_value_inline():
    """Beam's FnApiRunner(use_state_iterables=True) writes one value before
    the token; --grouped_values_in_memory_bytes=0 does the same."""
    element = GroupedValues(HEADER, KEY.encode_nested("k"), _encodings(10), inline_bytes=0).with_state_token(
        lambda pages: b"t"
    )
    stream = create_InputStream(element[len(HEADER) + len(KEY.encode_nested("k")) :])
    assert stream.read_bigendian_int32() == -1
    assert stream.read_var_int64() == 1


def test_pickled_group_becomes_the_in_memory_encoding():
    values = _encodings(50)
    grouped = GroupedValues(HEADER, KEY.encode_nested("k"), values)
    block = pickle.loads(pickle.dumps(grouped))
    assert isinstance(block, bytes)
    wv = PORT_CODER.get_impl().decode_nested(block)
    assert wv.value == ("k", ["%0100d" % i for i in range(50)])


def test_plain_stage_gets_a_lazy_reiterable():
    values = CountingValues(_encodings(20))
    runs = group_runs(GroupedValues(HEADER, KEY.encode_nested("k"), values), PORT_CODER)
    [(template, [(key, lazy)])] = runs
    assert key == "k" and template.windows == _global_on_time(None).windows
    assert isinstance(lazy, LazyValues) and values.iterations == 0  # nothing decoded yet
    assert len(lazy) == 20 and values.iterations == 0
    assert list(lazy) == list(lazy) == ["%0100d" % i for i in range(20)]
    assert values.iterations == 2
    assert pickle.loads(pickle.dumps(lazy)) == ["%0100d" % i for i in range(20)]


def test_harness_state_serves_registered_groups_page_by_page():
    harness = InProcessSdkHarness(beam_fn_api_pb2.ProcessBundleDescriptor(id="d"))
    values = _encodings(3000)
    token = harness.state.serve_values(ValuePages(values))
    key = beam_fn_api_pb2.StateKey(runner=beam_fn_api_pb2.StateKey.Runner(key=token))
    data, continuation, pages = [], None, 0
    while True:
        page, continuation = harness.state.get_raw(key, continuation)
        data.append(page)
        pages += 1
        if continuation is None:
            break
    assert pages > 3 and b"".join(data) == b"".join(values)
    harness.state.forget_values()
    assert harness.state.get_raw(key, None) == (b"", None)  # Beam's servicer: no such state


def test_grouped_blocks_streams_only_groups_over_the_limit():
    codec = _global_codec()
    small, large = _encodings(3), _encodings(200)
    out = list(codec.grouped_blocks([(KEY.encode_nested("a"), small), (KEY.encode_nested("b"), large)], 1000))
    assert isinstance(out[0], bytes) and isinstance(out[1], GroupedValues)
    assert PORT_CODER.get_impl().decode_nested(out[0]).value == ("a", ["%0100d" % i for i in range(3)])
    assert out[1].values is large
    # In memory when the limit is above the group's size.
    out = list(codec.grouped_blocks([(KEY.encode_nested("b"), large)], 1 << 20))
    assert len(out) == 1 and isinstance(out[0], bytes)


def _global_codec():
    """A GroupCodec for a GroupByKey of KV<str, str> in the global window."""
    import apache_beam as beam

    from beam_spark_runner.translation.planner import pipeline_proto_of, plan_pipeline
    from beam_spark_runner.worker.grouping import GroupCodec

    p = beam.Pipeline()
    _ = p | beam.Create([("a", "x")]) | beam.GroupByKey() | beam.Map(print)
    plan = plan_pipeline(pipeline_proto_of(p))
    (group,) = plan.groups.values()
    return GroupCodec(plan.components, group)


def test_batch_plans_read_groups_with_the_state_backed_coder_on_the_harness():
    import apache_beam as beam
    from beam_spark_runner.translation.planner import pipeline_proto_of, plan_pipeline
    from beam_spark_runner.worker.grouped_values import streams_groups

    p = beam.Pipeline()
    _ = p | beam.Create([("a", "x")]) | beam.GroupByKey() | beam.Map(print)
    plan = plan_pipeline(pipeline_proto_of(p), plain_python=False)
    readers = [s for s in plan.stages if any(port.buffer.kind == BufferKind.GROUP for port in s.inputs)]
    assert readers
    for stage in readers:
        descriptor = beam_fn_api_pb2.ProcessBundleDescriptor.FromString(stage.descriptor)
        for port in stage.inputs:
            assert streams_groups(descriptor, port.transform_id)
            # The runner's side keeps the plain Iterable coder.
            assert "state_backed" not in port.coder_id


def test_planner_gives_harness_inputs_of_groups_the_state_backed_coder():
    components = beam_runner_api_pb2.Components()
    context_coders = coders.WindowedValueCoder(
        coders.TupleCoder([coders.StrUtf8Coder(), coders.IterableCoder(coders.VarIntCoder())]),
        coders.GlobalWindowCoder(),
    )
    from apache_beam.runners import pipeline_context

    ctx = pipeline_context.PipelineContext(components)
    coder_id = ctx.coders.get_id(context_coders)
    components = ctx.to_runner_api()
    new_id = state_backed_group_coder(components, coder_id)
    assert new_id != coder_id
    windowed = components.coders[new_id]
    kv = components.coders[windowed.component_coder_ids[0]]
    iterable = components.coders[kv.component_coder_ids[1]]
    assert iterable.spec.urn == common_urns.coders.STATE_BACKED_ITERABLE.urn
    # The elements, key and window coders are the original ones.
    original_kv = components.coders[components.coders[coder_id].component_coder_ids[0]]
    assert kv.component_coder_ids[0] == original_kv.component_coder_ids[0]
    assert iterable.component_coder_ids == components.coders[original_kv.component_coder_ids[1]].component_coder_ids
    # Another shape is left alone.
    other = ctx.coders.get_id(coders.WindowedValueCoder(coders.VarIntCoder(), coders.GlobalWindowCoder()))
    components = ctx.to_runner_api()
    assert state_backed_group_coder(components, other) == other


def test_a_streamed_iterable_output_encodes_as_an_iterable():
    lazy = LazyValues(_encodings(3, width=1), VALUE)
    encoded = coders.FastPrimitivesCoder().encode(lazy)
    assert coders.FastPrimitivesCoder().decode(encoded) == ["0", "1", "2"]
    assert IterableCoderImpl  # the iterable-like registration is Beam's
