"""CombinePerKey over a RETRACTING input: combine each pane, keep its polarity.

A GroupByKey under ``accumulation_mode=RETRACTING`` emits additions
``(key, values)`` and retractions ``(key, Retraction(values))`` of panes it
emitted before.  A per-key combine of such a stream emits, per pane, the
combined pane with the same polarity:

    (key, values)              ->  (key, combine(values))
    (key, Retraction(values))  ->  (key, Retraction(combine(values)))

Since a retraction carries exactly the values (in the same order) of the pane
it retracts, ``Retraction(combine(values))`` is exactly the output emitted for
that pane earlier, for every CombineFn whose result depends only on its input
sequence (every deterministic CombineFn; not e.g. a random sample).
"""

from apache_beam.transforms import core

from triggers.retractions import Retraction


class RetractionAwareCombineValuesDoFn(core.DoFn):
    """Wraps the ``DoFn`` of a ``CombineValues`` (Beam's ``CombineValuesDoFn``:
    ``(key, iterable) -> [(key, combined)]``) so that it also accepts
    ``(key, Retraction(iterable))`` and then outputs
    ``(key, Retraction(combined))``.  Additions are passed through unchanged;
    the lifecycle methods (setup, bundles, teardown) are delegated."""

    def __init__(self, combine_values_dofn):
        super().__init__()
        self.combine_values_dofn = combine_values_dofn

    def setup(self):
        self.combine_values_dofn.setup()

    def start_bundle(self):
        return self.combine_values_dofn.start_bundle()

    def process(self, element, *args, **kwargs):
        key, values = element
        if type(values) is Retraction:
            outputs = self.combine_values_dofn.process((key, values.value), *args, **kwargs)
            return [(k, Retraction(combined)) for k, combined in outputs]
        return self.combine_values_dofn.process(element, *args, **kwargs)

    def finish_bundle(self):
        return self.combine_values_dofn.finish_bundle()

    def teardown(self):
        self.combine_values_dofn.teardown()
