"""The driver's own modules reach Spark's Python workers
(execution/user_modules.py): a DoFn defined in a module imported from a
directory the workers do not have on their path runs on SparkRunner."""

import os
import subprocess
import sys
import textwrap

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from beam_spark_runner import SparkRunner

MODULE = textwrap.dedent(
    """
    import apache_beam as beam

    from helper_pkg.naming import prefix


    class Tag(beam.DoFn):
        def process(self, x):
            yield prefix() + str(x)
    """
)


def _write_modules(directory):
    (directory / "sibling_transforms_for_test.py").write_text(MODULE)
    package = directory / "helper_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    # Imported only in the workers (by the DoFn's module), never before on the driver.
    (package / "naming.py").write_text("def prefix():\n    return 'tagged-'\n")


def test_a_dofn_from_a_directory_the_workers_lack_runs(tmp_path, monkeypatch):
    _write_modules(tmp_path)
    # The premise: a Python started where Spark starts its workers cannot import it.
    probe = subprocess.run(
        [sys.executable, "-c", "import sibling_transforms_for_test"],
        cwd=os.getcwd(),
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert "ModuleNotFoundError" in probe.stderr
    monkeypatch.syspath_prepend(str(tmp_path))
    import sibling_transforms_for_test

    with beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([])) as p:
        assert_that(
            p | beam.Create([1, 2, 3]) | beam.ParDo(sibling_transforms_for_test.Tag()),
            equal_to(["tagged-1", "tagged-2", "tagged-3"]),
        )


def test_a_dofn_from_a_namespace_package_runs(tmp_path, monkeypatch):
    """A directory without __init__.py (a repository's `examples/`) is a
    namespace package, which Python's zip importer cannot import: the
    shipped zip gives it an empty __init__.py."""
    package = tmp_path / "ns_examples_for_test"
    package.mkdir()
    (package / "scoring.py").write_text("def double(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from ns_examples_for_test import scoring

    with beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([])) as p:
        assert_that(p | beam.Create([1, 2]) | beam.Map(scoring.double), equal_to([2, 4]))
