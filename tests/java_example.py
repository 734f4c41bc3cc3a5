"""examples/java/wordcount built with Maven for the tests that submit its
pipelines to the job service (Maven fetches Beam Java's jars once into
~/.m2)."""

import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "java", "wordcount")


def build(work):
    """The example compiled, with its runtime dependencies in target/libs,
    in a copy of its directory under `work`; returns the copy's path."""
    project = os.path.join(str(work), "wordcount")
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("target"))
    done = subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            "compile",
            "dependency:copy-dependencies",
            "-DoutputDirectory=target/libs",
            "-DincludeScope=runtime",
        ],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return project


def java_command(project, main_class, *args):
    """The command that runs `main_class` of the built example."""
    classpath = os.path.join(project, "target", "classes") + os.pathsep + os.path.join(project, "target", "libs", "*")
    return ["java", "-cp", classpath, main_class, *args]
