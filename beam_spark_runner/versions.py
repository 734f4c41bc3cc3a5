"""The PySpark and Apache Beam releases this runner supports.

The ranges here are the only place they are written: setup.py reads them
(without importing the package) for its requirements, and importing
`beam_spark_runner` checks the installed releases against them, so that a
PySpark or Beam outside them fails at once with an error naming the
installed release and the range, not with a stack trace from deep inside a
run. The differences between supported releases live behind the two shims
(`execution/spark_internals.py`, `worker/beam_internals.py`) and the
feature checks below.

This module imports nothing but the standard library: Spark's helper
processes import the package and must not pay for Beam here.
"""

import importlib
import importlib.metadata
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SupportedRange:
    """Releases of one distribution: `minimum` <= release < `below`."""

    distribution: str
    module: str
    minimum: tuple
    below: tuple

    def requirement(self):
        """The pip requirement, e.g. `pyspark>=4.0.0,<4.4`."""
        return "%s>=%s,<%s" % (self.distribution, _dotted(self.minimum), _dotted(self.below))

    def contains(self, version):
        release = parse_release(version)
        return self.minimum <= release < self.below


PYSPARK = SupportedRange("pyspark", "pyspark", minimum=(4, 0, 0), below=(4, 4))
# 2.71 is the newest Beam whose Java harness, KafkaIO, JdbcIO and SQL jars
# Maven Central serves together (see cross_language/java_sdk.py): a Python
# pipeline on that release can use the cross-language transforms with Java
# jars of its own release.
BEAM = SupportedRange("apache-beam", "apache_beam", minimum=(2, 71, 0), below=(2, 78))
SUPPORTED = (PYSPARK, BEAM)


class UnsupportedVersionError(ImportError):
    """An installed PySpark or Beam outside the supported range."""


def _dotted(release):
    return ".".join(str(part) for part in release)


def parse_release(version):
    """The numeric release of a version string: "4.1.0.dev1" -> (4, 1, 0);
    a pre-release counts as its release."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(version))
    if not match:
        raise ValueError("not a release version: %r" % (version,))
    return tuple(int(part) for part in match.group(1).split("."))


def installed_version(supported):
    """The installed release of `supported`'s distribution, or None when it
    is not installed. Falls back to the module's `__version__` when the
    module is importable without package metadata (PySpark put on the path
    from a Spark distribution)."""
    try:
        return importlib.metadata.version(supported.distribution)
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        return importlib.import_module(supported.module).__version__
    except ImportError:
        return None


def problems(versions=None):
    """One line per installed release outside its range (or missing);
    `versions` maps distribution -> version to check instead of the
    installed ones."""
    found = []
    for supported in SUPPORTED:
        version = (versions or {}).get(supported.distribution) if versions else installed_version(supported)
        if version is None:
            found.append(
                "%s is not installed; beam-spark-runner needs %s" % (supported.distribution, supported.requirement())
            )
        elif not supported.contains(version):
            found.append(
                "%s %s is installed; beam-spark-runner supports %s: pip install '%s'"
                % (supported.distribution, version, supported.requirement(), supported.requirement())
            )
    return found


def check_installed():
    """Raises UnsupportedVersionError naming every installed release outside
    the supported ranges."""
    found = problems()
    if found:
        raise UnsupportedVersionError("; ".join(found))


def pyspark_release():
    return parse_release(installed_version(PYSPARK) or "0")


def beam_release():
    return parse_release(installed_version(BEAM) or "0")
