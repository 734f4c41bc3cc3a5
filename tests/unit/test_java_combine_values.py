"""A Java CombineValues becomes a plain composite before Beam's phases
(translation/java_combine_values.py): Beam Java's harness cannot run the
combine_grouped_values composite Beam Python's can."""

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
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


def test_a_java_combine_values_is_expanded_and_a_python_one_kept():
    proto = _proto()
    rewritten = expand_java_combine_values(proto)
    assert not rewritten.components.transforms["java_values"].HasField("spec")
    assert rewritten.components.transforms["py_values"].spec.urn == _CGV
    assert proto.components.transforms["java_values"].spec.urn == _CGV  # the input is not modified


def test_a_pipeline_without_one_is_returned_as_is():
    proto = _proto()
    del proto.components.transforms["java_values"]
    assert expand_java_combine_values(proto) is proto
