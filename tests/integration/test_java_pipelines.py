"""A Beam Java pipeline (examples/java/wordcount) built with Maven and
submitted to the job service by Beam Java's own PortableRunner: every
stage runs in Beam's Java SDK harness on this runner."""

import collections
import glob
import re
import subprocess

import pytest

from tests import java_example


pytestmark = pytest.mark.timeout(900)

TEXT = """The quick brown fox jumps over the lazy dog.
The dog sleeps; the fox runs!
It's a dog's life, isn't it?
"""


@pytest.fixture(scope="module")
def built_example(tmp_path_factory):
    return java_example.build(tmp_path_factory.mktemp("java-wordcount"))


@pytest.mark.parametrize(
    "main_class",
    [
        "org.example.WordCount",
        # A stateful DoFn: a ValueState per word and an event-time timer,
        # served by the runner's state API and timer streams.
        "org.example.StatefulWordCount",
    ],
)
def test_a_java_word_count_through_beams_java_portable_runner(built_example, job_endpoint, tmp_path, main_class):
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    output = tmp_path / "out" / "counts"
    done = subprocess.run(
        java_example.java_command(
            built_example,
            main_class,
            "--runner=PortableRunner",
            "--jobEndpoint=" + job_endpoint,
            "--input=" + str(text),
            "--output=" + str(output),
        ),
        cwd=built_example,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    expected = collections.Counter(w for w in re.split(r"[^a-z']+", TEXT.lower()) if w)
    counted = collections.Counter()
    for path in glob.glob(str(output) + "*"):
        with open(path) as f:
            for line in f:
                word, n = line.rstrip("\n").split("\t")
                counted[word] += int(n)
    assert counted == expected
