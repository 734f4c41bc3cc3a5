"""The Beam job of benchmarks/batch_wordcount.py: examples/wordcount.py's
pipeline run on a given runner (run_beam: SparkRunner for spark_runner,
DirectRunner for direct), and the prefixes of it that --phases times
(_beam_phase)."""

import importlib.util
import os
import sys

from wordcount_config import EXAMPLES_DIR
from wordcount_pyspark import _tokenize


# -- the Beam variants (spark_runner, direct) -------------------------------------


def _wordcount_module():
    if EXAMPLES_DIR not in sys.path:
        sys.path.insert(0, EXAMPLES_DIR)
    spec = importlib.util.spec_from_file_location("wordcount", os.path.join(EXAMPLES_DIR, "wordcount.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["wordcount"] = module
    spec.loader.exec_module(module)
    return module


def run_beam(runner_args, input_path, output_prefix):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    wordcount = _wordcount_module()
    p = beam.Pipeline(options=PipelineOptions(runner_args))
    wordcount.build(p, input_path, output_prefix)
    result = p.run()
    state = result.wait_until_finish()
    if str(state) not in ("DONE", "PipelineState.DONE"):
        raise RuntimeError("pipeline finished in state %s" % state)


# -- phase timing (--phases): wordcount_phases.py ----------------------------------
# Each phase is a prefix of the word count, ending in a cheap global aggregate
# instead of the write; differences between phases give each part's cost.


def _beam_phase(runner_args, input_path, phase):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    p = beam.Pipeline(options=PipelineOptions(runner_args))
    lines = p | "Read" >> beam.io.ReadFromText(input_path)
    if phase == "read":
        tail = lines | "Len" >> beam.Map(len)
    elif phase == "split":
        tail = lines | "Split" >> beam.FlatMap(_tokenize) | "Len" >> beam.Map(len)
    else:  # count: everything but formatting and writing
        tail = (
            lines
            | "Split" >> beam.FlatMap(_tokenize)
            | "PairWithOne" >> beam.Map(lambda w: (w, 1))
            | "Count" >> beam.CombinePerKey(sum)
            | "Values" >> beam.Values()
        )
    tail | "Sum" >> beam.CombineGlobally(sum) | "Drop" >> beam.Filter(lambda x: False)
    p.run().wait_until_finish()
