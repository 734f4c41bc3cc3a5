"""A CombineFn that counts the records folded into each accumulator.

Behind a lifted CombinePerKey the keyed step receives accumulators, not
records: one per key, window and bundle of the stage before the shuffle.
Streaming counts the input that arrives behind the watermark
(`late_records`, `dropped_due_to_lateness`) at that keyed step, so without
the count it would count partial sums. `RecordCountingCombineFn` carries,
beside the user's accumulator, how many (record, window) pairs went into
it: its accumulator is `(count, accumulator)`, coded as Beam's standard
KV<varint, accumulator coder>, so every SDK and the runner read it.

Guarantees: `extract_output` returns exactly what the wrapped CombineFn
returns for the same inputs; `merge_accumulators` adds the counts, so the
count of a merged accumulator is the number of records in all of them.
"""

from apache_beam.coders import coders
from beam_spark_runner.worker.beam_internals import pickler
from apache_beam.transforms import core


class RecordCountingCombineFn(core.CombineFn):
    """`inner`'s combine, with the number of inputs in each accumulator.

    Built from the wrapped CombineFn or from its pickled form (as a
    pipeline proto holds it): the runner wraps the user's CombineFn while
    planning without unpickling it (the driver need not import the user's
    modules), and it is unpickled where it runs."""

    def __init__(self, inner: core.CombineFn = None, pickled_inner: bytes = None):
        super().__init__()
        if (inner is None) == (pickled_inner is None):
            raise ValueError("RecordCountingCombineFn needs exactly one of inner and pickled_inner")
        self._inner, self._pickled_inner = inner, pickled_inner

    @property
    def inner(self) -> core.CombineFn:
        if self._inner is None:
            self._inner = pickler.loads(self._pickled_inner)
        return self._inner

    def __getstate__(self):
        pickled = self._pickled_inner if self._pickled_inner is not None else pickler.dumps(self._inner)
        return {"pickled_inner": pickled}

    def __setstate__(self, state):
        self.__init__(pickled_inner=state["pickled_inner"])

    def default_label(self):
        return self.inner.default_label()

    def setup(self, *args, **kwargs):
        self.inner.setup(*args, **kwargs)

    def teardown(self, *args, **kwargs):
        self.inner.teardown(*args, **kwargs)

    def create_accumulator(self, *args, **kwargs):
        return 0, self.inner.create_accumulator(*args, **kwargs)

    def add_input(self, accumulator, element, *args, **kwargs):
        count, inner = accumulator
        return count + 1, self.inner.add_input(inner, element, *args, **kwargs)

    def add_inputs(self, accumulator, elements, *args, **kwargs):
        # The inner CombineFn's own add_inputs (often faster than one
        # add_input per element) over a list whose length is the count.
        if not isinstance(elements, (list, tuple)):
            elements = list(elements)
        count, inner = accumulator
        return count + len(elements), self.inner.add_inputs(inner, elements, *args, **kwargs)

    def merge_accumulators(self, accumulators, *args, **kwargs):
        counts, inners = 0, []
        for count, inner in accumulators:
            counts += count
            inners.append(inner)
        return counts, self.inner.merge_accumulators(inners, *args, **kwargs)

    def compact(self, accumulator, *args, **kwargs):
        count, inner = accumulator
        return count, self.inner.compact(inner, *args, **kwargs)

    def extract_output(self, accumulator, *args, **kwargs):
        return self.inner.extract_output(accumulator[1], *args, **kwargs)

    def get_accumulator_coder(self):
        return coders.TupleCoder([coders.VarIntCoder(), self.inner.get_accumulator_coder()])

    def display_data(self):
        return self.inner.display_data()


def record_count(accumulator) -> int:
    """How many records went into an accumulator of a
    RecordCountingCombineFn."""
    return accumulator[0]
