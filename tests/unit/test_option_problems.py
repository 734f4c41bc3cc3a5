"""options.option_problems without a pipeline: what is refused, what warns."""

from apache_beam.options.pipeline_options import PipelineOptions

from beam_spark_runner.options import EMBEDDED_PYTHON_ENVIRONMENT, keeps_every_stage_on_the_sdk_harness
from beam_spark_runner.options import mode_problems, option_problems


def test_defaults_and_honoured_options_raise_nothing():
    assert option_problems(PipelineOptions([])) == ([], [])
    assert option_problems(
        PipelineOptions(
            [
                "--environment_type=" + EMBEDDED_PYTHON_ENVIRONMENT,
                "--pickle_library=cloudpickle",
                "--spark_master=local[1]",
                "--streaming",
            ]
        )
    ) == ([], [])


def test_a_pickle_library_the_workers_do_not_use_is_refused():
    # (Beam itself refuses dill at pipeline construction when it is not
    # installed; where it is, the runner does.)
    errors, _ = option_problems(PipelineOptions(["--pickle_library=dill"]))
    assert len(errors) == 1 and "--pickle_library=dill" in errors[0]


def test_every_refusal_names_its_option_once():
    errors, warnings = option_problems(
        PipelineOptions(
            [
                "--environment_type=PROCESS",
                "--environment_option=process_command=/bin/x",
                "--beam_plugins=my.plugin",
                "--files_to_stage=a.txt",
                "--prebuild_sdk_container_engine=cloud_build",
            ]
        )
    )
    assert [e.split("=")[0] for e in errors] == [
        "--environment_type",
        "--environment_options",
        "--prebuild_sdk_container_engine",
        "--files_to_stage",
        "--beam_plugins",
    ]
    assert warnings == []


def test_performance_runtime_type_check_keeps_stages_on_the_sdk_harness():
    assert not keeps_every_stage_on_the_sdk_harness(PipelineOptions([]))
    assert keeps_every_stage_on_the_sdk_harness(PipelineOptions(["--performance_runtime_type_check"]))
    assert keeps_every_stage_on_the_sdk_harness(PipelineOptions(["--sdk_harness_only"]))


def test_streaming_options_out_of_range_are_refused_naming_them():
    errors, _ = mode_problems(
        PipelineOptions(
            [
                "--publish_every_batches=0",
                "--publish_interval_ms=-1",
                "--tolerable_failed_batches=-2",
                "--watermark_percentile=0",
            ]
        ),
        streaming=True,
    )
    assert [e.split("=")[0] for e in errors] == [
        "--publish_every_batches",
        "--publish_interval_ms",
        "--tolerable_failed_batches",
        "--watermark_percentile",
    ]
    for bad in ("1.5", "-0.1"):
        (error,) = mode_problems(PipelineOptions(["--watermark_percentile=" + bad]), streaming=True)[0]
        assert error == "--watermark_percentile=%s must be above 0 and at most 1" % float(bad)
    assert mode_problems(PipelineOptions(["--watermark_percentile=0.95"]), streaming=True) == ([], [])


def test_streaming_options_given_to_a_batch_run_warn_naming_each():
    flags = [
        "--checkpoint_dir=/tmp/x",
        "--publish_every_batches=3",
        "--tolerable_failed_batches=1",
        "--watermark_percentile=0.9",
    ]
    assert mode_problems(PipelineOptions(flags), streaming=True) == ([], [])
    errors, warnings = mode_problems(PipelineOptions(flags), streaming=False)
    assert errors == []
    assert [w.split("=")[0] for w in warnings] == [
        "--checkpoint_dir",
        "--publish_every_batches",
        "--tolerable_failed_batches",
        "--watermark_percentile",
    ]
    assert all("runs in batch" in w for w in warnings)


def test_batch_only_options_in_streaming_are_warned_and_a_negative_group_limit_refused():
    flags = ["--bundle_size_bytes=1024", "--grouped_values_in_memory_bytes=0"]
    assert mode_problems(PipelineOptions(flags), streaming=False) == ([], [])
    errors, warnings = mode_problems(PipelineOptions(flags), streaming=True)
    assert errors == []
    assert [w.split("=")[0] for w in warnings] == ["--bundle_size_bytes", "--grouped_values_in_memory_bytes"]
    assert all("runs in streaming" in w for w in warnings)
    errors, _ = mode_problems(PipelineOptions(["--grouped_values_in_memory_bytes=-1"]), streaming=False)
    assert errors == ["--grouped_values_in_memory_bytes=-1 must not be negative"]
