"""The public face of the RETRACTING accumulation mode.

How user code tells a retraction from an addition
-------------------------------------------------
Under ``accumulation_mode=RETRACTING`` a grouping emits, for every pane it
emitted before and now supersedes, a *retraction* of that pane, followed by the
new (accumulated) pane.  A retraction is an ordinary output element whose value
is wrapped in ``Retraction``:

    (key, [5, 7])                 # an addition: the pane's values
    (key, Retraction([5, 7]))     # a retraction: "forget (key, [5, 7])"

The retraction carries the window, timestamp and ``PaneInfo`` of the pane it
retracts.  ``is_retraction(x)`` tests for the wrapper; ``map_pane(fn, x)``
applies ``fn`` to what is inside and re-wraps, so a per-pane computation keeps
its polarity (``sum`` of a retracted pane is a retracted sum).

Consuming retractions in combiners
----------------------------------
``retractable(combine_fn)`` returns a CombineFn whose ``add_input`` accepts both
plain inputs and ``Retraction(input)``:
 * invertible combiners (``sum``, ``CountCombineFn``, ``MeanCombineFn``)
   subtract the retracted input from the accumulator;
 * all other combiners (``max``, ``min``, ``TopCombineFn``, any user CombineFn)
   keep the multiset of live inputs and recompute the output from it, so a
   retraction of the current maximum correctly exposes the runner-up.
Retracting an input that was never added raises ``ValueError`` (at
``extract_output``) for the retaining kind: it is a bug upstream.  The
invertible kind cannot detect it.
"""

import collections

from apache_beam.transforms import combiners
from apache_beam.transforms import core


class Retraction(object):
    """Marks ``value`` as retracted: downstream must undo its earlier addition."""

    __slots__ = ('value',)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return type(other) is Retraction and self.value == other.value

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(('Retraction', _hashable(self.value)))

    def __repr__(self):
        return 'Retraction(%r)' % (self.value,)

    def __reduce__(self):
        return Retraction, (self.value,)


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


def is_retraction(x):
    """True if ``x`` is a retraction (a ``Retraction`` wrapper)."""
    return type(x) is Retraction


def unwrap(x):
    """``(value, is_retraction)`` for an element that may be a retraction."""
    if type(x) is Retraction:
        return x.value, True
    return x, False


def map_pane(fn, x):
    """Applies ``fn`` to a (possibly retracted) value, keeping its polarity."""
    if type(x) is Retraction:
        return Retraction(fn(x.value))
    return fn(x)


class _InvertibleSum(core.CombineFn):
    """sum() that subtracts retracted inputs."""

    def create_accumulator(self):
        return 0

    def add_input(self, acc, x):
        if type(x) is Retraction:
            return acc - x.value
        return acc + x

    def merge_accumulators(self, accs):
        return sum(accs)

    def extract_output(self, acc):
        return acc


class _InvertibleCount(core.CombineFn):
    def create_accumulator(self):
        return 0

    def add_input(self, acc, x):
        return acc - 1 if type(x) is Retraction else acc + 1

    def merge_accumulators(self, accs):
        return sum(accs)

    def extract_output(self, acc):
        return acc


class _InvertibleMean(core.CombineFn):
    def create_accumulator(self):
        return (0, 0)

    def add_input(self, acc, x):
        s, n = acc
        if type(x) is Retraction:
            return (s - x.value, n - 1)
        return (s + x, n + 1)

    def merge_accumulators(self, accs):
        s = n = 0
        for a, b in accs:
            s += a
            n += b
        return (s, n)

    def extract_output(self, acc):
        s, n = acc
        return float('NaN') if n == 0 else s / n


class _Retaining(core.CombineFn):
    """Keeps the live input multiset; recomputes the wrapped fn's output."""

    def __init__(self, fn):
        self.fn = fn

    def create_accumulator(self):
        return collections.Counter()

    def add_input(self, acc, x):
        if type(x) is Retraction:
            # Counts may go negative in one partial accumulator: the addition may
            # sit in another one that is merged later.
            key = _hashable(x.value)
            acc[key] -= 1
            if not acc[key]:
                del acc[key]
        else:
            acc[_hashable(x)] += 1
        return acc

    def merge_accumulators(self, accs):
        out = collections.Counter()
        for a in accs:
            for k, n in a.items():
                out[k] += n
                if not out[k]:
                    del out[k]
        return out

    def extract_output(self, acc):
        fn = self.fn
        inner = fn.create_accumulator()
        for x, n in acc.items():
            if n < 0:
                raise ValueError('Retraction of %r, which was never added' % (x,))
            for _ in range(n):
                inner = fn.add_input(inner, x)
        return fn.extract_output(inner)


def _wrapped_callable(combine_fn):
    """The callable a ``CombinePerKey(callable)`` runs: Beam wraps it in a
    ``CallableWrapperCombineFn`` whose ``_fn`` is the only way to see it (no
    public accessor)."""
    if isinstance(combine_fn, core.CallableWrapperCombineFn):
        return getattr(combine_fn, '_fn', None)
    return None


def retractable(combine_fn):
    """A CombineFn equivalent to ``combine_fn`` that also consumes retractions."""
    if combine_fn is sum or _wrapped_callable(combine_fn) is sum:
        return _InvertibleSum()
    if isinstance(combine_fn, combiners.CountCombineFn):
        return _InvertibleCount()
    if isinstance(combine_fn, combiners.MeanCombineFn):
        return _InvertibleMean()
    if isinstance(combine_fn, (_InvertibleSum, _InvertibleCount, _InvertibleMean, _Retaining)):
        return combine_fn
    return _Retaining(core.CombineFn.maybe_from_callable(combine_fn))


def combine(combine_fn, inputs):
    """Convenience: ``retractable(combine_fn)`` applied to ``inputs``."""
    fn = retractable(combine_fn)
    acc = fn.create_accumulator()
    for x in inputs:
        acc = fn.add_input(acc, x)
    return fn.extract_output(acc)
