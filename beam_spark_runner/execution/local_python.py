"""The interpreter Spark starts for its Python processes on a local master
when the runner picked it (the driver's own; the user chose none).

Spark puts its own copies of PySpark and Py4J first on every Python
process's path (`$SPARK_HOME/python/lib/pyspark.zip` and the Py4J zip).
Python cannot cache compiled code for modules imported from a zip, so every
process Spark starts compiles PySpark again: about 0.6 s of CPU each,
measured, and a streaming query starts several (a planner per Python data
source, one per stateful operator, the source runner, the worker daemon).
When those zips are the ones inside the PySpark this interpreter imports
(a pip-installed PySpark: `SPARK_HOME` is that package), they hold the same
files as the installed package, so the launcher drops them from PYTHONPATH
and the process imports the installed package with its cached bytecode.
Any other PYTHONPATH entry is kept in order; a Spark installed elsewhere
(its zips at other paths) is left first on the path, as Spark put it.

The launcher is a POSIX shell script that `exec`s the interpreter (no
second Python start), written once per interpreter and PySpark under the
temporary directory, and checked to start once per process (where the
temporary directory is mounted `noexec`, Spark starts the interpreter
itself, as without the launcher). It exists only on this machine: it is
used only on a local master, whose Python processes run here.
"""

import glob
import hashlib
import os
import stat
import subprocess
import sys
import tempfile
from typing import Optional, Sequence

_SCRIPT = """#!/bin/sh
# Runs %(python)s for Spark's Python processes on a local master, without
# the PySpark and Py4J zips of the installed PySpark it imports anyway
# (beam_spark_runner/execution/local_python.py).
set -f
kept=
IFS=:
for entry in $PYTHONPATH; do
  case "$entry" in
    %(patterns)s) ;;
    *) kept="${kept:+$kept:}$entry" ;;
  esac
done
unset IFS
PYTHONPATH=$kept
export PYTHONPATH
exec %(quoted_python)s "$@"
"""


def installed_pyspark_zips() -> Sequence[str]:
    """The PySpark and Py4J zips inside the PySpark this interpreter
    imports (present in a pip-installed PySpark)."""
    import pyspark

    lib = os.path.join(os.path.dirname(os.path.abspath(pyspark.__file__)), "python", "lib")
    return sorted(glob.glob(os.path.join(lib, "pyspark.zip")) + glob.glob(os.path.join(lib, "py4j-*-src.zip")))


def _shell_quote(text):
    return "'%s'" % text.replace("'", "'\\''")


def script_text(python: str, zips: Sequence[str]) -> str:
    """The launcher for `python` dropping exactly `zips` from PYTHONPATH."""
    return _SCRIPT % {
        "python": python,
        "patterns": "|".join(_shell_quote(z) for z in zips),
        "quoted_python": _shell_quote(python),
    }


_STARTS = {}  # launcher path -> whether it started `python` in this process


def _starts(path):
    """Whether the launcher runs here (a temporary directory mounted
    `noexec` would refuse it); checked once per process."""
    if path not in _STARTS:
        try:
            _STARTS[path] = subprocess.run([path, "-c", "pass"], timeout=60, capture_output=True).returncode == 0
        except (OSError, subprocess.SubprocessError):
            _STARTS[path] = False
    return _STARTS[path]


def launcher(python: Optional[str] = None, directory: Optional[str] = None) -> Optional[str]:
    """The path of the launcher for `python` (default: this interpreter),
    written if missing; None when the installed PySpark has no zips to
    drop, or when the launcher cannot be written or run there (then Spark
    starts `python` as it would)."""
    python = python or sys.executable
    zips = installed_pyspark_zips()
    if not zips or any(":" in z or "\n" in z for z in zips):  # a path PYTHONPATH could not hold as one entry
        return None
    text = script_text(python, zips)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    directory = directory or tempfile.gettempdir()
    path = os.path.join(directory, "beam-spark-python-%d-%s" % (os.getuid(), digest))
    try:
        with open(path) as f:
            if f.read() == text:
                return path if _starts(path) else None
    except OSError:
        pass
    try:
        fd, tmp = tempfile.mkstemp(prefix=".beam-spark-python-", dir=directory)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        os.replace(tmp, path)
    except OSError:
        return None
    _STARTS.pop(path, None)
    return path if _starts(path) else None


def use_for_local_master(master: str) -> None:
    """On a local master whose Python processes would run this interpreter
    (PYSPARK_PYTHON unset or this interpreter, as
    `session.ensure_python_workers_match_driver` leaves it), points
    PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON at the launcher. Call before
    the SparkContext starts: it and its JVM read them then."""
    if not master.startswith("local"):
        return
    if os.environ.get("PYSPARK_PYTHON", sys.executable) != sys.executable:
        return  # the user's choice
    path = launcher()
    if path is None:
        return
    os.environ["PYSPARK_PYTHON"] = path
    if os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable) == sys.executable:
        os.environ["PYSPARK_DRIVER_PYTHON"] = path


def is_launcher(path: Optional[str]) -> bool:
    """Whether `path` is a launcher this module wrote (not a user's choice)."""
    return bool(path) and os.path.basename(path).startswith("beam-spark-python-%d-" % os.getuid())
