"""Spark glue for the runner's own reads and writes (translation/native_io.py).

Each entry of `NATIVE_STAGES` builds the RDD of `(output index, block)` of a
stage holding one native transform, like a fused stage's `mapPartitions`:
- read_text: one partition per group of byte ranges (balanced by size on
  the driver), each reading its ranges and encoding the lines into blocks;
- write_files: initializes the write on the driver, writes every input
  partition through the sink in a Spark job, finalizes on the driver, and
  returns the final file names. The job runs when the stage is built, since
  finalization must follow it; a retried task's temporary files are never
  finalized (only results that reached the driver are).
"""
import functools

from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.transforms import window
from apache_beam.utils.timestamp import MAX_TIMESTAMP, MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.execution.naming import name_rdd, spark_call_site
from beam_spark_runner.translation.native_io import READ_TEXT_URN, WRITE_FILES_URN, decode_payload
from beam_spark_runner.worker import context, files
from beam_spark_runner.worker.runs import DecodedBlock

BLOCK_ELEMENTS = 8192
_GLOBAL = WindowedValue(None, MIN_TIMESTAMP, (window.GlobalWindow(),))


def read_text_rdd(execution, stage):
    config = decode_payload(stage.native.payload)
    partitions = files.plan_text_ranges(config, execution.parallelism)
    sc = execution.sc
    if not partitions:
        return sc.emptyRDD()
    ports = [(i, p.coder_id) for i, p in enumerate(stage.outputs)]
    read = functools.partial(_read_text_partition, config, execution.plan.components, ports,
                             execution.feeds_plain_stage_in_process(stage))
    return sc.parallelize(partitions, len(partitions)).mapPartitions(read)


def _read_text_partition(config, components, ports, in_process, partitions):
    """Blocks of lines; as DecodedBlocks when the only reader is a plain
    Python stage in the same task (no encoding, see runs.DecodedBlock)."""
    impls = [(i, context.coder_impl(components, coder_id)) for i, coder_id in ports]
    for ranges in partitions:
        batch = []
        for value in files.read_text_ranges(config, ranges):
            batch.append(value)
            if len(batch) >= BLOCK_ELEMENTS:
                yield from _read_blocks(impls, batch, in_process)
                batch = []
        if batch:
            yield from _read_blocks(impls, batch, in_process)


def _read_blocks(impls, values, in_process):
    if in_process:
        return [(impls[0][0], DecodedBlock([(_GLOBAL, values)]))]
    return _blocks(impls, values, _GLOBAL)


def _blocks(impls, values, template):
    for index, impl in impls:
        stream = create_OutputStream()
        encode = impl.encode_to_stream
        with_value = template.with_value
        for value in values:
            encode(with_value(value), stream, True)
        yield index, stream.get()


def write_files_rdd(execution, stage):
    config = decode_payload(stage.native.payload)
    sink = config.sink
    sc = execution.sc
    init_result = sink.initialize_write()
    (port,) = stage.inputs
    write = functools.partial(_write_partition, sink, init_result, execution.plan.components, port.coder_id)
    execution.check_not_cancelled()
    sc.setJobDescription("Beam: %s" % stage.display_name)
    with spark_call_site(sc, stage.display_name):
        blocks = execution.input_rdd(stage).map(_second)
        results = name_rdd(blocks.mapPartitions(write), stage.display_name).collect()
    names = files.finalize_write(sink, init_result, results)
    # WriteImpl emits the final names at the end of the global window.
    final = WindowedValue(None, MAX_TIMESTAMP, (window.GlobalWindow(),))
    impls = [(i, context.coder_impl(execution.plan.components, p.coder_id)) for i, p in enumerate(stage.outputs)]
    return sc.parallelize(list(_blocks(impls, names, final)) if names else [], 1)


def _write_partition(sink, init_result, components, coder_id, blocks):
    decode = context.coder_impl(components, coder_id).decode_from_stream

    def values():
        for block in blocks:
            stream = create_InputStream(block)
            while stream.size() > 0:
                yield decode(stream, True).value

    return files.write_partition(sink, init_result, values())


def _second(pair):
    return pair[1]


NATIVE_STAGES = {
    READ_TEXT_URN: read_text_rdd,
    WRITE_FILES_URN: write_files_rdd,
}
