"""The launcher Spark's Python processes start through on a local master:
the installed PySpark's own zips are dropped from PYTHONPATH (so PySpark
imports with its cached bytecode), every other entry stays in order, and a
user's interpreter or a cluster master is left alone."""

import os
import subprocess
import sys

import pytest

from beam_spark_runner.execution import local_python


def _child_sys_path(launcher, python_path):
    out = subprocess.run(
        [launcher, "-c", "import os, sys, pyspark; print(os.environ.get('PYTHONPATH', '')); print(pyspark.__file__)"],
        env=dict(os.environ, PYTHONPATH=python_path),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return out[0], out[1]


def test_the_installed_pysparks_zips_are_dropped_and_every_other_entry_kept_in_order(tmp_path):
    zips = local_python.installed_pyspark_zips()
    assert any(z.endswith("pyspark.zip") for z in zips), zips
    path = local_python.launcher(directory=str(tmp_path))
    other = [str(tmp_path / "a b"), str(tmp_path / "it's"), "/elsewhere/spark/python/lib/pyspark.zip"]
    python_path, imported = _child_sys_path(path, os.pathsep.join([zips[0], other[0], *zips[1:], other[1], other[2]]))
    assert python_path.split(os.pathsep) == other
    assert not imported.startswith(tuple(zips))
    assert "python/lib" not in imported


def test_with_only_the_zips_on_the_path_the_child_still_imports_pyspark(tmp_path):
    path = local_python.launcher(directory=str(tmp_path))
    python_path, imported = _child_sys_path(path, os.pathsep.join(local_python.installed_pyspark_zips()))
    assert python_path == ""
    assert imported.endswith(os.path.join("pyspark", "__init__.py"))


def test_the_launcher_is_written_once_and_rewritten_when_damaged(tmp_path):
    first = local_python.launcher(directory=str(tmp_path))
    assert local_python.launcher(directory=str(tmp_path)) == first
    with open(first, "w") as f:
        f.write("#!/bin/sh\nexit 3\n")
    assert local_python.launcher(directory=str(tmp_path)) == first
    assert subprocess.run([first, "-c", "pass"]).returncode == 0
    assert local_python.is_launcher(first)
    assert not local_python.is_launcher(sys.executable)


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)


def test_a_local_master_runs_this_interpreter_through_the_launcher(clean_env):
    local_python.use_for_local_master("local[2]")
    assert local_python.is_launcher(os.environ["PYSPARK_PYTHON"])
    assert os.environ["PYSPARK_DRIVER_PYTHON"] == os.environ["PYSPARK_PYTHON"]


def test_a_users_python_and_a_cluster_master_are_left_alone(clean_env, monkeypatch):
    local_python.use_for_local_master("spark://host:7077")
    assert "PYSPARK_PYTHON" not in os.environ
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/team-env/bin/python")
    local_python.use_for_local_master("local[*]")
    assert os.environ["PYSPARK_PYTHON"] == "/opt/team-env/bin/python"


def test_a_launcher_that_cannot_run_here_is_not_used(tmp_path, monkeypatch):
    """As under a temporary directory mounted noexec: Spark then starts the
    interpreter itself."""
    monkeypatch.setattr(local_python, "_SCRIPT", "#!/nonexistent/shell\n" + local_python._SCRIPT)
    assert local_python.launcher(directory=str(tmp_path)) is None
