"""examples/wordcount.py gives identical output on DirectRunner and SparkRunner."""

import glob
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import wordcount  # noqa: E402


def _read(prefix):
    lines = []
    for path in glob.glob(prefix + "*"):
        with open(path) as f:
            lines.extend(f.read().splitlines())
    return sorted(lines)


@pytest.mark.parametrize("input_name", ["sample.txt"])
def test_wordcount_same_on_direct_and_spark(tmp_path, input_name):
    source = os.path.join(os.path.dirname(wordcount.__file__), "data", input_name)
    wordcount.run(["--input", source, "--output", str(tmp_path / "direct"), "--runner=DirectRunner"])
    wordcount.run(["--input", source, "--output", str(tmp_path / "spark")])  # SparkRunner by default
    direct, spark = _read(str(tmp_path / "direct")), _read(str(tmp_path / "spark"))
    assert spark, "SparkRunner wrote nothing"
    assert spark == direct
    assert any(line.startswith("the: ") for line in spark)
