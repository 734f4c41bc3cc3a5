"""beam-spark-runner: run Apache Beam pipelines on Apache Spark through PySpark."""

from setuptools import find_packages, setup

INSTALL_REQUIRES = [
    "apache-beam==2.77.0",
    "pyspark==4.3.0",
    "pandas<3",
    "pyarrow",
    "grpcio",
    # The batch progress bar (beam_spark_runner/progress_bar.py).
    "tqdm>=4.60,<5",
    "pytest",
    # WriteToDatabase / ReadFromDatabase (beam_spark_runner/connectors/):
    # PostgreSQL through psycopg 3 (its binary build carries libpq),
    # MariaDB and MySQL through PyMySQL.
    "psycopg[binary]==3.3.9",
    "pymysql==1.2.4",
    # ReadFromRedisStreams and ReadFromNats (beam_spark_runner/connectors/).
    "redis==8.1.0",
    # redis-py's C reply parser: XRANGE pages parse about 1.5x faster.
    "hiredis==3.5.0",
    "nats-py==2.16.0",
]

TEST_REQUIRES = [
    # Beam's own test modules (our conformance suite) import pyhamcrest,
    # parameterized, mock, ... through this extra.
    "apache-beam[test]==2.77.0",
    # Beam YAML (apache_beam.yaml.main), run through the job service in
    # tests/integration/test_job_server_cli.py.
    "apache-beam[yaml]==2.77.0",
    # Interactive Beam (ib.collect, ib.show), the kernel that runs the
    # example notebooks (tests/integration/test_notebooks.py, nbclient) and
    # their plots.
    "apache-beam[interactive]==2.77.0",
    "nbclient",
    "matplotlib",
    "hypothesis",
    "pytest-timeout",
    # The suite runs in two processes (README's test command): many tests
    # wait on real time (streaming batches, fault recovery), so two fit the
    # 30-minute budget on 2 cores where one did not.
    "pytest-xdist",
    # A Kafka client of its own to produce and check the messages of the
    # cross-language Kafka tests (tests/integration/test_cross_language_kafka.py).
    "confluent-kafka==2.16.1",
    # The repository's one formatter (ruff.toml; tests/unit/test_formatting.py).
    "ruff==0.17.6",
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
