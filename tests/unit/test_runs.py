"""worker/runs.py: runs encode to the very bytes Beam's WindowedValueCoder
writes, decode back to equal WindowedValues, and chunk without loss."""

from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_OutputStream
from apache_beam.transforms import window
from apache_beam.utils.timestamp import MIN_TIMESTAMP, Timestamp
from apache_beam.utils.windowed_value import PaneInfo, PaneInfoTiming, WindowedValue

from beam_spark_runner.worker import runs

IW = window.IntervalWindow
ELEMENTS = [
    WindowedValue("a", MIN_TIMESTAMP, (window.GlobalWindow(),)),
    WindowedValue("b", MIN_TIMESTAMP, (window.GlobalWindow(),)),
    WindowedValue("c", Timestamp(5), (IW(0, 10), IW(5, 15))),
    WindowedValue("d", Timestamp(5), (IW(0, 10), IW(5, 15))),
    WindowedValue("e", Timestamp(7), (IW(0, 10),), PaneInfo(False, True, PaneInfoTiming.LATE, 2, 1)),
    WindowedValue("f", MIN_TIMESTAMP, (window.GlobalWindow(),)),
]
CODER = coders.WindowedValueCoder(coders.StrUtf8Coder(), coders.IntervalWindowCoder())
GLOBAL_CODER = coders.WindowedValueCoder(coders.StrUtf8Coder(), coders.GlobalWindowCoder())


def _beam_bytes(coder, elements):
    stream = create_OutputStream()
    for wv in elements:
        coder.get_impl().encode_to_stream(wv, stream, True)
    return stream.get()


def _mixed_coder():
    # Global and interval windows in one block need a coder for both.
    return coders.WindowedValueCoder(coders.StrUtf8Coder(), coders.PickleCoder())


def test_decode_groups_equal_headers_and_round_trips_bytes():
    coder = _mixed_coder()
    block = _beam_bytes(coder, ELEMENTS)
    codec = runs.RunCodec(coder)
    decoded = codec.decode(block)
    assert [len(values) for _, values in decoded] == [2, 2, 1, 1]
    assert runs.windowed_values(decoded) == ELEMENTS
    assert codec.encode(decoded) == block


class _SubclassCoder(coders.WindowedValueCoder):
    """Stands for subclasses such as ParamWindowedValueCoder, whose bytes
    are not header + value: RunCodec must not split them."""


def test_other_windowed_coders_go_element_by_element():
    coder = _SubclassCoder(coders.StrUtf8Coder(), coders.GlobalWindowCoder())
    elements = [WindowedValue(v, MIN_TIMESTAMP, (window.GlobalWindow(),)) for v in "xyz"]
    block = _beam_bytes(coder, elements)
    codec = runs.RunCodec(coder)
    decoded = codec.decode(block)
    assert [v.value for v in runs.windowed_values(decoded)] == ["x", "y", "z"]
    assert codec.encode(decoded) == block


def test_chunks_keep_order_and_bound_sizes():
    template = ELEMENTS[0]
    data = [(template, list(range(7))), (ELEMENTS[2], [7]), (template, list(range(8, 20)))]
    chunks = list(runs.chunks(data, 5))
    assert all(runs.count(c) <= 5 for c in chunks)
    assert [v for c in chunks for _, values in c for v in values] == list(range(20))
    assert all(t is template or t is ELEMENTS[2] for c in chunks for t, _ in c)


def test_chunks_read_a_callable_size_before_each_chunk():
    sizes = iter([1, 2, 3, 100])
    data = [(ELEMENTS[0], list(range(10)))]
    chunks = list(runs.chunks(data, lambda: next(sizes)))
    assert [runs.count(c) for c in chunks] == [1, 2, 3, 4]
    assert [v for c in chunks for _, values in c for v in values] == list(range(10))


def test_chunk_sizer_starts_at_one_value_grows_while_output_is_small_and_shrinks_for_fan_out():
    from beam_spark_runner.worker.plain_stage import CHUNK_ELEMENTS, CHUNK_OUTPUT_TARGET, ChunkSizer

    sizer = ChunkSizer()
    assert sizer.size() == 1
    while sizer.size() < CHUNK_ELEMENTS:  # one output per value: doubles up to the cap
        before = sizer.size()
        sizer.observe(before, before)
        assert sizer.size() == min(CHUNK_ELEMENTS, before * 2)
    sizer.observe(CHUNK_ELEMENTS, CHUNK_ELEMENTS * 100)  # 100 outputs per value
    assert sizer.size() == CHUNK_OUTPUT_TARGET // 100
    sizer.observe(sizer.size(), sizer.size() * 100)  # at the target: stays
    assert sizer.size() == CHUNK_OUTPUT_TARGET // 100
    sizer.observe(1, 100_000)  # one value is the floor
    assert sizer.size() == 1
