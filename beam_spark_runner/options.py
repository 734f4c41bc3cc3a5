"""Pipeline options of the Spark runner."""
from apache_beam.options.pipeline_options import PipelineOptions


class SparkRunnerOptions(PipelineOptions):
    """Options for `--runner=beam_spark_runner.SparkRunner`.

    `--parallelism` (partitions of shuffles and rebalanced inputs) is Beam's
    own option, declared by FlinkRunnerOptions and shared by every portable
    runner; read it with `parallelism(options)`.
    """

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument(
            "--spark_master", default="local[*]",
            help="Spark master URL (local[N], spark://host:port, ...). Ignored when a "
                 "SparkSession is already active in this process: that session is reused.")
        parser.add_argument(
            "--spark_conf", action="append", default=[], metavar="KEY=VALUE",
            help="A Spark configuration entry; repeatable.")
        parser.add_argument(
            "--spark_app_name", default="beam-spark-runner",
            help="Spark application name of a newly created SparkSession.")
        parser.add_argument(
            "--bundle_size_bytes", type=int, default=32 << 20,
            help="Input bytes per Beam bundle within a Spark partition.")
        parser.add_argument(
            "--checkpoint_dir", default=None,
            help="Streaming: directory for Spark's checkpoint and the runner's hold reports. "
                 "Starting a pipeline again with the same directory resumes where it stopped. "
                 "Default: a temporary directory removed when the run ends.")
        parser.add_argument(
            "--trigger_interval", default="0 seconds",
            help="Streaming: Spark's micro-batch trigger interval (e.g. '1 second'); "
                 "'0 seconds' starts the next batch as soon as one ends.")
        parser.add_argument(
            "--print_plan", action="store_true", default=False,
            help="Print the Spark execution plan before running.")
        parser.add_argument(
            "--sdk_harness_only", action="store_true", default=False,
            help="Run every stage through Beam's SDK harness, also those the runner "
                 "would run as plain Python loops (Map/FlatMap/Filter chains, simple DoFn "
                 "classes, WindowInto and combiner phases).")
        parser.add_argument(
            "--beam_io_only", action="store_true", default=False,
            help="Batch: keep Beam's own expansions of ReadFromText and of file writes "
                 "instead of the runner's Spark-native ones.")


def parse_spark_conf(entries):
    """['k=v', ...] -> {k: v}; a malformed entry is an error naming it."""
    conf = {}
    for entry in entries or ():
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            raise ValueError("--spark_conf expects KEY=VALUE, got %r" % entry)
        conf[key.strip()] = value
    return conf


def parallelism(options):
    """--parallelism if set (> 0), else 0 meaning Spark's default parallelism."""
    from apache_beam.options.pipeline_options import FlinkRunnerOptions
    value = options.view_as(FlinkRunnerOptions).parallelism
    return value if value and value > 0 else 0


def worker_log_settings(options):
    """What Spark's Python workers forward of user code's logging to the
    driver (worker/log_forwarding.py), from Beam's own SDK-harness options
    --default_sdk_harness_log_level (default INFO) and
    --sdk_harness_log_level_overrides; a bad level is a ValueError naming
    the option."""
    from apache_beam.options.pipeline_options import WorkerOptions
    from beam_spark_runner.worker.log_forwarding import LogSettings
    harness = options.view_as(WorkerOptions)
    return LogSettings.from_option_values(harness.default_sdk_harness_log_level,
                                          harness.sdk_harness_log_level_overrides)
