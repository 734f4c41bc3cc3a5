"""A representative subset of Beam's own TestPipeline-based suites, run with
SparkRunner as TestPipeline's default runner (the full list runs with
`tools/beam_suites.py`; see docs/conformance_modules.md).

Beam's TestCase classes are subclassed here unmodified; tests that cannot
pass name the reason and the issue they wait for in BEAM_SUITE_SKIPS.
"""

import importlib
import unittest

import pytest
from apache_beam.testing.test_pipeline import TestPipeline

from tests.conformance.skips import BEAM_SUITE_SKIPS

MODULES = [
    "apache_beam.transforms.core_test",
    "apache_beam.transforms.create_test",
    "apache_beam.transforms.sideinputs_test",
    "apache_beam.transforms.dofn_lifecycle_test",
    "apache_beam.transforms.combinefn_lifecycle_test",
    # Its three it_validatesrunner tests run packed combiners (Beam's
    # combiner-packing annotation) through TestPipeline; the rest are unit
    # tests of Beam's translation phases.
    "apache_beam.runners.portability.fn_api_runner.translations_test",
]

SPARK_TEST_PIPELINE_OPTIONS = "--runner=beam_spark_runner.SparkRunner"


@pytest.fixture(autouse=True, scope="module")
def spark_is_test_pipeline_default():
    previous = TestPipeline.pytest_test_pipeline_options
    TestPipeline.pytest_test_pipeline_options = SPARK_TEST_PIPELINE_OPTIONS
    yield
    TestPipeline.pytest_test_pipeline_options = previous


def _test_cases(module):
    for name, obj in sorted(vars(module).items()):
        if isinstance(obj, type) and issubclass(obj, unittest.TestCase) and obj.__module__ == module.__name__:
            yield name, obj


def _on_spark(module_name):
    module = importlib.import_module(module_name)
    short = module_name.rsplit(".", 1)[-1]
    for name, case in _test_cases(module):
        attrs = {"__module__": __name__}
        for test, reason in BEAM_SUITE_SKIPS.get("%s.%s" % (short, name), {}).items():
            if not hasattr(case, test):
                raise AttributeError("skip list names %s.%s.%s, which does not exist" % (short, name, test))
            attrs[test] = unittest.skip(reason)(getattr(case, test))
        cls_name = "Spark_%s_%s" % (short, name)
        globals()[cls_name] = type(cls_name, (case,), attrs)


for _module_name in MODULES:
    _on_spark(_module_name)


def test_beam_suites_here_run_on_spark_runner():
    from beam_spark_runner import SparkRunner

    assert isinstance(TestPipeline().runner, SparkRunner)
