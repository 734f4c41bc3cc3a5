"""Pipeline options of the Spark runner, and what it does with Beam's own
options: each one it accepts is honoured or refused at submission with a
message naming it (`option_problems`); none is silently ignored."""

import os
from apache_beam.options.pipeline_options import PipelineOptions


# Every core; a failed task is tried up to 4 times (Spark's default
# spark.task.maxFailures on a cluster). Spark's local[N] master tries a task
# once, so one crashed Python worker would fail a whole run or query.
DEFAULT_MASTER = "local[*,4]"


class SparkRunnerOptions(PipelineOptions):
    """Options for `--runner=beam_spark_runner.SparkRunner`.

    `--parallelism` (partitions of shuffles and rebalanced inputs) is Beam's
    own option, declared by FlinkRunnerOptions and shared by every portable
    runner; read it with `parallelism(options)`.
    """

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument(
            "--spark_master",
            default=DEFAULT_MASTER,
            help="Spark master URL (local[N,F], spark://host:port, ...). The default, "
            "%s, uses every core and tries a failed task up to 4 times, as a cluster "
            "does (spark.task.maxFailures); local[N] fails the run on the first failed "
            "task. Ignored when a SparkSession is already active in this process: that "
            "session is reused." % DEFAULT_MASTER,
        )
        parser.add_argument(
            "--spark_conf",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="A Spark configuration entry; repeatable.",
        )
        parser.add_argument(
            "--spark_app_name",
            default="beam-spark-runner",
            help="Spark application name of a newly created SparkSession (default beam-spark-runner).",
        )
        parser.add_argument(
            "--bundle_size_bytes",
            type=int,
            default=32 << 20,
            help="Batch: input bytes per Beam bundle within a Spark partition (default 32 MiB).",
        )
        parser.add_argument(
            "--java_harness_jvm_options",
            default="",
            help="Options of the JVM that runs Beam's Java SDK harness for Java stages "
            "(cross-language transforms), split as a shell would, e.g. '-Xmx2g -XX:+UseG1GC' "
            "(default: none, the JVM's own defaults); a warning says when no stage runs in Java.",
        )
        parser.add_argument(
            "--grouped_values_in_memory_bytes",
            type=int,
            default=8 << 20,
            help="Batch: a GroupByKey hands one key's values (one window's, under a non-merging "
            "WindowFn) to the consuming DoFn as an in-memory list while their encoding is at most "
            "this many bytes (default 8 MiB); a larger group is streamed from Spark's shuffle, "
            "which spills it to disk, and decoded as the DoFn iterates it, so it need not fit in "
            "a worker's memory. Applies to the default trigger with the end-of-window timestamp "
            "combiner (the global window included); under other windowing a key's values are "
            "grouped in memory. 0 streams every group.",
        )
        parser.add_argument(
            "--checkpoint_dir",
            default=None,
            help="Streaming: where Spark's checkpoint and the runner's records live (a path "
            "or any Hadoop file system URI: hdfs://, s3a://, ...). Starting the same pipeline "
            "again with it resumes where the last durable batch ended; a pipeline whose keyed "
            "operators or their state's coders differ is refused, as is a checkpoint moved from "
            "where Spark wrote it. Default: a temporary directory removed when the run "
            "ends (docs/reliability.md).",
        )
        parser.add_argument(
            "--trigger_interval",
            default="0 seconds",
            help="Streaming: Spark's micro-batch trigger interval (e.g. '1 second'); "
            "'0 seconds' starts the next batch as soon as one ends.",
        )
        parser.add_argument(
            "--watermark_percentile",
            type=float,
            default=1.0,
            help="Streaming: MillWheel's heuristic low watermark. Every stateful step (GroupByKey, "
            "Combine, stateful or splittable DoFn) runs on the event time that a share P "
            "(0 < P <= 1) of its pending work has passed: of a Spark source's partitions, of a "
            "splittable DoFn's restrictions (message-broker streams, PeriodicImpulse), of the keys "
            "an upstream stage holds back. 1 (the default): the exact low watermark. Below 1: the "
            "slowest, up to a (1 - P) share, no longer hold it: windows fire sooner, and the "
            "stragglers' records that arrive behind that watermark are late (LATE panes within "
            "the allowed lateness, dropped after it; counted as late_records / "
            "dropped_due_to_lateness). Steps built inside beam_spark_runner.watermark_percentile(P) "
            "use their own P (docs/watermarks.md).",
        )
        parser.add_argument(
            "--publish_every_batches",
            type=int,
            default=1,
            help="Streaming: completed micro-batches release their side effects (the exactly-once "
            "file sinks publish, bundle finalizers run) together, once this many completed; "
            "default 1 (every batch, the lowest latency). Larger values trade latency for fewer "
            "publications.",
        )
        parser.add_argument(
            "--publish_interval_ms",
            type=int,
            default=0,
            help="Streaming: also release completed micro-batches once this many milliseconds "
            "passed since the last release (with --publish_every_batches above 1; checked as each "
            "micro-batch completes); 0: no time condition.",
        )
        parser.add_argument(
            "--tolerable_failed_batches",
            type=int,
            default=0,
            help="Streaming: how many micro-batches may fail in a row (a task failed more often "
            "than Spark retries it, a lost executor, ...) before the run fails; each failure "
            "before that restarts the query from the last completed checkpoint. Default 0: the "
            "first failure fails the run.",
        )
        parser.add_argument(
            "--worker_log_forwarding",
            choices=("on", "off"),
            default="on",
            help="Forward log records of user code in Spark's Python workers to the driver's logging "
            "(default on: a TCP connection from each worker to the driver; records a worker cannot "
            "send go to its stderr). 'off': nothing is forwarded, the records stay in the "
            "executors' stderr (at WARNING and above), and no port on the driver is needed.",
        )
        parser.add_argument(
            "--progress_bar",
            choices=("auto", "on", "off"),
            default="auto",
            help="Batch: a progress bar of the run's Spark tasks (tqdm; a widget in a notebook). "
            "'auto' (the default) draws it when stderr is a terminal or the driver runs in a "
            "Jupyter kernel (a job service's jobs: only with 'on'). Whatever this says, "
            "`result.batch_progress()` returns the run's Spark jobs and stages.",
        )
        parser.add_argument(
            "--print_plan", action="store_true", default=False, help="Print the Spark execution plan before running."
        )
        parser.add_argument(
            "--sdk_harness_only",
            action="store_true",
            default=False,
            help="Run every stage through Beam's SDK harness, also those the runner "
            "would run as plain Python loops (Map/FlatMap/Filter chains, simple DoFn "
            "classes, WindowInto and combiner phases, stateful DoFns with the runner's "
            "own state and timers).",
        )
        parser.add_argument(
            "--beam_io_only",
            action="store_true",
            default=False,
            help="Batch: keep Beam's own expansions of ReadFromText and of file writes "
            "instead of the runner's Spark-native ones. Streaming file writes always use the "
            "runner's exactly-once ones (Beam's rename files outside the checkpoint).",
        )


# Beam's own options that the runner reads, for the README's options table
# (tools/options_table.py renders it with SparkRunnerOptions' own help).
BEAM_OPTIONS_READ = (
    (
        "--parallelism N",
        "Beam's shared option: partitions of shuffles and rebalanced inputs; default Spark's default parallelism.",
    ),
    ("--streaming", "Beam's option: run on Structured Streaming (implied by a TestStream)."),
    (
        "--default_sdk_harness_log_level, --sdk_harness_log_level_overrides",
        "Beam's options: the level (default INFO) and per-logger levels ('{\"my.module\": \"DEBUG\"}') "
        "at which user code's log records in Spark's Python workers are forwarded to the driver's "
        "logging, where the driver's own logger levels apply as for driver code. The runner's own "
        "lines (INFO on stderr: Spark's UI address, a streaming query's start, every tenth "
        "micro-batch, the end) follow overrides for beam_spark_runner: "
        "'{\"beam_spark_runner\": \"WARNING\"}' turns them off.",
    ),
    (
        "--performance_runtime_type_check",
        "Beam's option, honoured: its checks live in Beam's SDK harness, so every stage runs there.",
    ),
)


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
    return LogSettings.from_option_values(
        harness.default_sdk_harness_log_level, harness.sdk_harness_log_level_overrides
    )


# The Python SDK environment SparkRunner runs: embedded in Spark's own Python
# workers. The job service accepts the others (LOOPBACK, EXTERNAL, PROCESS,
# DOCKER) of this SDK and runs them embedded too.
EMBEDDED_PYTHON_ENVIRONMENT = "beam:env:embedded_python:v1"

# Beam options that prepare an SDK harness's environment SparkRunner does not
# use (containers, other SDK workers, SDK builds, arbitrary files): each is
# refused when set, saying what to do instead.
_ENVIRONMENT = (
    "SparkRunner runs Beam's Python SDK embedded in Spark's Python workers; leave it unset "
    "(beam-spark-job-server accepts LOOPBACK, EXTERNAL, PROCESS and DOCKER environments of this "
    "SDK from --runner=PortableRunner clients and runs them the same way)"
)
_CONTAINERS = "SparkRunner starts no SDK containers; leave it unset"
_INSTALL = (
    "SparkRunner ships Python packages (--requirements_file, --extra_packages, --setup_file) and "
    "the driver's own modules, not arbitrary files; put other files where the executors can read "
    "them (a shared file system, or Spark's --files)"
)
_UNSUPPORTED = {
    "environment_type": _ENVIRONMENT,
    "environment_config": _ENVIRONMENT,
    "environment_options": _ENVIRONMENT,
    "sdk_container_image": _CONTAINERS,
    "prebuild_sdk_container_engine": _CONTAINERS,
    "docker_registry_push_url": _CONTAINERS,
    "requirements_cache": (
        "SparkRunner installs --requirements_file with pip on the driver (from the package index "
        "pip is configured with) and ships the result; there is no cache to fill"
    ),
    "files_to_stage": _INSTALL,
    "beam_plugins": _INSTALL,
    "sdk_location": "Spark's Python workers use the apache-beam installed with them; leave it unset",
}


# What a job service client (Beam's PortableRunner) has already done with
# these options before it submits: they became the pipeline's environments
# and staged artifacts, which the job service checks and ships itself.
CLIENT_STAGED = frozenset(
    (
        "environment_type",
        "environment_config",
        "environment_options",
        "sdk_container_image",
        "prebuild_sdk_container_engine",
        "docker_registry_push_url",
        "requirements_file",
        "requirements_cache",
        "setup_file",
        "extra_packages",
        "files_to_stage",
        "sdk_location",
        "save_main_session",
    )
)


def option_problems(options, client_staged=False):
    """(errors, warnings): the options given (not defaults) that SparkRunner
    cannot honour, as messages naming them. Errors refuse the pipeline;
    warnings are options that lose nothing here but do not do what they do
    elsewhere. `client_staged`: the pipeline came through the job service,
    whose client already applied the options in `CLIENT_STAGED`."""
    given = options.get_all_options(drop_default=True, retain_unknown_options=False)
    if client_staged:
        given = {name: value for name, value in given.items() if name not in CLIENT_STAGED}
    errors, warnings = [], []
    for name, why in _UNSUPPORTED.items():
        if name not in given:
            continue
        if name == "environment_type" and given[name] == EMBEDDED_PYTHON_ENVIRONMENT:
            continue
        errors.append("--%s=%s is not supported: %s" % (name, given[name], why))
    for name in ("requirements_file", "setup_file"):
        if name in given and not os.path.isfile(given[name]):
            errors.append("--%s=%s: no such file" % (name, given[name]))
    for package in given.get("extra_packages") or ():
        if not os.path.exists(package):
            errors.append("--extra_packages=%s: no such file" % package)
    library = given.get("pickle_library")
    if library not in (None, "default", "cloudpickle"):
        errors.append(
            "--pickle_library=%s is not supported: Spark's Python workers unpickle the "
            "pipeline with cloudpickle, Beam's default" % library
        )
    if given.get("save_main_session"):
        warnings.append(
            "--save_main_session: SparkRunner does not pickle the main session; functions and the "
            "objects they reference are pickled with them (cloudpickle) and the main script's classes "
            "are shipped to Spark's workers as __main__.<name> whatever this option says, but other "
            "module state of the script is not in the workers"
        )
    # Beam declares it without a type: "1" from a command line is its default.
    if str(given.get("sdk_worker_parallelism", 1)) != "1":
        warnings.append(
            "--sdk_worker_parallelism=%s has no effect: Spark runs one Python worker per task "
            "slot (--spark_master local[N], or the executors' cores)" % given["sdk_worker_parallelism"]
        )
    return errors, warnings


# Options that only streaming runs read.
STREAMING_ONLY = (
    "checkpoint_dir",
    "trigger_interval",
    "publish_every_batches",
    "publish_interval_ms",
    "tolerable_failed_batches",
    "watermark_percentile",
)


# Options that only batch runs read.
BATCH_ONLY = (
    "bundle_size_bytes",
    "grouped_values_in_memory_bytes",
)


def mode_problems(options, streaming):
    """(errors, warnings) of the runner's options once it is known whether
    the pipeline runs in streaming: values out of range are errors, streaming
    options given to a batch run are warnings, each naming the option."""
    given = options.get_all_options(drop_default=True, retain_unknown_options=False)
    spark = options.view_as(SparkRunnerOptions)
    errors, warnings = [], []
    if spark.publish_every_batches < 1:
        errors.append("--publish_every_batches=%s must be at least 1" % spark.publish_every_batches)
    if spark.publish_interval_ms < 0:
        errors.append("--publish_interval_ms=%s must not be negative" % spark.publish_interval_ms)
    if spark.tolerable_failed_batches < 0:
        errors.append("--tolerable_failed_batches=%s must not be negative" % spark.tolerable_failed_batches)
    if not 0 < spark.watermark_percentile <= 1:
        errors.append("--watermark_percentile=%s must be above 0 and at most 1" % spark.watermark_percentile)
    if spark.grouped_values_in_memory_bytes < 0:
        errors.append("--grouped_values_in_memory_bytes=%s must not be negative" % spark.grouped_values_in_memory_bytes)
    if streaming:
        for name in BATCH_ONLY:
            if name in given:
                warnings.append(
                    "--%s=%s has no effect: the pipeline runs in streaming, where bundles are "
                    "micro-batches and a GroupByKey keeps its values in Spark's state store" % (name, given[name])
                )
    if streaming and given.get("progress_bar") == "on":
        warnings.append(
            "--progress_bar=on has no effect: the pipeline runs in streaming, where each micro-batch "
            "logs one progress line and result.streaming_progress() holds them"
        )
    if not streaming:
        for name in STREAMING_ONLY:
            if name in given:
                warnings.append(
                    "--%s=%s has no effect: the pipeline runs in batch (give --streaming, or read "
                    "an unbounded source with --streaming, to run it on Structured Streaming)" % (name, given[name])
                )
    return errors, warnings


def keeps_every_stage_on_the_sdk_harness(options):
    """--sdk_harness_only, or Beam's --performance_runtime_type_check, whose
    checks live in the SDK harness (the plain-Python stages do not make
    them)."""
    from apache_beam.options.pipeline_options import TypeOptions

    return bool(
        options.view_as(SparkRunnerOptions).sdk_harness_only
        or options.view_as(TypeOptions).performance_runtime_type_check
    )
