"""Transforms of Beam Java releases known to answer wrongly here are
refused at submission, naming the transform and the release."""

from apache_beam.portability.api import beam_runner_api_pb2

from beam_spark_runner.translation import java_known_problems

_READ = "Read/KafkaIO.Read/KafkaIO.Read.ReadFromKafkaViaSDF/KafkaIO.ReadSourceDescriptors/ParMultiDo(Unbounded)"


def _pipeline(release, name=_READ):
    components = beam_runner_api_pb2.Components()
    env = components.environments["java"]
    env.urn = "beam:env:docker:v1"
    env.capabilities.append("beam:version:sdk_base:apache/beam_java11_sdk:%s" % release)
    transform = components.transforms["read"]
    transform.unique_name = name
    transform.environment_id = "java"
    return [("read", transform)], components


def test_a_streaming_kafka_read_of_beam_java_2_65_is_refused_naming_it_and_the_release():
    (problem,) = java_known_problems.problems(*_pipeline("2.65.0"), streaming=True)
    assert problem.startswith(_READ + " (Beam Java 2.65.0): KafkaIO's unbounded read")
    assert "ReadFromKafka" in problem and 'ReadFromSpark(format="kafka")' in problem
    unbounded = _READ.replace("ViaSDF", "ViaUnbounded")
    assert java_known_problems.problems(*_pipeline("2.65.0", unbounded), streaming=True)


def test_the_same_read_in_batch_a_newer_release_or_another_transform_is_not():
    assert java_known_problems.problems(*_pipeline("2.65.0"), streaming=False) == []
    assert java_known_problems.problems(*_pipeline("2.71.0"), streaming=True) == []
    assert java_known_problems.problems(*_pipeline("2.65.0", "Ticks/PeriodicImpulse/Impulse"), streaming=True) == []
    assert java_known_problems.java_release(beam_runner_api_pb2.Environment()) is None
