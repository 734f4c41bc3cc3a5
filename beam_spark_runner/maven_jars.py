"""Jars from Maven Central, by pinned version, in a cache usable offline.

The runner needs Java jars only for stages in a Java environment (Beam's
Java SDK harness) and for the expansion services it starts for
cross-language transforms; a pure-Python pipeline downloads nothing.

A `JarSet` names Maven artifacts (group, artifact, version, exclusions)
under a cache name. `resolve()` returns the jar paths of the artifacts and
their runtime dependencies: from the cache when a previous resolution
completed (no network, no Maven), else by running Maven's
`dependency:copy-dependencies` once against Maven Central into the cache.
A set that is not cached and cannot be fetched raises `MissingJars`
naming each artifact, its version and the cache directory.

Cache: `$BEAM_SPARK_CACHE_DIR/maven/<set name>/` (default
`~/.cache/beam-spark-runner/maven/<set name>/`): the jars, and
`jars.txt` listing them, written last, so a resolution cut short is redone.
Copying that directory to another machine makes it usable offline there.
"""

import dataclasses
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Tuple

CACHE_ENV = "BEAM_SPARK_CACHE_DIR"
_LISTING = "jars.txt"
_lock = threading.Lock()


class MissingJars(RuntimeError):
    """Jars the run needs are neither cached nor obtainable."""


@dataclasses.dataclass(frozen=True)
class MavenArtifact:
    group: str
    artifact: str
    version: str
    # (group, artifact) pairs left out of its dependencies ("*": any)
    exclusions: Tuple[Tuple[str, str], ...] = ()
    # Maven's classifier ("tests": a module's test jar); "" for the main jar
    classifier: str = ""

    def __str__(self):
        return "%s:%s:%s%s" % (
            self.group,
            self.artifact,
            self.version,
            ":" + self.classifier if self.classifier else "",
        )


@dataclasses.dataclass(frozen=True)
class JarSet:
    """Artifacts resolved together into one cache directory."""

    name: str  # the cache directory's name, e.g. beam-java-harness-2.71.0
    artifacts: Tuple[MavenArtifact, ...]

    def describe(self):
        return ", ".join(str(a) for a in self.artifacts)


def cache_base():
    """The runner's cache directory ($BEAM_SPARK_CACHE_DIR, else
    ~/.cache/beam-spark-runner)."""
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "beam-spark-runner")


def cache_root():
    return os.path.join(cache_base(), "maven")


def cached_jars(jar_set):
    """The cached jar paths of `jar_set`, or None if not (completely) cached."""
    directory = os.path.join(cache_root(), jar_set.name)
    try:
        with open(os.path.join(directory, _LISTING)) as f:
            names = [line.strip() for line in f if line.strip()]
    except OSError:
        return None
    paths = tuple(os.path.join(directory, name) for name in names)
    return paths if all(os.path.isfile(p) for p in paths) else None


def resolve(jar_set) -> Tuple[str, ...]:
    """The jars of `jar_set` and their runtime dependencies (sorted paths)."""
    with _lock:
        cached = cached_jars(jar_set)
        if cached is not None:
            return cached
        return _fetch(jar_set)


def _pom(jar_set):
    deps = []
    for a in jar_set.artifacts:
        exclusions = "".join(
            "<exclusion><groupId>%s</groupId><artifactId>%s</artifactId></exclusion>" % e for e in a.exclusions
        )
        deps.append(
            "<dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version>%s%s</dependency>"
            % (
                a.group,
                a.artifact,
                a.version,
                "<classifier>%s</classifier>" % a.classifier if a.classifier else "",
                "<exclusions>%s</exclusions>" % exclusions if exclusions else "",
            )
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>beam-spark-runner</groupId><artifactId>jars</artifactId><version>1</version>"
        "<dependencies>%s</dependencies></project>" % "".join(deps)
    )


def _fetch(jar_set):
    directory = os.path.join(cache_root(), jar_set.name)
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MissingJars(
            "The jars %s are not in the cache %s and Maven (`mvn`) is not installed to fetch them from "
            "Maven Central. Install Maven once, or copy that directory from a machine that has it "
            "(set %s to use another cache)." % (jar_set.describe(), directory, CACHE_ENV)
        )
    os.makedirs(os.path.dirname(directory), exist_ok=True)
    work = tempfile.mkdtemp(prefix=jar_set.name + ".", dir=os.path.dirname(directory))
    try:
        with open(os.path.join(work, "pom.xml"), "w") as f:
            f.write(_pom(jar_set))
        libs = os.path.join(work, "libs")
        done = subprocess.run(
            [
                mvn,
                "-B",
                "-q",
                "-f",
                os.path.join(work, "pom.xml"),
                "dependency:copy-dependencies",
                "-DoutputDirectory=" + libs,
                "-DincludeScope=runtime",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            tail = "\n".join(done.stdout.decode("utf-8", "replace").splitlines()[-12:])
            raise MissingJars(
                "Maven could not fetch %s into %s (exit code %d):\n%s"
                % (jar_set.describe(), directory, done.returncode, tail)
            )
        names = sorted(os.listdir(libs))
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        for name in names:
            os.replace(os.path.join(libs, name), os.path.join(directory, name))
        with open(os.path.join(directory, _LISTING + ".tmp"), "w") as f:
            f.write("".join(name + "\n" for name in names))
        os.replace(os.path.join(directory, _LISTING + ".tmp"), os.path.join(directory, _LISTING))
        return tuple(os.path.join(directory, name) for name in names)
    finally:
        shutil.rmtree(work, ignore_errors=True)
