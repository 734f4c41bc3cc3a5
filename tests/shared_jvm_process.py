"""A stand-in for one Spark Python worker running Java bundles, for
tests/integration/test_java_harness.py: started twice by the test (the
two processes are children of one parent, as an executor's Python workers
are), each runs a bundle through Beam's Java SDK harness whenever a line
arrives on stdin, and prints what it saw as one JSON line.

    python -m tests.shared_jvm_process JOB_NAME

The bundle: a Java flatten between the runner's data ports, so its output
is its input, read and written by this process whichever JVM runs it.
"""

import json
import sys

from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_InputStream
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.cross_language.java_sdk import BEAM_JAVA_VERSION, harness_jars
from beam_spark_runner.maven_jars import resolve
from beam_spark_runner.worker import java_harness
from beam_spark_runner.worker.beam_internals import DATA_INPUT_URN, DATA_OUTPUT_URN

_ELEMENT_CODER = coders.WindowedValueCoder(coders.BytesCoder(), coders.GlobalWindowCoder()).get_impl()


def flatten_descriptor():
    d = beam_fn_api_pb2.ProcessBundleDescriptor(id="flatten")
    d.coders["bytes"].spec.urn = common_urns.coders.BYTES.urn
    d.coders["window"].spec.urn = common_urns.coders.GLOBAL_WINDOW.urn
    element = d.coders["element"]
    element.spec.urn = common_urns.coders.WINDOWED_VALUE.urn
    element.component_coder_ids.extend(["bytes", "window"])
    strategy = d.windowing_strategies["global"]
    strategy.window_fn.urn = common_urns.global_windows.urn
    strategy.merge_status = beam_runner_api_pb2.MergeStatus.NON_MERGING
    strategy.window_coder_id = "window"
    strategy.trigger.default.SetInParent()
    strategy.accumulation_mode = beam_runner_api_pb2.AccumulationMode.DISCARDING
    strategy.output_time = beam_runner_api_pb2.OutputTime.END_OF_WINDOW
    strategy.closing_behavior = beam_runner_api_pb2.ClosingBehavior.EMIT_IF_NONEMPTY
    strategy.on_time_behavior = beam_runner_api_pb2.OnTimeBehavior.FIRE_ALWAYS
    for name in ("in", "out"):
        pcollection = d.pcollections[name]
        pcollection.unique_name = name
        pcollection.coder_id = "bytes"
        pcollection.windowing_strategy_id = "global"
        pcollection.is_bounded = beam_runner_api_pb2.IsBounded.BOUNDED
    port = beam_fn_api_pb2.RemoteGrpcPort(coder_id="element").SerializeToString()
    read = d.transforms["read"]
    read.unique_name, read.spec.urn, read.spec.payload = "read", DATA_INPUT_URN, port
    read.outputs["out"] = "in"
    flatten = d.transforms["flatten"]
    flatten.unique_name, flatten.spec.urn = "flatten", common_urns.primitives.FLATTEN.urn
    flatten.inputs["0"] = "in"
    flatten.outputs["out"] = "out"
    write = d.transforms["write"]
    write.unique_name, write.spec.urn, write.spec.payload = "write", DATA_OUTPUT_URN, port
    write.inputs["in"] = "out"
    return d


def run_bundle(classpath, options, values):
    harness = java_harness.JavaSdkHarness(flatten_descriptor(), classpath, ["write"], (), options)
    try:
        instruction = harness.new_instruction_id()
        block = b"".join(
            _ELEMENT_CODER.encode_nested(WindowedValue(v, MIN_TIMESTAMP, [GlobalWindow()])) for v in values
        )
        harness.write_input(instruction, "read", [block])
        response = harness.process(instruction)
        outputs = []
        for data in harness.read_outputs(instruction, None):
            stream = create_InputStream(data.data)
            while stream.size() > 0:
                outputs.append(_ELEMENT_CODER.decode_from_stream(stream, True).value)
        return response.error, outputs, harness._worker
    finally:
        harness.close()


def main(job_name):
    classpath = resolve(harness_jars(BEAM_JAVA_VERSION))
    options = json.dumps({"beam:option:job_name:v1": job_name})
    for round_number, _ in enumerate(sys.stdin):
        values = [("%s-%d" % (job_name, i)).encode() for i in range(3 + round_number)]
        try:
            error, outputs, worker = run_bundle(classpath, options, values)
            report = {
                "worker": type(worker).__name__,
                "jvm_pid": worker.shared_jvm.jvm_pid if hasattr(worker, "shared_jvm") else worker._process.pid,
                "error": error,
                "sent": sorted(v.decode() for v in values),
                "received": sorted(v.decode() for v in outputs),
            }
        except Exception as e:  # noqa: BLE001 -- reported to the test
            report = {"exception": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
