"""The GroupByKey byte paths agree with Beam's coders."""

import apache_beam as beam
from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.transforms import window
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.translation.planner import pipeline_proto_of, plan_pipeline
from beam_spark_runner.worker.grouped_values import GroupedValues, group_runs
from beam_spark_runner.worker.grouping import GroupCodec, split_elements
from tests.unit.state_backed import ServedPages
from triggers.batch import group_by_window


def _codec(windowfn=None, **windowing):
    p = beam.Pipeline()
    pc = p | beam.Create([("a", 1)])
    if windowfn:
        pc = pc | beam.WindowInto(windowfn, **windowing)
    pc | "G" >> beam.GroupByKey()
    plan = plan_pipeline(pipeline_proto_of(p))
    group = next(g for g in plan.groups.values() if g.display_name == "G")
    return GroupCodec(plan.components, group)


def _encode_all(impl, values):
    out = create_OutputStream()
    for v in values:
        impl.encode_to_stream(v, out, True)
    return out.get()


def _decode_all(impl, blocks):
    result = []
    for block in blocks:
        stream = create_InputStream(block)
        while stream.size() > 0:
            result.append(impl.decode_from_stream(stream, True))
    return result


def _roundtrip(codec, elements):
    block = _encode_all(codec.pre_impl, elements)
    grouped = {}
    for key, value in codec.shuffle_records(block):
        grouped.setdefault(key, []).append(value)
    return _decode_all(codec.post_impl, codec.grouped_blocks(sorted(grouped.items())))


def test_global_window_fast_path_matches_coder_encoding():
    codec = _codec()
    assert codec.trivial_windowing
    gw = window.GlobalWindow()
    elements = [WindowedValue(kv, gw.max_timestamp(), [gw]) for kv in [("a", 1), ("b", 2), ("a", 3)]]
    out = _roundtrip(codec, elements)
    assert sorted((wv.value[0], sorted(wv.value[1])) for wv in out) == [("a", [1, 3]), ("b", [2])]
    # Beam's windowed-value coder keeps millisecond precision.
    millis = gw.max_timestamp().micros // 1000
    assert all(wv.windows == (gw,) and wv.timestamp.micros // 1000 == millis for wv in out)
    assert all(wv.pane_info.is_first and wv.pane_info.is_last for wv in out)


def test_fixed_windows_group_per_window():
    codec = _codec(window.FixedWindows(10))
    assert not codec.trivial_windowing
    elements = [
        WindowedValue(("k", v), ts, [window.IntervalWindow(ts // 10 * 10, ts // 10 * 10 + 10)])
        for v, ts in [(1, 1), (2, 5), (3, 12)]
    ]
    out = _roundtrip(codec, elements)
    got = sorted((wv.windows[0].start, sorted(wv.value[1])) for wv in out)
    assert got == [(0, [1, 2]), (10, [3])]


def _as_reference(codec, elements):
    """What triggers.batch.group_by_window makes of the same elements, per key."""
    by_key = {}
    for wv in elements:
        by_key.setdefault(wv.value[0], []).append(wv.with_value(wv.value[1]))
    return [g for key, wvs in by_key.items() for g in group_by_window(codec.windowing, key, wvs, codec.closing)]


def _comparable(wvs):
    return sorted(
        (wv.value[0], wv.windows, wv.timestamp.micros // 1000, sorted(wv.value[1]), wv.pane_info) for wv in wvs
    )


def test_one_pane_per_window_groups_by_key_and_window_as_the_reference_does():
    """Sliding windows (an element in two windows) with the default trigger:
    the shuffle key carries the window, and each group's pane is known from
    its window alone."""
    codec = _codec(window.SlidingWindows(10, 5))
    assert codec.by_window and not codec.trivial_windowing
    elements = [
        WindowedValue((k, v), ts, window.SlidingWindows(10, 5).assign(window.WindowFn.AssignContext(ts)))
        for k, v, ts in [("a", 1, 1), ("a", 2, 7), ("b", 3, 7), ("a", 4, 13), ("b", 5, 22)]
    ]
    records = list(codec.shuffle_records(_encode_all(codec.pre_impl, elements)))
    assert len(records) == 10  # one per element and window
    assert _comparable(_roundtrip(codec, elements)) == _comparable(_as_reference(codec, elements))


def test_a_large_window_of_one_key_is_streamed_with_its_pane():
    codec = _codec(window.FixedWindows(10))
    w = window.IntervalWindow(10, 20)
    elements = [WindowedValue(("hot", i), 12, [w]) for i in range(300)] + [
        WindowedValue(("hot", -1), 3, [window.IntervalWindow(0, 10)])
    ]
    grouped = {}
    for key, value in codec.shuffle_records(_encode_all(codec.pre_impl, elements)):
        grouped.setdefault(key, []).append(value)
    out = list(codec.grouped_blocks(sorted(grouped.items()), inline_bytes=100))
    streamed = [b for b in out if isinstance(b, GroupedValues)]
    assert len(streamed) == 1 and len(streamed[0].values) == 300
    ((template, [(key, values)]),) = group_runs(streamed[0], _port_coder(codec))
    (reference,) = [g for g in _as_reference(codec, elements) if g.windows == (w,)]
    assert key == "hot" and list(values) == list(range(300))
    assert template.windows == (w,) and template.pane_info == reference.pane_info
    assert template.timestamp.micros // 1000 == reference.timestamp.micros // 1000

    # The SDK harness reads the same group through Beam's state-backed
    # iterable: one page inline, the rest through the state token.
    state = ServedPages()
    state_backed = coders.WindowedValueCoder(
        coders.TupleCoder(
            [coders.StrUtf8Coder(), coders.StateBackedIterableCoder(coders.VarIntCoder(), read_state=state.read_state)]
        ),
        coders.IntervalWindowCoder(),
    )
    harness_view = state_backed.get_impl().decode_nested(streamed[0].with_state_token(state.serve))
    assert harness_view.windows == (w,) and harness_view.pane_info == reference.pane_info
    assert harness_view.value[0] == "hot" and list(harness_view.value[1]) == list(range(300))


def _port_coder(codec):
    """The windowed KV<K, Iterable<V>> coder a consumer reads the group with."""
    kv = coders.TupleCoder([coders.StrUtf8Coder(), coders.IterableCoder(coders.VarIntCoder())])
    return coders.WindowedValueCoder(kv, coders.IntervalWindowCoder())


def test_other_timestamp_combiners_and_triggers_keep_the_per_key_path():
    from apache_beam.transforms import trigger
    from apache_beam.transforms.window import TimestampCombiner

    assert not _codec(window.FixedWindows(10), timestamp_combiner=TimestampCombiner.OUTPUT_AT_EARLIEST).by_window
    assert not _codec(
        window.FixedWindows(10),
        trigger=trigger.Repeatedly(trigger.AfterCount(2)),
        accumulation_mode=trigger.AccumulationMode.DISCARDING,
    ).by_window
    assert not _codec(window.Sessions(10)).by_window
    assert not _codec().by_window  # the global window's own fast path


def test_split_elements_yields_each_encoding():
    impl = coders.VarIntCoder().get_impl()
    block = _encode_all(impl, [1, 300, 7])
    assert [impl.decode_nested(e) for e in split_elements(block, impl)] == [1, 300, 7]
