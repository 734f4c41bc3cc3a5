"""Beam Java's ValidatesRunner tests in streaming mode, the slice CI runs
(tools/validates_runner_slice_streaming.txt), through Beam Java's
PortableRunner against this runner's job service
(tests/integration/validates_runner_slices.py). A file of its own so that
it and the batch slice can run in two test processes at once."""

import pytest

from tests.integration.validates_runner_slices import run_slice, suite  # noqa: F401  (suite: a fixture)

pytestmark = pytest.mark.timeout(1200)


def test_the_streaming_slice_of_beams_java_validates_runner_tests_passes(suite, job_endpoint, tmp_path):  # noqa: F811
    run_slice(suite, job_endpoint, tmp_path, "streaming")
