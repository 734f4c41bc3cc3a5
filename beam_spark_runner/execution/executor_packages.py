"""The Python packages a pipeline asks for (`--requirements_file`,
`--extra_packages`, `--setup_file`, or the same artifacts staged with the
job service), installed once on the driver and shipped to every executor.

`pip install --target` puts them in a fresh directory; distributions the
driver's environment already has at the same version are removed from it
(the executors run the same environment, or a packed copy of it); the rest
is zipped and given to `SparkContext.addPyFile`, so every Python worker has
it on its path. Python imports packages from a zip only when they are pure
Python: a package with compiled extension modules is refused, naming it,
with the way that works for those (a packed environment given to Spark's
`--archives`, docs/deployment.md). Nothing is silently left out.

Guarantees: the same inputs install once per driver process (content
hash); a pip failure fails the run before any Spark job, with pip's output.
"""

import dataclasses
import glob
import hashlib
import importlib.metadata
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from typing import Tuple

from beam_spark_runner.errors import UnsupportedPipelineError

_LOG = logging.getLogger(__name__)
_COMPILED = (".so", ".pyd", ".dylib")
_lock = threading.Lock()
_shipped = {}


@dataclasses.dataclass(frozen=True)
class PythonDependencies:
    """What to install: a requirements file, package files or project
    directories (`pip install` arguments), and directories of package files
    pip may install from (`--find-links`)."""

    requirements_file: str = None
    packages: Tuple[str, ...] = ()
    find_links: Tuple[str, ...] = ()

    def is_empty(self):
        return not (self.requirements_file or self.packages)

    def digest(self):
        h = hashlib.sha256()
        for path in ([self.requirements_file] if self.requirements_file else []) + list(self.packages):
            h.update(os.path.basename(path).encode())
            for file in sorted(_files_under(path)):
                with open(file, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
        for directory in self.find_links:
            h.update(directory.encode())
        return h.hexdigest()[:20]


def _files_under(path):
    if os.path.isdir(path):
        return [
            os.path.join(d, f)
            for d, dirs, fs in os.walk(path)
            for f in fs
            if "__pycache__" not in d and not d.split(os.sep)[-1].startswith(".")
        ]
    return [path]


def _pip_install(deps, target):
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--target",
        target,
        "--no-warn-script-location",
        "--disable-pip-version-check",
        "--no-input",
        "--no-compile",
        "--quiet",
    ]
    for directory in deps.find_links:
        command += ["--find-links", directory]
    if deps.requirements_file:
        command += ["-r", deps.requirements_file]
    command += list(deps.packages)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise UnsupportedPipelineError(
            "installing the pipeline's Python dependencies for Spark's executors failed "
            "(%s):\n%s" % (" ".join(command[3:]), (done.stderr or done.stdout).strip()[-4000:])
        )


def _drop_already_installed(target):
    """Removes from `target` the distributions the driver's environment
    has at the same version; returns the names kept."""
    kept = []
    for info in sorted(glob.glob(os.path.join(target, "*.dist-info"))):
        dist = importlib.metadata.Distribution.at(info)
        name, version = dist.metadata["Name"], dist.version
        try:
            present = importlib.metadata.version(name) == version
        except importlib.metadata.PackageNotFoundError:
            present = False
        if not present:
            kept.append("%s==%s" % (name, version))
            continue
        for entry in dist.files or ():
            path = os.path.normpath(os.path.join(target, str(entry)))
            if path.startswith(target + os.sep) and os.path.isfile(path):
                os.remove(path)
        shutil.rmtree(info, ignore_errors=True)
    for directory, dirs, files in os.walk(target, topdown=False):
        if directory != target and not os.listdir(directory):
            os.rmdir(directory)
    return kept


def _compiled_files(target):
    return sorted(
        os.path.relpath(os.path.join(d, f), target) for d, _, fs in os.walk(target) for f in fs if f.endswith(_COMPILED)
    )


def ship_dependencies(spark_context, deps):
    """Installs `deps` and adds them to every executor's Python path;
    returns the zip's path (None when there is nothing to install)."""
    if deps.is_empty():
        return None
    name = "beam-dependencies-%s.zip" % deps.digest()
    with _lock:
        if name in _shipped:
            return _shipped[name]
        directory = tempfile.mkdtemp(prefix="beam-spark-dependencies-")
        target = os.path.join(directory, "site")
        _pip_install(deps, target)
        kept = _drop_already_installed(target)
        compiled = _compiled_files(target)
        if compiled:
            raise UnsupportedPipelineError(
                "the pipeline's Python dependencies contain compiled extension modules (%s), which "
                "Spark's Python workers cannot import from the zip the runner ships: install %s in "
                "the executors' Python environment instead (for example a packed virtualenv given to "
                "spark-submit --archives with spark.pyspark.python; docs/deployment.md)"
                % (", ".join(compiled[:5]), ", ".join(kept) or "them")
            )
        path = os.path.join(directory, name)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for file in sorted(_files_under(target)):
                archive.write(file, os.path.relpath(file, target))
        spark_context.addPyFile(path)
        _shipped[name] = path
    _LOG.info("Shipped the pipeline's Python dependencies to Spark's executors: %s", ", ".join(kept) or "none new")
    return path
