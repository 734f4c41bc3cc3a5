"""SparkRunner: a Beam PipelineRunner that executes on Apache Spark."""

import functools
import logging
import os
import shlex
import re
import sys

from apache_beam.options import pipeline_options
from apache_beam.options.value_provider import RuntimeValueProvider
from apache_beam.runners import runner as beam_runner
from apache_beam.runners.pipeline_utils import group_by_key_input_visitor, merge_common_environments

from beam_spark_runner.options import (
    SparkRunnerOptions,
    keeps_every_stage_on_the_sdk_harness,
    mode_problems,
    option_problems,
    parallelism,
    worker_log_settings,
)
from beam_spark_runner.result import PipelineExecutionError, RunCancelled, SparkPipelineResult
from beam_spark_runner import plans, versions
from beam_spark_runner.cross_language.artifacts import keep_java_artifacts
from beam_spark_runner.cross_language.expansion_services import use_runner_expansion_service
from beam_spark_runner.cross_language.java_sdk import has_java_stages, harness_pipeline_options, with_java_harness
from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.streaming.checkpoint_policies import CheckpointSettings
from beam_spark_runner.translation import phases
from beam_spark_runner.translation.native_io_protos import native_io_in_proto
from beam_spark_runner.translation.sdk_environments import resolve_anyof_environments
from beam_spark_runner.translation.file_sink_overrides import transactional_write_for
from beam_spark_runner.translation.planner import (
    is_streaming,
    pipeline_proto_of,
    plan_pipeline,
    plan_streaming_pipeline,
)
from beam_spark_runner.translation.watermark_percentiles import annotated_percentiles, outermost

_LOG = logging.getLogger(__name__)


def engine_problems(streaming):
    """What the installed PySpark cannot run of this pipeline: a streaming
    pipeline's keyed stages run in `transformWithState`, which PySpark 4.0
    does not have (there the runner runs batch pipelines only)."""
    if not streaming:
        return []
    from beam_spark_runner.execution import spark_internals

    if spark_internals.has_transform_with_state():
        return []
    return [
        "a streaming pipeline needs PySpark 4.1 or later (its keyed stages run in Spark's "
        "transformWithState); PySpark %s is installed, where this runner runs batch pipelines only"
        % versions.installed_version(versions.PYSPARK)
    ]


class SparkRunner(beam_runner.PipelineRunner):
    """Runs Beam pipelines on Spark: `--runner=beam_spark_runner.SparkRunner`.

    `SparkRunner(is_drain=True)` runs in drain mode, as Beam's FnApiRunner
    does: splittable DoFns truncate their restrictions, so an unbounded
    source stops at what it has and the run finishes.
    """

    # True in the job service: the client applied the environment and
    # staging options (options.CLIENT_STAGED) before submitting.
    client_staged = False

    def __init__(self, is_drain=False, spark_session=None):
        """`spark_session`: the SparkSession to run on; by default the active
        one, else one created from the options."""
        super().__init__()
        self._is_drain = is_drain
        self._spark_session = spark_session
        self._serves_interactive = False

    def is_interactive(self):
        """Beam's InteractiveRunner calls this on the runner it runs on.
        From then on a batch run returns only once it ended (its errors
        raised): Interactive Beam (`ib.collect`, `ib.show`) reads the
        run's cache as soon as `run()` returns, so an asynchronous run would
        be read while it is still empty (an empty DataFrame, no error).
        Streaming runs stay asynchronous: Interactive Beam tails them."""
        self._serves_interactive = True

    def apply(self, transform, input, options):
        """Beam calls this as each transform is applied: file writes on
        unbounded input get the runner's exactly-once expansion
        (translation/file_sink_overrides.py); a cross-language transform at
        Beam's default expansion service expands in the runner's
        (cross_language/expansion_services.py)."""
        replacement = transactional_write_for(transform, input, options)
        if replacement is not None:
            return replacement.expand(input)
        use_runner_expansion_service(transform)
        return super().apply(transform, input, options)

    def run_pipeline(self, pipeline, options):
        RuntimeValueProvider.set_runtime_options({})
        debug = options.view_as(pipeline_options.DebugOptions)
        experiments = debug.experiments or []
        if "beam_fn_api" not in experiments:
            experiments.append("beam_fn_api")
        debug.experiments = experiments
        pipeline.visit(
            group_by_key_input_visitor(
                not options.view_as(pipeline_options.TypeOptions).allow_non_deterministic_key_coders
            )
        )
        spark_options = options.view_as(SparkRunnerOptions)
        if not (options.view_as(pipeline_options.StandardOptions).streaming or spark_options.beam_io_only):
            phases.apply_pipeline_overrides(pipeline)
        return self.run_portable_pipeline(pipeline_proto_of(pipeline), options)

    def run_portable_pipeline(self, pipeline_proto, options):
        pipeline_proto = keep_java_artifacts(resolve_anyof_environments(merge_common_environments(pipeline_proto)))
        spark_options = options.view_as(SparkRunnerOptions)
        streaming = is_streaming(pipeline_proto, options)
        if not (streaming or spark_options.beam_io_only):
            # A proto built elsewhere (a job service client) still holds
            # Beam's file I/O expansions; run_pipeline's overrides cannot
            # have replaced them.
            pipeline_proto = native_io_in_proto(pipeline_proto)
        errors, warnings = self.option_checks(options, streaming)
        if errors:
            raise UnsupportedPipelineError("The Spark runner cannot run this pipeline:\n  - " + "\n  - ".join(errors))
        for warning in warnings:
            _LOG.warning("%s", warning)
        log_settings = worker_log_settings(options)  # a bad level fails here, before any work
        show_run_progress(log_settings.overrides)
        if spark_options.worker_log_forwarding == "off":
            log_settings = None
        plain_python = not keeps_every_stage_on_the_sdk_harness(options)
        explicit = options.get_all_options(drop_default=True, retain_unknown_options=False)
        from beam_spark_runner.execution import runner_io_glue

        session = None
        if runner_io_glue.needs_session_to_plan(pipeline_proto):
            # A transform completes with what the session knows (a Spark
            # source's schema) before the runner plans.
            session = self._session(spark_options, explicit)
            try:
                pipeline_proto = runner_io_glue.resolved_with_session(pipeline_proto, session[0])
            except BaseException:
                session[1].restore()
                raise
        try:
            return self._plan_and_execute(
                pipeline_proto, options, streaming, plain_python, log_settings, explicit, session
            )
        except BaseException:
            if session is not None:
                session[1].restore()
            raise

    def _plan_and_execute(self, pipeline_proto, options, streaming, plain_python, log_settings, explicit, session):
        """Plans the (resolved) pipeline and starts its run; `session`: the
        (SparkSession, RunConf) it runs on if it already has one."""
        spark_options = options.view_as(SparkRunnerOptions)
        if streaming:
            execution_plan = plan_streaming_pipeline(
                pipeline_proto,
                drain=self._is_drain,
                plain_python=plain_python,
                watermark_percentile=spark_options.watermark_percentile,
            )
        else:
            execution_plan = plan_pipeline(pipeline_proto, drain=self._is_drain, plain_python=plain_python)
            annotated = annotated_percentiles(pipeline_proto.components)
            if annotated:
                _LOG.warning(
                    "watermark_percentile() on %s has no effect: the pipeline runs in batch, where every "
                    "window fires once all of its input is read",
                    ", ".join(outermost(annotated)),
                )
        jvm_options = shlex.split(spark_options.java_harness_jvm_options or "")
        if jvm_options and not has_java_stages(execution_plan):
            _LOG.warning(
                "--java_harness_jvm_options=%s has no effect: no stage of this pipeline runs in Java",
                spark_options.java_harness_jvm_options,
            )
        execution_plan = with_java_harness(execution_plan, jvm_options, harness_pipeline_options(options))
        if spark_options.print_plan:
            print(execution_plan.describe())
        result = self._execute(
            execution_plan,
            spark_options,
            parallelism(options),
            log_settings,
            explicit,
            self.dependencies_of(options),
            session,
        )
        if self._serves_interactive and not streaming:
            result.wait_until_finish()
        return result

    def dependencies_of(self, options):
        """The Python packages the options ask for (installed on the driver
        and shipped to the executors: execution/executor_packages.py)."""
        from beam_spark_runner.execution.executor_packages import PythonDependencies

        setup = options.view_as(pipeline_options.SetupOptions)
        packages = tuple(setup.extra_packages or ())
        if setup.setup_file:
            packages += (os.path.dirname(os.path.abspath(setup.setup_file)),)
        return PythonDependencies(setup.requirements_file, packages)

    def option_checks(self, options, streaming):
        """(errors, warnings) about the options, each naming the option."""
        errors, warnings = option_problems(options, client_staged=self.client_staged)
        mode_errors, mode_warnings = mode_problems(options, streaming)
        return errors + mode_errors + engine_problems(streaming), warnings + mode_warnings

    def _session(self, spark_options, explicit):
        from beam_spark_runner.session import get_or_create_session

        return get_or_create_session(spark_options, explicit, self._spark_session)

    def _execute(
        self,
        execution_plan,
        spark_options,
        parallelism,
        log_settings=None,
        explicit=(),
        dependencies=None,
        session=None,
    ):
        from beam_spark_runner.execution.batch_execution import BatchExecution

        spark, run_conf = session if session is not None else self._session(spark_options, explicit)
        try:
            if not self.client_staged:  # the job service ships what its clients staged
                from beam_spark_runner.execution.executor_packages import ship_dependencies
                from beam_spark_runner.execution.main_session import ship_main_session
                from beam_spark_runner.execution.user_modules import ship_user_modules

                ship_user_modules(spark.sparkContext)
                ship_main_session(spark.sparkContext)
                if dependencies is not None:
                    ship_dependencies(spark.sparkContext, dependencies)
            if log_settings is not None:
                from beam_spark_runner.execution.log_receiver import settings_for

                log_settings = settings_for(spark.sparkContext, log_settings)
            if isinstance(execution_plan, plans.StreamingPlan):
                from beam_spark_runner.execution.streaming_execution import StreamingExecution

                execution = StreamingExecution(
                    spark,
                    execution_plan,
                    parallelism,
                    spark_options.checkpoint_dir,
                    spark_options.trigger_interval,
                    log_settings,
                    CheckpointSettings(
                        spark_options.publish_every_batches,
                        spark_options.publish_interval_ms,
                        spark_options.tolerable_failed_batches,
                    ),
                )
            else:
                execution = BatchExecution(
                    spark,
                    execution_plan,
                    parallelism,
                    spark_options.bundle_size_bytes,
                    log_settings,
                    spark_options.grouped_values_in_memory_bytes,
                )
        except BaseException:
            run_conf.restore()
            raise

        batch_progress = None
        bar = None
        if isinstance(execution, BatchExecution):
            from beam_spark_runner import progress_bar
            from beam_spark_runner.execution.batch_status import job_group_progress

            batch_progress = functools.partial(job_group_progress, spark.sparkContext, execution.job_group)
            mode = spark_options.progress_bar
            if mode == "auto" and self.client_staged:  # a job service's jobs: its terminal is not theirs
                mode = "off"
            if progress_bar.enabled(mode):
                bar = progress_bar.ProgressBar(batch_progress)

        def run():
            if bar is not None:
                bar.start()
            try:
                return execution.run()
            except RunCancelled:
                raise
            except Exception as e:  # a Spark job failed: surface the user's error
                if execution.cancelled:  # Spark failed the jobs cancel() stopped
                    raise RunCancelled("the pipeline was cancelled") from e
                error = PipelineExecutionError(_user_error(e))
                _LOG.error("Pipeline failed: %s", error)
                raise error from e
            finally:
                if bar is not None:
                    bar.stop()
                run_conf.restore()

        result = SparkPipelineResult(
            run,
            cancel_fn=execution.cancel,
            drain_fn=getattr(execution, "drain", None),
            drain_refusal=_drain_refusal(execution_plan),
            progress_fn=getattr(execution, "progress", None),
            batch_progress_fn=batch_progress,
        )
        return result.start(execution.metrics_so_far)


def _drain_refusal(plan):
    """Why a streaming run of `plan` cannot be drained (None: it can). A
    drain truncates every splittable DoFn's restrictions with the DoFn's own
    `truncate`, a Java DoFn's in its JVM (worker/java_truncation.py), which
    the runner does not give side inputs."""
    if not isinstance(plan, plans.StreamingPlan):
        return None
    java = sorted(
        op.display_name
        for op in plan.operators
        if op.kind is plans.OperatorKind.SDF
        and op.stage is not None
        and op.stage.environment.is_java
        and op.side_inputs
    )
    if not java:
        return None
    return (
        "the splittable DoFn of %s runs in Beam's Java SDK harness and reads side inputs, which its truncation "
        "there would need too; cancel() stops the run, and a run started with the same --checkpoint_dir resumes it"
        % ", ".join(java)
    )


# A stage's failure, or a value a write's column could not take
# (spark_rows.ColumnTypeError), inside Spark's error.
_STAGE_FAILED = re.compile(
    r"(beam_spark_runner\.worker\.(?:harness_stage|spark_rows)\.)?(?:StageFailed|ColumnTypeError): "
    r"(.*?)(?=\n\s*\tat |\Z)",
    re.S,
)


def _user_error(exc):
    """The Beam stage failure inside a Spark/Py4J error, else the error."""
    text = str(exc)
    match = _STAGE_FAILED.search(text)
    return match.group(2).strip() if match else text


class _RunProgressHandler(logging.StreamHandler):
    """The runner's own lines on stderr while the application has not
    configured logging; once it has (a handler on the root logger), its
    configuration shows them instead."""

    def emit(self, record):
        if not logging.getLogger().handlers:
            super().emit(record)


def show_run_progress(overrides=()):
    """A run says what it does at INFO, one line per meaningful event (Spark
    started with its UI address, a streaming query started, every tenth
    micro-batch's watermarks and rows, drained, finished), on stderr unless
    the application configured logging itself. Beam's
    --sdk_harness_log_level_overrides entries for `beam_spark_runner` (or one
    of its modules) set those loggers' levels on the driver too:
    '{"beam_spark_runner": "WARNING"}' turns the lines off."""
    runner_logger = logging.getLogger("beam_spark_runner")
    if not any(isinstance(h, _RunProgressHandler) for h in runner_logger.handlers):
        handler = _RunProgressHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s beam-spark-runner: %(message)s", "%H:%M:%S"))
        runner_logger.addHandler(handler)
        if runner_logger.level == logging.NOTSET:
            runner_logger.setLevel(logging.INFO)
    for name, level in overrides:
        if name == "beam_spark_runner" or name.startswith("beam_spark_runner."):
            logging.getLogger(name).setLevel(level)
