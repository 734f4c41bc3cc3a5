"""RetractionAwareCoder: round trips, byte layout, determinism, proto form."""

import pickle

import pytest
from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.portability import python_urns
from apache_beam.runners import pipeline_context
from apache_beam.typehints import typehints

from triggers import Retraction
from triggers.retraction_coder import RetractionAwareCoder, grouped_pane_coder
from tests.unit.user_types import Point


CASES = [
    (coders.VarIntCoder(), [0, 7, -3, 1 << 40]),
    # StrUtf8 and Bytes encode differently nested (length prefix) and unnested.
    (coders.StrUtf8Coder(), ["", "a", "héllo"]),
    (coders.BytesCoder(), [b"", b"\x00\x01", b"x" * 300]),
    (coders.IterableCoder(coders.VarIntCoder()), [[], [1, 2, 3]]),
    (coders.IterableCoder(coders.StrUtf8Coder()), [["a", ""], []]),
    (coders.TupleCoder([coders.StrUtf8Coder(), coders.VarIntCoder()]), [("k", 1)]),
    (coders.FastPrimitivesCoder(), [None, 1.5, ("a", [1, {"b": 2}]), Point(3)]),
    (coders.LengthPrefixCoder(coders.FastPrimitivesCoder()), [Point(1), "x"]),
]


def _values(values):
    return list(values) + [Retraction(v) for v in values]


@pytest.mark.parametrize("inner,values", CASES, ids=[repr(c) for c, _ in CASES])
def test_round_trips_additions_and_retractions_nested_and_unnested(inner, values):
    coder = RetractionAwareCoder(inner)
    impl = coder.get_impl()
    for v in _values(values):
        assert coder.decode(coder.encode(v)) == v
        assert impl.decode_nested(impl.encode_nested(v)) == v
        assert type(coder.decode(coder.encode(v))) is type(v)


@pytest.mark.parametrize("inner,values", CASES, ids=[repr(c) for c, _ in CASES])
def test_many_nested_values_in_one_stream(inner, values):
    # The data channel's case: elements back to back in one block.
    impl = RetractionAwareCoder(inner).get_impl()
    out = create_OutputStream()
    for v in _values(values):
        impl.encode_to_stream(v, out, True)
    stream = create_InputStream(out.get())
    decoded = []
    while stream.size() > 0:
        decoded.append(impl.decode_from_stream(stream, True))
    assert decoded == _values(values)


def test_byte_layout_is_polarity_then_inner_encoding_in_the_same_context():
    inner = coders.StrUtf8Coder()
    coder = RetractionAwareCoder(inner)
    assert coder.encode("ab") == b"\x00" + inner.encode("ab")
    assert coder.encode(Retraction("ab")) == b"\x01" + inner.encode("ab")
    nested = coder.get_impl().encode_nested(Retraction("ab"))
    assert nested == b"\x01" + inner.get_impl().encode_nested("ab")


def test_inside_a_kv_coder_with_retraction_as_last_component():
    kv = coders.TupleCoder([coders.StrUtf8Coder(), RetractionAwareCoder(coders.IterableCoder(coders.VarIntCoder()))])
    for v in [("k", [1, 2]), ("k", Retraction([1, 2])), ("", Retraction([]))]:
        assert kv.decode(kv.encode(v)) == v
        assert kv.get_impl().decode_nested(kv.get_impl().encode_nested(v)) == v


def test_bad_polarity_byte_is_an_error():
    with pytest.raises(ValueError, match="polarity"):
        RetractionAwareCoder(coders.VarIntCoder()).decode(b"\x07\x01")


def test_deterministic_iff_inner_is():
    assert RetractionAwareCoder(coders.VarIntCoder()).is_deterministic()
    assert RetractionAwareCoder(coders.IterableCoder(coders.StrUtf8Coder())).is_deterministic()
    fast = RetractionAwareCoder(coders.FastPrimitivesCoder())
    assert not fast.is_deterministic()
    det = fast.as_deterministic_coder("step")
    assert det.is_deterministic() and isinstance(det, RetractionAwareCoder)
    assert det.encode(Retraction(("a", 1))) == det.encode(Retraction(("a", 1)))


def test_equality_hash_repr_type_hint():
    a = RetractionAwareCoder(coders.IterableCoder(coders.VarIntCoder()))
    b = RetractionAwareCoder(coders.IterableCoder(coders.VarIntCoder()))
    c = RetractionAwareCoder(coders.IterableCoder(coders.StrUtf8Coder()))
    assert a == b and hash(a) == hash(b) and not a != b
    assert a != c and a != coders.IterableCoder(coders.VarIntCoder())
    assert "RetractionAwareCoder" in repr(a)
    assert a.to_type_hint() == typehints.Union[typehints.Iterable[int], Retraction]


def test_size_estimate_counts_the_polarity_byte():
    coder = RetractionAwareCoder(coders.StrUtf8Coder())
    for v in ["abc", Retraction("abc")]:
        assert coder.estimate_size(v) == len(coder.encode(v))
        size, observables = coder.get_impl().get_estimated_size_and_observables(v, nested=True)
        assert size == len(coder.get_impl().encode_nested(v)) and observables == []


def test_proto_form_is_a_pickled_python_coder_the_sdk_decodes():
    coder = RetractionAwareCoder(coders.IterableCoder(coders.LengthPrefixCoder(coders.FastPrimitivesCoder())))
    proto = coder.to_runner_api(None)
    assert proto.spec.urn == python_urns.PICKLED_CODER and not proto.component_coder_ids
    # The SDK harness builds its coders from the descriptor the same way.
    context = pipeline_context.PipelineContext()
    decoded = coders.Coder.from_runner_api(proto, context)
    assert decoded == coder
    assert decoded.decode(coder.encode(Retraction([Point(1)]))) == Retraction([Point(1)])
    assert pickle.loads(pickle.dumps(coder)) == coder


def test_grouped_pane_coder_writes_what_the_sdk_reads_for_opaque_values():
    # The runner sees values of an unknown coder V only as V's bytes (Beam's
    # "safe" BytesCoder view of LengthPrefix<V>); the SDK reads
    # LengthPrefix<RetractionAware(Iterable<LengthPrefix<V>>)>.
    v = coders.FastPrimitivesCoder()
    sdk = coders.LengthPrefixCoder(RetractionAwareCoder(coders.IterableCoder(coders.LengthPrefixCoder(v))))
    runner = grouped_pane_coder(coders.BytesCoder())
    values = [Point(1), "two", None]
    opaque = [v.encode(x) for x in values]
    for pane, runner_pane in [(values, opaque), (Retraction(values), Retraction(opaque))]:
        assert runner.get_impl().encode_nested(runner_pane) == sdk.get_impl().encode_nested(pane)
        assert sdk.get_impl().decode_nested(runner.get_impl().encode_nested(runner_pane)) == pane


def test_grouped_pane_coder_for_known_values():
    runner = grouped_pane_coder(coders.VarIntCoder())
    sdk = coders.LengthPrefixCoder(RetractionAwareCoder(coders.IterableCoder(coders.VarIntCoder())))
    for pane in [[1, 2], Retraction([1, 2])]:
        assert runner.encode(pane) == sdk.encode(pane)
