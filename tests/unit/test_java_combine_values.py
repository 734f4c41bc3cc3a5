"""A Java CombineValues' stage becomes stages of its subtransforms
(translation/java_combine_values.py): Beam Java's harness cannot run the
combine_grouped_values composite Beam Python's can."""

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.portability.fn_api_runner import translations
from apache_beam.transforms import environments

from beam_spark_runner.translation.java_combine_values import expand_java_combine_values

_CGV = common_urns.combine_components.COMBINE_GROUPED_VALUES.urn
JAVA_SDK = environments.SDK_VERSION_CAPABILITY_PREFIX + "apache/beam_java17_sdk:2.71.0"


def _proto():
    proto = beam_runner_api_pb2.Pipeline()
    envs = proto.components.environments
    envs["java"].CopyFrom(beam_runner_api_pb2.Environment(urn="beam:env:docker:v1", capabilities=[JAVA_SDK]))
    envs["py"].CopyFrom(environments.EmbeddedPythonEnvironment.default().to_runner_api(None))
    for name, env in (("java", "java"), ("py", "py")):
        transforms = proto.components.transforms
        transforms[name + "_values"].CopyFrom(
            beam_runner_api_pb2.PTransform(
                unique_name=name + "/Combine.GroupedValues",
                spec=beam_runner_api_pb2.FunctionSpec(urn=_CGV),
                subtransforms=[name + "_pardo"],
            )
        )
        transforms[name + "_pardo"].CopyFrom(
            beam_runner_api_pb2.PTransform(
                unique_name=name + "/Combine.GroupedValues/ParDo",
                spec=beam_runner_api_pb2.FunctionSpec(urn=common_urns.primitives.PAR_DO.urn),
                environment_id=env,
            )
        )
    return proto


class _Context:
    def __init__(self, components):
        self.components = components


def test_a_java_combine_values_stage_becomes_its_subtransforms_and_a_python_one_stays():
    components = _proto().components
    stages = [
        translations.Stage("java", [components.transforms["java_values"]], environment="java"),
        translations.Stage("py", [components.transforms["py_values"]], environment="py"),
    ]
    out = list(expand_java_combine_values(stages, _Context(components)))
    assert [[t.unique_name for t in s.transforms] for s in out] == [
        ["java/Combine.GroupedValues/ParDo"],
        ["py/Combine.GroupedValues"],
    ]
    assert out[0].parent == "java" and out[0].environment == "java"
    assert out[1] is stages[1]
