"""A Beam coder for values that may be retractions.

Under ``accumulation_mode=RETRACTING`` a PCollection holds both additions
``v`` and retractions ``Retraction(v)`` (see ``triggers.retractions``).  A
typed coder such as ``IterableCoder`` or ``VarIntCoder`` cannot hold the
wrapper, so the runner wraps such a PCollection's value coder in
``RetractionAwareCoder``.

Encoding (the same in nested and unnested contexts, apart from the inner
coder's own context handling)::

    v              ->  0x00  inner.encode(v)
    Retraction(v)  ->  0x01  inner.encode(v)

The inner value is encoded in the context the outer value is encoded in, so
``RetractionAwareCoder(c)`` round-trips every value ``c`` round-trips, and its
``Retraction``, in both contexts.  It is deterministic iff ``inner`` is.
"""

from apache_beam.coders import coder_impl
from apache_beam.coders import coders
from apache_beam.typehints import typehints

from triggers.retractions import Retraction

ADDITION = 0
RETRACTION = 1


class _RetractionAwareCoderImpl(coder_impl.StreamCoderImpl):
    """Polarity byte, then the inner encoding in the same context."""

    def __init__(self, inner_impl):
        self._inner = inner_impl

    def encode_to_stream(self, value, out, nested):
        if type(value) is Retraction:
            out.write_byte(RETRACTION)
            self._inner.encode_to_stream(value.value, out, nested)
        else:
            out.write_byte(ADDITION)
            self._inner.encode_to_stream(value, out, nested)

    def decode_from_stream(self, in_stream, nested):
        polarity = in_stream.read_byte()
        value = self._inner.decode_from_stream(in_stream, nested)
        if polarity == ADDITION:
            return value
        if polarity == RETRACTION:
            return Retraction(value)
        raise ValueError('RetractionAwareCoder: bad polarity byte %r' % polarity)

    def estimate_size(self, value, nested=False):
        if type(value) is Retraction:
            value = value.value
        return 1 + self._inner.estimate_size(value, nested)

    def get_estimated_size_and_observables(self, value, nested=False):
        if type(value) is Retraction:
            value = value.value
        size, observables = self._inner.get_estimated_size_and_observables(value, nested)
        return 1 + size, observables

    def __repr__(self):
        return 'RetractionAwareCoderImpl[%r]' % (self._inner,)


class RetractionAwareCoder(coders.FastCoder):
    """Encodes ``v`` and ``Retraction(v)`` for any ``v`` ``inner`` encodes.

    Guarantees: ``decode(encode(x)) == x`` (nested and unnested) for every ``x``
    that is ``v`` or ``Retraction(v)`` with ``v`` round-tripping through
    ``inner``; deterministic iff ``inner`` is; equal (and equally hashed) iff the
    inner coders are equal.  Serialized in a pipeline proto as a pickled Python
    coder (``beam:coder:pickled_python:v1``), which any Python SDK harness
    decodes.
    """

    def __init__(self, inner):
        self._inner = inner

    @property
    def inner(self):
        return self._inner

    def _create_impl(self):
        return _RetractionAwareCoderImpl(self._inner.get_impl())

    def is_deterministic(self):
        return self._inner.is_deterministic()

    def as_deterministic_coder(self, step_label, error_message=None):
        if self.is_deterministic():
            return self
        return RetractionAwareCoder(self._inner.as_deterministic_coder(step_label, error_message))

    def to_type_hint(self):
        return typehints.Union[self._inner.to_type_hint(), Retraction]

    def _get_component_coders(self):
        return [self._inner]

    def __eq__(self, other):
        return type(self) is type(other) and self._inner == other._inner

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((type(self), self._inner))

    def __repr__(self):
        return 'RetractionAwareCoder[%r]' % (self._inner,)


def grouped_pane_coder(value_coder):
    """The coder a runner-side grouping writes one grouped value with, for a
    GroupByKey whose output coder is ``KV<K, RetractionAware(Iterable<V'>)>``
    (``beam_spark_runner.translation.retracting``), given ``value_coder``: the
    coder the runner decoded the GroupByKey's input values with (Beam's "safe"
    view of ``V'``).  Beam's phases length-prefix the unknown retraction-aware
    coder on the data channel, hence the ``LengthPrefixCoder``; the result is
    byte-identical to what the SDK harness reads."""
    return coders.LengthPrefixCoder(RetractionAwareCoder(coders.IterableCoder(value_coder)))
