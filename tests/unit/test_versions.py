"""The supported PySpark and Beam releases (beam_spark_runner/versions.py):
one clear error at import for a release outside them; the requirements
setup.py declares and the test environment's pins agree with them; and the
differences between supported PySpark releases the runner handles itself
(a stream reader that Spark does not tell where a batch starts)."""

import json
import os
import pickle
import subprocess
import sys


from beam_spark_runner import versions
from beam_spark_runner.execution import spark_internals
from beam_spark_runner.execution.checkpoint_files import LocalCheckpointFiles
from beam_spark_runner.execution.streaming_udfs import _BeamStreamReader
from beam_spark_runner.runner import engine_problems
from beam_spark_runner.streaming.script import compile_script
from beam_spark_runner.streaming.source_planner import is_planner_offset, write_holds
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline
from tests.unit.test_streaming_planning import _two_gbk_pipeline

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_release_numbers_are_read_from_version_strings():
    assert versions.parse_release("4.3.0") == (4, 3, 0)
    assert versions.parse_release("4.1.0.dev1") == (4, 1, 0)
    assert versions.parse_release("2.77.0rc2") == (2, 77, 0)
    assert versions.PYSPARK.contains("4.0.0") and versions.PYSPARK.contains("4.3.9")
    assert not versions.PYSPARK.contains("3.5.1") and not versions.PYSPARK.contains("4.4.0")
    assert versions.BEAM.contains("2.71.0") and not versions.BEAM.contains("2.70.0")
    assert not versions.BEAM.contains("2.78.0")


def test_a_release_outside_the_range_is_named_with_the_range():
    (problem,) = versions.problems({"pyspark": "3.5.1", "apache-beam": "2.77.0"})
    assert "pyspark 3.5.1 is installed" in problem and "pyspark>=4.0.0,<4.4" in problem, problem
    (problem,) = versions.problems({"pyspark": "4.3.0", "apache-beam": "2.60.0"})
    assert "apache-beam 2.60.0" in problem and "apache-beam>=2.71.0,<2.78" in problem, problem
    assert versions.problems({"pyspark": "4.3.0", "apache-beam": "2.77.0"}) == []
    assert versions.problems() == []  # the releases this suite runs on


def test_importing_the_runner_beside_an_unsupported_pyspark_fails_at_once_naming_it(tmp_path):
    # Package metadata found first on the path is what importlib.metadata
    # reports: a PySpark 3.5.1 installation as far as the version check sees.
    dist_info = tmp_path / "pyspark-3.5.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: pyspark\nVersion: 3.5.1\n")
    done = subprocess.run(
        [sys.executable, "-c", "import beam_spark_runner"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), REPO])),
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("beam_spark_runner.versions.UnsupportedVersionError: pyspark 3.5.1 is installed"), (
        done.stderr
    )
    assert "pyspark>=4.0.0,<4.4" in last


def test_setup_py_and_the_test_pins_follow_the_supported_ranges():
    with open(os.path.join(REPO, "tools", "test-constraints.txt")) as f:
        pins = dict(line.strip().split("==") for line in f if "==" in line and not line.startswith("#"))
    assert versions.PYSPARK.contains(pins["pyspark"]) and versions.BEAM.contains(pins["apache-beam"])
    declared = subprocess.run(
        [
            sys.executable,
            "-c",
            "import runpy, setuptools; setuptools.setup = lambda **kw: print(kw['install_requires'])"
            "; runpy.run_path('setup.py')",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    ).stdout
    assert versions.PYSPARK.requirement() in declared and versions.BEAM.requirement() in declared, declared
    assert "==" not in declared, "setup.py pins an exact release: %s" % declared


def test_a_streaming_pipeline_is_refused_only_where_pyspark_has_no_transform_with_state():
    problems = engine_problems(streaming=True)
    if spark_internals.has_transform_with_state():
        assert problems == []
    else:
        (problem,) = problems
        assert "PySpark 4.1 or later" in problem and versions.installed_version(versions.PYSPARK) in problem
    assert engine_problems(streaming=False) == []


def _reader(tmp_path, resume_offset=None):
    # Two GroupByKeys with allowed lateness: three batches to the end.
    plan = plan_streaming_pipeline(pipeline_proto_of(_two_gbk_pipeline(allowed_lateness=1)))
    script_path = tmp_path / "script.pickle"
    with open(script_path, "wb") as f:
        pickle.dump((compile_script(plan, key_groups=2), str(tmp_path), resume_offset), f)
    return _BeamStreamReader(str(script_path), 2)


def test_a_reader_not_told_the_start_plans_each_batch_after_the_last_one(tmp_path):
    # As PySpark before 4.2 asks: latestOffset() with no start.
    reader = _reader(tmp_path)
    first = reader.latestOffset()
    write_holds(str(tmp_path), 1, {})  # what the driver records once batch 1 ran
    second = reader.latestOffset()
    assert (first["batch"], second["batch"]) == (1, 2)
    # As PySpark 4.2 asks: the start given wins.
    assert reader.latestOffset(first, None)["batch"] == 2


def test_a_restarted_reader_not_told_the_start_resumes_from_spark_offset_log(tmp_path):
    reader = _reader(tmp_path)
    first = reader.latestOffset()
    write_holds(str(tmp_path), 1, {})
    second = reader.latestOffset()
    write_holds(str(tmp_path), 2, {})
    # Spark's offset log after batch ids 0 and 1: a version line, metadata,
    # then one line per source (another source's offset, then ours).
    files = LocalCheckpointFiles(str(tmp_path / "checkpoint"), str(tmp_path / "checkpoint"))
    for batch_id, offset in enumerate((first, second)):
        files.write(
            "spark/offsets/%d" % batch_id,
            ('v1\n{"batchWatermarkMs":0}\n{"events":{"0":%d}}\n%s' % (batch_id, json.dumps(offset))).encode(),
        )
    resumed = spark_internals.last_logged_source_offset(files, "spark", is_planner_offset)
    assert resumed == second
    restarted = _reader(tmp_path, resume_offset=resumed)
    assert restarted.latestOffset()["batch"] == 3
    # A re-run of the last batch tells the reader its end first.
    rerun = _reader(tmp_path)
    rerun.partitions(first, second)
    assert rerun.latestOffset()["batch"] == 3
    assert spark_internals.last_logged_source_offset(files, "nothing-logged", is_planner_offset) is None
