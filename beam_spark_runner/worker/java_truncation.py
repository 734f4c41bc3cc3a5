"""Beam's drain step for a splittable DoFn that runs in Beam's Java SDK
harness (KafkaIO's read): its restrictions truncated by the DoFn's own
code, in its JVM.

Where worker/sdf_truncation.py calls a Python DoFn's
`RestrictionProvider.truncate` itself, a Java DoFn's truncation must run
in Java: the runner gives the JVM a bundle descriptor of Beam's
TruncateSizedRestriction transform (`beam:transform:sdf_truncate_sized_restrictions:v1`,
the ParDo's own payload), reading and writing the elements-and-restrictions
in the coder the stage's splittable DoFn reads them with, and runs the
residuals through it: each comes back truncated and sized again, or not at
all when the DoFn truncates it to nothing (the default for an unbounded
restriction: Beam Java's `DoFn` truncates a restriction whose tracker is
unbounded to none, so a drained KafkaIO read reads nothing more).

Guarantees: as worker/sdf_truncation.RestrictionTruncator's, `truncate`
returns the element truncated (encoded as the stage reads it), or None
when the DoFn truncates it to nothing; other inputs' elements unchanged.
Each element is truncated in a bundle of its own, so what comes back is
known to be its own. A truncation the DoFn fails raises StageFailed with
the Java error, naming the DoFn.
"""

from typing import Optional, Sequence

from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2

from beam_spark_runner.worker import context
from beam_spark_runner.worker.beam_internals import DATA_INPUT_URN, DATA_OUTPUT_URN

PROCESS_URN = common_urns.sdf_components.PROCESS_SIZED_ELEMENTS_AND_RESTRICTIONS.urn
TRUNCATE_URN = common_urns.sdf_components.TRUNCATE_SIZED_RESTRICTION.urn
_READ, _TRUNCATE, _WRITE = "truncate_read", "truncate", "truncate_write"
_IN, _OUT = "truncate_in", "truncate_out"


class UntruncatableJavaDoFn(ValueError):
    """A Java splittable DoFn this runner cannot truncate (one with side inputs)."""


def truncate_descriptor(descriptor, main_input_id: str) -> beam_fn_api_pb2.ProcessBundleDescriptor:
    """A descriptor of the stage's splittable DoFn's truncation alone: data
    input -> TruncateSizedRestriction -> data output, each port in the coder
    of the stage's data input `main_input_id` (the transform that feeds the
    DoFn's main input)."""
    _, process = _process_transform(descriptor)
    payload = beam_runner_api_pb2.ParDoPayload.FromString(process.spec.payload)
    if payload.side_inputs:
        raise UntruncatableJavaDoFn(
            "the splittable DoFn %s reads side inputs, which its truncation in Beam's Java SDK harness would "
            "need too" % process.unique_name
        )
    (main_name,) = [n for n in process.inputs if n not in payload.timer_family_specs]
    main_pcollection = descriptor.pcollections[process.inputs[main_name]]
    port = beam_fn_api_pb2.RemoteGrpcPort.FromString(descriptor.transforms[main_input_id].spec.payload)
    truncated = beam_fn_api_pb2.ProcessBundleDescriptor()
    truncated.coders.MergeFrom(descriptor.coders)
    truncated.windowing_strategies.MergeFrom(descriptor.windowing_strategies)
    truncated.environments.MergeFrom(descriptor.environments)
    for name in (_IN, _OUT):
        truncated.pcollections[name].CopyFrom(main_pcollection)
    read = truncated.transforms[_READ]
    read.unique_name = "%s/TruncateRead" % process.unique_name
    read.spec.urn, read.spec.payload = DATA_INPUT_URN, port.SerializeToString()
    read.outputs["out"] = _IN
    truncate = truncated.transforms[_TRUNCATE]
    truncate.unique_name = "%s/Truncate" % process.unique_name
    truncate.spec.urn, truncate.spec.payload = TRUNCATE_URN, process.spec.payload
    truncate.environment_id = process.environment_id
    truncate.inputs[main_name] = _IN
    truncate.outputs["out"] = _OUT
    write = truncated.transforms[_WRITE]
    write.unique_name = "%s/TruncateWrite" % process.unique_name
    write.spec.urn, write.spec.payload = DATA_OUTPUT_URN, port.SerializeToString()
    write.inputs["in"] = _OUT
    return truncated


def _process_transform(descriptor):
    found = [(tid, t) for tid, t in descriptor.transforms.items() if t.spec.urn == PROCESS_URN]
    if len(found) != 1:
        raise ValueError("expected one splittable DoFn in the stage, found %d" % len(found))
    return found[0]


class JavaRestrictionTruncator:
    """Truncates the encoded input of a Java stage's splittable DoFn in the
    stage's JVM (the module's guarantees)."""

    def __init__(self, stage, descriptor, components, input_ids: Sequence[str], input_index_feeding):
        from beam_spark_runner.worker.java_harness import JavaSdkHarness

        process_id, process = _process_transform(descriptor)
        payload = beam_runner_api_pb2.ParDoPayload.FromString(process.spec.payload)
        (main_name,) = [
            n for n in process.inputs if n not in payload.side_inputs and n not in payload.timer_family_specs
        ]
        self.main_index = input_index_feeding(process_id, main_name)
        self.transform_name = process.unique_name
        environment = stage.environment
        self._harness = JavaSdkHarness(
            truncate_descriptor(descriptor, input_ids[self.main_index]),
            environment.classpath,
            [_WRITE],
            environment.jvm_options,
            environment.pipeline_options,
        )
        # The stage's own (runner-side) coder of that input: Java's coders
        # inside it are length-prefixed bytes, so each element is cut from
        # the harness's output stream and encoded again byte for byte.
        self._impl = context.coder_impl(components, stage.inputs[self.main_index].coder_id)

    def truncate(self, index: int, encoded: bytes) -> Optional[bytes]:
        if index != self.main_index:
            return encoded
        harness = self._harness
        instruction = harness.new_instruction_id()
        harness.write_input(instruction, _READ, [encoded])
        response = harness.process(instruction)
        if response.error:
            from beam_spark_runner.worker.harness_stage import StageFailed

            raise StageFailed.of_bundle("%s (truncating a restriction to drain)" % self.transform_name, response.error)
        truncated = []
        for data in harness.read_outputs(instruction, None):
            stream = create_InputStream(data.data)
            while stream.size() > 0:
                out = create_OutputStream()
                self._impl.encode_to_stream(self._impl.decode_from_stream(stream, True), out, True)
                truncated.append(out.get())
        if len(truncated) > 1:
            raise ValueError(
                "%s: truncating one restriction gave %d elements; expected at most one"
                % (self.transform_name, len(truncated))
            )
        return truncated[0] if truncated else None

    def close(self):
        self._harness.close()
