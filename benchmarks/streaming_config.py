"""The settings of benchmarks/streaming.py: the Spark master and partitions,
the query's parameters (keys, window size, early firings, the late events
and the allowed lateness), the Beam runs' metrics namespace and the logger
they read micro-batches from, the warm-up of a run, and the one SparkSession
every run shares (start_session), with the settings the native queries
restore after a Beam run changed them."""

from runner_session import start_runner_session

MASTER = "local[2]"
PARTITIONS = 2
NAMESPACE = "streaming_bench"
KEYS = 10_000
WINDOW_S = 10
EARLY_S = 1
LATE_EVERY = 20  # 1 in 20 events is late ...
LATE_LAG_S = 15  # ... by 15 s of event time (the window it falls in has closed)
ALLOWED_LATENESS_S = 30  # = the native query's watermark delay: no event is dropped
# Logs every micro-batch at DEBUG ("Streaming batch N took X ms; ...").
STREAMING_LOGGER = "beam_spark_runner.streaming.driver_sink"
# Session settings a SparkRunner streaming query changes (RocksDB state store,
# checkpoint format 2, shuffle partitions = key-groups); the native queries run
# with the values the session had before any Beam run, i.e. Spark's defaults.
_RUNNER_CONF = (
    "spark.sql.streaming.stateStore.providerClass",
    "spark.sql.streaming.stateStore.checkpointFormatVersion",
    "spark.sql.shuffle.partitions",
)
_SESSION_CONF = {}


# -- Spark session ------------------------------------------------------------------


def start_session():
    """One local[2] session for both sides, as tests/conftest.py starts it."""
    spark = start_runner_session(
        MASTER,
        "beam-spark-streaming-benchmark",
        **{
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": str(PARTITIONS),
            "spark.default.parallelism": str(PARTITIONS),
        },
    )
    for key in _RUNNER_CONF:
        _SESSION_CONF[key] = spark.conf.get(key, None)
    return spark


def _warmup_of(seconds):
    return min(10.0, seconds / 4.0)
