"""options.option_problems without a pipeline: what is refused, what warns."""

from apache_beam.options.pipeline_options import PipelineOptions

from beam_spark_runner.options import EMBEDDED_PYTHON_ENVIRONMENT, keeps_every_stage_on_the_sdk_harness
from beam_spark_runner.options import option_problems


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
