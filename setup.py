"""beam-spark-runner: run Apache Beam pipelines on Apache Spark through PySpark."""

import os
import runpy

from setuptools import find_packages, setup

# The supported PySpark and Beam releases are written once, in
# beam_spark_runner/versions.py (standard library only, so it runs here
# before anything is installed); importing the package checks them too.
_VERSIONS = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "beam_spark_runner", "versions.py"))
PYSPARK = _VERSIONS["PYSPARK"].requirement()
BEAM = _VERSIONS["BEAM"].requirement()

# Ranges, so that the runner installs beside the PySpark of the user's
# cluster and the Beam the user's pipelines are written against; the test
# environment's exact versions are in tools/test-constraints.txt.
INSTALL_REQUIRES = [
    BEAM,
    PYSPARK,
    "pandas<3",
    "pyarrow",
    "grpcio",
    # The batch progress bar (beam_spark_runner/progress_bar.py).
    "tqdm>=4.60,<5",
    # WriteToDatabase / ReadFromDatabase (beam_spark_runner/connectors/):
    # PostgreSQL through psycopg 3 (its binary build carries libpq),
    # MariaDB and MySQL through PyMySQL.
    "psycopg[binary]>=3.2,<4",
    "pymysql>=1.1,<2",
    # ReadFromRedisStreams and ReadFromNats (beam_spark_runner/connectors/).
    "redis>=5,<9",
    # redis-py's C reply parser: XRANGE pages parse about 1.5x faster.
    "hiredis>=3,<4",
    "nats-py>=2.9,<3",
    # WriteToKafka (beam_spark_runner/io/kafka/): librdkafka's Python client,
    # whose transactions publish each batch exactly once.
    "confluent-kafka>=2.6,<3",
]

TEST_REQUIRES = [
    "pytest",
    # Beam's own test modules (our conformance suite) import pyhamcrest,
    # parameterized, mock, ... through this extra.
    BEAM.replace("apache-beam", "apache-beam[test]", 1),
    # Beam YAML (apache_beam.yaml.main), run through the job service in
    # tests/integration/test_job_server_cli.py.
    BEAM.replace("apache-beam", "apache-beam[yaml]", 1),
    # Interactive Beam (ib.collect, ib.show), the kernel that runs the
    # example notebooks (tests/integration/test_notebooks.py, nbclient) and
    # their plots.
    BEAM.replace("apache-beam", "apache-beam[interactive]", 1),
    "nbclient",
    "matplotlib",
    "hypothesis",
    "pytest-timeout",
    # The suite runs in two processes (README's test command): many tests
    # wait on real time (streaming batches, fault recovery), so two fit the
    # 35-minute budget on 2 cores where one did not.
    "pytest-xdist",
    # The repository's one formatter (ruff.toml; tests/unit/test_formatting.py).
    "ruff",
]

setup(
    name="beam-spark-runner",
    version="0.1.0",
    description="Run Apache Beam pipelines (batch and streaming) on Apache Spark via PySpark.",
    python_requires=">=3.10",
    packages=find_packages(include=["beam_spark_runner*", "windowing*", "triggers*"]),
    # The JVM helpers (built from java/ by tools/build_jar.sh);
    # the driver JVM's log4j configuration the runner starts Spark with.
    package_data={"beam_spark_runner": ["jars/*.jar", "conf/*.properties"]},
    install_requires=INSTALL_REQUIRES,
    extras_require={"test": TEST_REQUIRES},
    entry_points={
        "console_scripts": [
            "beam-spark-plan=beam_spark_runner.cli:plan_main",
            "beam-spark-job-server=beam_spark_runner.job_server:main",
        ],
    },
)
