"""Spark glue for the runner's own reads and writes (translation/native_io_overrides.py).

Each stage registered here (execution/runner_io_glue.py) builds the RDD of `(output index, block)` of a
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

from apache_beam.transforms import window
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.execution import runner_io_glue
from beam_spark_runner.execution.naming import name_rdd, spark_call_site
from beam_spark_runner.translation.native_io_overrides import READ_TEXT_URN, WRITE_FILES_URN, decode_payload
from beam_spark_runner.worker import context, files
from beam_spark_runner.worker.runs import GLOBAL_TEMPLATE, DecodedBlock, RunCodec

BLOCK_ELEMENTS = 8192


def read_text_rdd(execution, stage):
    config = decode_payload(stage.native.payload)
    partitions = files.plan_text_ranges(config, execution.parallelism)
    sc = execution.sc
    if not partitions:
        return sc.emptyRDD()
    ports = [(i, p.coder_id) for i, p in enumerate(stage.outputs)]
    read = functools.partial(
        _read_text_partition, config, execution.plan.components, ports, execution.feeds_plain_stage_in_process(stage)
    )
    return sc.parallelize(partitions, len(partitions)).mapPartitions(read)


def _read_text_partition(config, components, ports, in_process, partitions):
    """Blocks of lines; as DecodedBlocks when the only reader is a plain
    Python stage in the same task (no encoding, see runs.DecodedBlock)."""
    codecs = _codecs(components, ports)
    for ranges in partitions:
        batch = []
        for value in files.read_text_ranges(config, ranges):
            batch.append(value)
            if len(batch) >= BLOCK_ELEMENTS:
                yield from _read_blocks(codecs, batch, in_process)
                batch = []
        if batch:
            yield from _read_blocks(codecs, batch, in_process)


def _codecs(components, ports):
    ctx = context.components_context(components)
    return [(i, RunCodec(ctx.coders[coder_id])) for i, coder_id in ports]


def _read_blocks(codecs, values, in_process):
    runs = [(GLOBAL_TEMPLATE, values)]
    if in_process:
        return [(codecs[0][0], DecodedBlock(runs))]
    return [(index, codec.encode(runs)) for index, codec in codecs]


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
    execution.after_spark_job()
    names = files.finalize_write(sink, init_result, results)
    # WriteImpl emits the final names at the end of the global window.
    final = WindowedValue(None, MAX_TIMESTAMP, (window.GlobalWindow(),))
    codecs = _codecs(execution.plan.components, [(i, p.coder_id) for i, p in enumerate(stage.outputs)])
    blocks = [(index, codec.encode([(final, names)])) for index, codec in codecs] if names else []
    return sc.parallelize(blocks, 1)


def _write_partition(sink, init_result, components, coder_id, blocks):
    ((_, codec),) = _codecs(components, [(0, coder_id)])
    values = (v for block in blocks for _, run in codec.decode(block) for v in run)
    return files.write_partition(sink, init_result, values)


def _second(pair):
    return pair[1]


runner_io_glue.register_batch_stage(READ_TEXT_URN, read_text_rdd)
runner_io_glue.register_batch_stage(WRITE_FILES_URN, write_files_rdd)
