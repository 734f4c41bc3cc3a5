"""What the job service does with the artifacts a client staged: Beam's
Python SDK stages its `--requirements_file` (as `requirements.txt`, with
the packages of `--requirements_cache`), `--extra_packages` (the files and
`extra_packages.txt` naming them), `--setup_file` (an sdist named
`workflow.tar.gz`), the main session (`pickled_main_session`) and a record
of the client's environment. The packages are installed and shipped to the
executors (execution/executor_packages.py) as SparkRunner does for the same
options; an artifact the runner cannot use (an SDK build, a jar, an
unknown file) refuses the job, naming it. The jars of a Java environment
(a cross-language transform's) are its harness's classpath instead."""

import logging
import os

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.execution.executor_packages import PythonDependencies, ship_dependencies
from beam_spark_runner.job_service import staging
from beam_spark_runner.plans import EnvironmentKind
from beam_spark_runner.translation.sdk_environments import kind_of

_LOG = logging.getLogger(__name__)

REQUIREMENTS = "requirements.txt"
EXTRA_PACKAGES = "extra_packages.txt"
SETUP_SDIST = "workflow.tar.gz"
MAIN_SESSION = "pickled_main_session"
CLIENT_ENVIRONMENT = "submission_environment_dependencies.txt"
_PACKAGE_SUFFIXES = (".whl", ".tar.gz", ".zip", ".tar", ".tgz", ".egg")
_SDK_PREFIXES = ("apache_beam-", "apache-beam-", "dataflow_python_sdk")


def dependencies_of_artifacts(pipeline, work_dir):
    """PythonDependencies for the pipeline's staged artifacts. Package
    files are linked into `work_dir` under the names the client gave them
    (pip reads versions from file names; staged files carry a hash)."""
    files, refused = {}, []
    for env in pipeline.components.environments.values():
        if kind_of(env) is EnvironmentKind.JAVA:
            continue  # jars of a Java stage's harness (cross_language/artifacts.py)
        for artifact in env.dependencies:
            name, path = staging.staged_name(artifact), staging.staged_path(artifact)
            if name in (CLIENT_ENVIRONMENT,):
                continue
            if name == MAIN_SESSION:
                _LOG.warning(
                    "--save_main_session: the staged main session is not loaded on the executors; "
                    "functions and the objects they reference are pickled with them (cloudpickle), but "
                    "a value of a class the client's main script defines that a coder pickles by "
                    "reference (__main__.<name>) cannot be decoded: define such classes in a module "
                    "shipped with --setup_file or --extra_packages"
                )
                continue
            base = os.path.basename(name)
            if base.startswith(_SDK_PREFIXES):
                refused.append("%s (an SDK build: the executors run the apache-beam installed with them)" % name)
            elif name in (REQUIREMENTS, EXTRA_PACKAGES, SETUP_SDIST) or base.endswith(_PACKAGE_SUFFIXES):
                files[base] = path
            else:
                refused.append("%s (not a Python package)" % name)
    if refused:
        raise UnsupportedPipelineError(
            "the job staged artifacts the Spark runner cannot use: %s" % ", ".join(sorted(refused))
        )
    if not files:
        return PythonDependencies()
    links = os.path.join(work_dir, "packages")
    os.makedirs(links, exist_ok=True)
    for base, path in files.items():
        link = os.path.join(links, base)
        if not os.path.lexists(link):
            os.symlink(path, link)
    packages = []
    if EXTRA_PACKAGES in files:
        with open(files[EXTRA_PACKAGES]) as listing:
            for line in listing:
                if line.strip():
                    packages.append(os.path.join(links, os.path.basename(line.strip())))
    if SETUP_SDIST in files:
        packages.append(os.path.join(links, SETUP_SDIST))
    requirements = os.path.join(links, REQUIREMENTS) if REQUIREMENTS in files else None
    return PythonDependencies(requirements, tuple(packages), (links,))


def artifact_shipper(spark_context, staging_area):
    """The job service's shipper: installs a job's staged packages and
    ships them to the executors of `spark_context`."""

    def ship(job_id, pipeline, options):
        dependencies = dependencies_of_artifacts(pipeline, staging_area.job_dir(job_id))
        ship_dependencies(spark_context, dependencies)

    return ship
