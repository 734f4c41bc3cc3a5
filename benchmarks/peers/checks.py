"""The pipelines a peer's `--check` runs on it (benchmarks/peers/prism.py,
benchmarks/peers/flink.py), each with its expected output computed in
plain Python: a wrong answer exits non-zero naming the pipeline. Output
goes through a DoFn writing one file per line, which works in any
windowing and in streaming mode."""

import glob
import os
import time


def run_pipeline(args, build, timeout=600):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.runner import PipelineState

    began = time.monotonic()
    pipeline = beam.Pipeline(options=PipelineOptions(args))
    build(pipeline)
    result = pipeline.run()
    state = result.wait_until_finish(duration=timeout * 1000)
    if state != PipelineState.DONE:
        try:
            result.cancel()
        finally:
            raise SystemExit("pipeline ended in state %s (limit %ds)" % (state, timeout))
    return time.monotonic() - began


def read_lines(prefix):
    lines = []
    for path in sorted(glob.glob(prefix + "*")):
        with open(path) as f:
            lines.extend(line.rstrip("\n") for line in f)
    return sorted(lines)


def write_each(directory):
    """A DoFn that writes each element (a line) to its own file in
    `directory`, named by the line's hash: a retried bundle rewrites the same
    files. Works in any windowing and in streaming mode."""
    import hashlib

    import apache_beam as beam

    class WriteEach(beam.DoFn):
        def process(self, line):
            name = hashlib.sha1(line.encode()).hexdigest()
            tmp = os.path.join(directory, "." + name)
            with open(tmp, "w") as f:
                f.write(line + "\n")
            os.replace(tmp, os.path.join(directory, name + ".line"))

    os.makedirs(directory, exist_ok=True)
    return beam.ParDo(WriteEach())


def check_group_by_key(args, workdir):
    import apache_beam as beam

    data = [("k%d" % (i % 7), i) for i in range(200)]
    expected = {}
    for key, value in data:
        expected.setdefault(key, []).append(value * 3)
    want = sorted("%s\t%d\t%d" % (k, len(v), sum(v)) for k, v in expected.items())
    out = os.path.join(workdir, "gbk")

    def summarize(kv):
        values = list(kv[1])
        return "%s\t%d\t%d" % (kv[0], len(values), sum(values))

    def build(p):
        (
            p
            | beam.Create(data)
            | beam.Map(lambda kv: (kv[0], kv[1] * 3))
            | beam.GroupByKey()
            | beam.Map(summarize)
            | beam.io.WriteToText(out, num_shards=1)
        )

    seconds = run_pipeline(args, build)
    got = read_lines(out)
    if got != want:
        raise SystemExit("GroupByKey pipeline: wrong output\n got: %s\nwant: %s" % (got, want))
    return seconds


def check_windowed_combine(args, workdir, name):
    import apache_beam as beam
    from apache_beam.transforms import window

    data = [("k%d" % (i % 3), i, 1_700_000_000 + 7 * i) for i in range(120)]
    sums = {}
    for key, value, ts in data:
        start = ts - ts % 60
        sums[(key, start)] = sums.get((key, start), 0) + value
    want = sorted("%s\t%d\t%d" % (k, start, total) for (k, start), total in sums.items())
    out = os.path.join(workdir, name)

    class Format(beam.DoFn):
        def process(self, kv, w=beam.DoFn.WindowParam):
            yield "%s\t%d\t%d" % (kv[0], int(w.start), kv[1])

    def build(p):
        (
            p
            | beam.Create(data)
            | beam.Map(lambda e: window.TimestampedValue((e[0], e[1]), e[2]))
            | beam.WindowInto(window.FixedWindows(60))
            | beam.CombinePerKey(sum)
            | beam.ParDo(Format())
            | write_each(out)
        )

    seconds = run_pipeline(args, build)
    got = read_lines(os.path.join(out, ""))
    if got != want:
        raise SystemExit("%s: wrong output\n got: %s\nwant: %s" % (name, got, want))
    return seconds


def check_periodic_impulse(args, workdir, ticks=5):
    import apache_beam as beam
    from apache_beam.transforms.periodicsequence import PeriodicImpulse

    start = int(time.time()) + 2
    want = sorted("tick\t%d\t1" % (start + k) for k in range(ticks))
    out = os.path.join(workdir, "impulse")

    class Format(beam.DoFn):
        def process(self, kv, w=beam.DoFn.WindowParam):
            yield "%s\t%d\t%d" % (kv[0], int(w.start), kv[1])

    def build(p):
        (
            p
            | PeriodicImpulse(
                start_timestamp=start, stop_timestamp=start + ticks, fire_interval=1, apply_windowing=True
            )
            | beam.Map(lambda _: ("tick", 1))
            | beam.CombinePerKey(sum)
            | beam.ParDo(Format())
            | write_each(out)
        )

    seconds = run_pipeline(args, build)
    got = read_lines(os.path.join(out, ""))
    if got != want:
        raise SystemExit("PeriodicImpulse pipeline: wrong output\n got: %s\nwant: %s" % (got, want))
    return seconds
