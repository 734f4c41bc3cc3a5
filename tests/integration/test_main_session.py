"""Classes defined in the driver's main script resolve as `__main__.<name>`
in Spark's Python workers (execution/main_session.py): values of a
`typing.NamedTuple` from the script pickled by FastPrimitivesCoder used to
fail with "Can't pickle <class '__main__.Point'>". The script runs in its
own process, so that its `__main__` is the script, as for a user."""

import subprocess
import sys
import textwrap

SCRIPT = """
import sys
import typing

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions


class Point(typing.NamedTuple):
    x: int
    label: str


def make(i):
    return Point(i, "p%d" % i)


if __name__ == "__main__":
    output = sys.argv[1]
    options = PipelineOptions(["--runner=beam_spark_runner.SparkRunner", "--spark_master=local[2,4]"])
    with beam.Pipeline(options=options) as p:
        points = p | beam.Create([1, 2, 3]) | beam.Map(make).with_output_types(Point)
        _ = (
            points
            | beam.GroupBy(lambda point: point.x % 2)
            | beam.MapTuple(lambda parity, group: "%d:%s" % (parity, ",".join(sorted(pt.label for pt in group))))
            | beam.io.WriteToText(output)
        )
"""


def test_a_named_tuple_from_the_main_script_crosses_a_shuffle(tmp_path):
    script = tmp_path / "points.py"
    script.write_text(textwrap.dedent(SCRIPT))
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "out")],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = sorted(
        line.strip() for path in tmp_path.glob("out-*") for line in path.read_text().splitlines() if line.strip()
    )
    assert lines == ["0:p2", "1:p1,p3"]
