"""The GroupByKey byte paths agree with Beam's coders."""

import apache_beam as beam
from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.transforms import window
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.translation.planner import pipeline_proto_of, plan_pipeline
from beam_spark_runner.worker.grouping import GroupCodec, split_elements


def _codec(windowfn=None):
    p = beam.Pipeline()
    pc = p | beam.Create([("a", 1)])
    if windowfn:
        pc = pc | beam.WindowInto(windowfn)
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


def test_split_elements_yields_each_encoding():
    impl = coders.VarIntCoder().get_impl()
    block = _encode_all(impl, [1, 300, 7])
    assert [impl.decode_nested(e) for e in split_elements(block, impl)] == [1, 300, 7]
