"""Generated cases for the file sinks' differential property: what a pipeline
produced must be exactly what its sink published.

A case (`generate(seed)`, deterministic in its seed) is a small random stream
(keys, event times out of order and late, watermark and processing-time
advances) through a WindowFn (fixed, sliding, sessions, global, or a custom
merging WindowFn with a window type of its own), a trigger tree, an
accumulation mode (all three), an allowed lateness and a timestamp combiner,
into a GroupByKey whose panes are described as records, and those records
into a sink (`WriteToText`, `WriteToText` with a triggering frequency,
`WriteToAvro`, `WriteToParquet`, `fileio.WriteToFiles`, or only the
in-memory collector).

Three answers are compared (`check`):

* `expected_records`: the panes of the project's pure reduce driver
  (triggers/), fed the stream as the runner's micro-batches see it (each
  TestStream event one batch) in streaming, or the bounded GroupByKey
  (`triggers.batch.group_by_window`) in batch;
* the records the pipeline produced on SparkRunner, collected right before
  the sink (an `assert_that` that writes what it saw to a file);
* the records the sink published (read back from its files; staging
  directories excluded).

All three must be equal multisets: nothing published twice, nothing lost,
and the runner's panes the pure driver's. The failure message names the
seed; `tools/sink_property_search.py` runs many seeds.
"""

import dataclasses
import json
import os
import random
from typing import Optional, Tuple

import apache_beam as beam
from apache_beam.coders import coders
from apache_beam.io import fileio
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.transforms import trigger as T
from apache_beam.transforms import window as W
from apache_beam.transforms.core import Windowing
from apache_beam.utils.timestamp import MAX_TIMESTAMP, MIN_TIMESTAMP, Timestamp
from apache_beam.utils.windowed_value import PaneInfoTiming, WindowedValue

from beam_spark_runner import SparkRunner
from triggers import ManualClock, ReduceSpec
from triggers.batch import group_by_window
from triggers.closing import PYTHON_SDK_DEFAULT
from triggers.retractions import Retraction, unwrap

SINKS = ("memory", "text", "text_frequency", "avro", "parquet", "fileio")
MODES = (T.AccumulationMode.DISCARDING, T.AccumulationMode.ACCUMULATING, 3)  # 3: RETRACTING
MODE_NAMES = {1: "DISCARDING", 2: "ACCUMULATING", 3: "RETRACTING"}
COMBINERS = (
    W.TimestampCombiner.OUTPUT_AT_EOW,
    W.TimestampCombiner.OUTPUT_AT_EARLIEST,
    W.TimestampCombiner.OUTPUT_AT_LATEST,
)
AVRO_SCHEMA = {"name": "Pane", "type": "record", "fields": [{"name": "pane", "type": "string"}]}


# --- a merging WindowFn with a window type of its own -----------------------


class BucketWindow(W.IntervalWindow):
    """An interval that also names its 10-second bucket."""

    def __init__(self, start, end, bucket):
        super().__init__(start, end)
        self.bucket = bucket

    def __eq__(self, other):
        return type(other) is BucketWindow and super().__eq__(other) and self.bucket == other.bucket

    def __hash__(self):
        return hash((self.start, self.end, self.bucket))

    def __repr__(self):
        return "BucketWindow(%s, %s, %d)" % (float(self.start), float(self.end), self.bucket)


class BucketWindowCoder(coders.Coder):
    _bounds = coders.TupleCoder((coders.VarIntCoder(), coders.VarIntCoder(), coders.VarIntCoder()))

    def encode(self, w):
        return self._bounds.encode((w.start.micros, w.end.micros, w.bucket))

    def decode(self, encoded):
        start, end, bucket = self._bounds.decode(encoded)
        return BucketWindow(Timestamp(micros=start), Timestamp(micros=end), bucket)

    def is_deterministic(self):
        return True

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))


class BucketSessions(W.WindowFn):
    """Each element gets [t, t + 2) in its 10-second bucket; windows of one
    bucket that overlap merge (sessions that never cross a bucket)."""

    def assign(self, context):
        t = context.timestamp
        return [BucketWindow(t, t + 2, int(t) // 10)]

    def merge(self, merge_context):
        by_bucket = {}
        for w in merge_context.windows:
            by_bucket.setdefault(w.bucket, []).append(w)
        for bucket, windows in sorted(by_bucket.items()):
            windows.sort(key=lambda w: (w.start, w.end))
            group, end = [], None
            for w in windows + [None]:
                if w is not None and group and w.start < end:
                    group.append(w)
                    end = max(end, w.end)
                    continue
                if len(group) > 1:
                    merge_context.merge(group, BucketWindow(group[0].start, end, bucket))
                if w is not None:
                    group, end = [w], w.end

    def get_window_coder(self):
        return BucketWindowCoder()

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))

    def __repr__(self):
        return "BucketSessions()"


# --- cases ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    seed: int
    window_fn: object
    trigger: object
    mode: int
    combiner: object
    lateness: int
    sink: str
    # ("input", ((key, value, timestamp), ...)) | ("watermark", t) | ("clock", seconds)
    events: Tuple[tuple, ...]
    parallelism: int
    text_shards: Tuple[int, Optional[int]] = (0, None)  # (num_shards, max_records_per_shard)

    def describe(self):
        return "seed %d: %r, trigger %r, %s, combiner %s, lateness %d, sink %s %s, parallelism %d, events %r" % (
            self.seed,
            _window_fn_text(self.window_fn),
            self.trigger,
            MODE_NAMES[int(self.mode)],
            self.combiner,
            self.lateness,
            self.sink,
            self.text_shards,
            self.parallelism,
            self.events,
        )

    @property
    def windowing(self):
        return Windowing(self.window_fn, self.trigger, self.mode, self.combiner, self.lateness)


def _window_fn_text(fn):
    if isinstance(fn, W.FixedWindows):
        return "FixedWindows(%s)" % fn.size
    if isinstance(fn, W.SlidingWindows):
        return "SlidingWindows(%s, %s)" % (fn.size, fn.period)
    if isinstance(fn, W.Sessions):
        return "Sessions(%s)" % fn.gap_size
    return repr(fn) if isinstance(fn, BucketSessions) else type(fn).__name__ + "()"


def _window_fn(rng):
    kind = rng.randrange(5)
    if kind == 0:
        return W.FixedWindows(rng.randint(3, 10))
    if kind == 1:
        period = rng.randint(1, 4)
        return W.SlidingWindows(period * rng.randint(2, 3), period)
    if kind == 2:
        return W.Sessions(rng.randint(1, 5))
    if kind == 3:
        return BucketSessions()
    return W.GlobalWindows()


def _trigger(rng, depth=0):
    if depth >= 2 or rng.random() < 0.4:
        leaf = rng.randrange(4)
        if leaf == 0:
            return T.DefaultTrigger()
        if leaf == 1:
            return T.AfterCount(rng.randint(1, 3))
        if leaf == 2:
            return T.AfterWatermark()
        return T.AfterProcessingTime(rng.randint(1, 5))
    kind = rng.randrange(6)
    sub = lambda: _trigger(rng, depth + 1)  # noqa: E731
    if kind == 0:
        return T.Repeatedly(sub())
    if kind == 1:
        early = sub() if rng.random() < 0.8 else None
        late = sub() if rng.random() < 0.6 else None
        return T.AfterWatermark(early=early, late=late)
    if kind == 2:
        return T.AfterAny(sub(), sub())
    if kind == 3:
        return T.AfterAll(sub(), sub())
    if kind == 4:
        return T.AfterEach(sub(), sub())
    return T.OrFinally(sub(), sub())


def _events(rng, keys):
    events, watermark, n = [], 0, 0
    for i in range(rng.randint(2, 7)):
        r = rng.random()
        if r < 0.55 or i == 0:
            batch = []
            for _ in range(rng.randint(1, 4)):
                ts = max(0, watermark + rng.randint(-6, 12))  # some behind the watermark: late
                batch.append((rng.choice(keys), "e%d@%d" % (n, ts), ts))
                n += 1
            events.append(("input", tuple(batch)))
        elif r < 0.85:
            watermark += rng.randint(1, 10)
            events.append(("watermark", watermark))
        else:
            events.append(("clock", rng.randint(1, 5)))
    return tuple(events)


def generate(seed, sink=None):
    """The case of `seed` (its sink may be forced)."""
    rng = random.Random(seed)
    keys = ["k%d" % i for i in range(rng.randint(1, 3))]
    case = Case(
        seed=seed,
        window_fn=_window_fn(rng),
        trigger=_trigger(rng),
        mode=rng.choice(MODES),
        combiner=rng.choice(COMBINERS),
        lateness=rng.choice((0, 0, 3, 10, 100)),
        sink=rng.choice(SINKS),
        events=_events(rng, keys),
        parallelism=rng.choice((1, 3)),
        text_shards=rng.choice(((0, None), (2, None), (0, 2))),
    )
    case = dataclasses.replace(case, sink=sink) if sink else case
    if case.sink == "text" and isinstance(case.window_fn, W.GlobalWindows):
        # Beam's rule: unbounded writes in the global window need a frequency.
        case = dataclasses.replace(case, sink="text_frequency")
    return case


# --- records ----------------------------------------------------------------


def _window_text(w):
    if isinstance(w, W.GlobalWindow):
        return "global"
    text = "[%d,%d)" % (w.start.micros, w.end.micros)
    return text + "#%d" % w.bucket if isinstance(w, BucketWindow) else text


_TIMING = {PaneInfoTiming.EARLY: "early", PaneInfoTiming.ON_TIME: "on_time", PaneInfoTiming.LATE: "late"}


def pane_record(key, values, w, pane, timestamp):
    """A GroupByKey pane as one record: a string, wrapped in `Retraction` for
    a retracted pane."""
    values, retraction = unwrap(values)
    text = "%s|%s|%d|%s|%s|%d|%s" % (
        key,
        _window_text(w),
        pane.index,
        _TIMING.get(pane.timing, "unknown"),
        "last" if pane.is_last else "-",
        # Milliseconds: what a timestamp keeps across stages (Beam's data plane).
        timestamp.micros // 1000,
        ",".join(sorted(values)),
    )
    return Retraction(text) if retraction else text


class DescribePanes(beam.DoFn):
    def process(self, kv, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam, ts=beam.DoFn.TimestampParam):
        yield pane_record(kv[0], kv[1], w, pane, ts)


def as_published(record, sink):
    """The text a sink publishes a record as: a text sink writes the
    record's str(); the others, whose records cannot hold a Retraction, are
    given (and write) 'R:' before a retracted record's text."""
    if sink in ("text", "text_frequency", "memory"):
        return str(record)
    text, retraction = unwrap(record)
    return "R:" + text if retraction else text


def _plain(record):
    text, retraction = unwrap(record)
    return "R:" + text if retraction else text


# --- the pure driver's answer ----------------------------------------------


def expected_records(case, streaming):
    """The records the pure driver produces for the case, as the sink publishes them."""
    if not streaming:
        by_key = {}
        for key, value, ts in (e for kind, arg in case.events if kind == "input" for e in arg):
            by_key.setdefault(key, []).append(_windowed(case.window_fn, value, ts))
        out = []
        for key, bundle in sorted(by_key.items()):
            for wv in group_by_window(case.windowing, key, bundle, PYTHON_SDK_DEFAULT):
                out.append(pane_record(key, wv.value[1], wv.windows[0], wv.pane_info, wv.timestamp))
        return sorted(as_published(r, case.sink) for r in out)
    spec = ReduceSpec(case.window_fn, case.trigger, case.mode, case.combiner, case.lateness)
    clock = ManualClock(0)
    reducers = {}
    watermark, now, out = MIN_TIMESTAMP, 0, []

    def take(key, wvs):
        out.extend(pane_record(key, wv.value, wv.windows[0], wv.pane_info, wv.timestamp) for wv in wvs)

    def reducer(key):
        if key not in reducers:
            reducers[key] = spec.new_reducer(clock=clock)
        return reducers[key]

    for kind, arg in case.events:
        if kind == "input":
            by_key = {}
            for key, value, ts in arg:
                by_key.setdefault(key, []).append(_windowed(case.window_fn, value, ts))
            for key, bundle in sorted(by_key.items()):
                take(key, reducer(key).process(bundle, watermark))
            for key in sorted(reducers):
                take(key, reducers[key].advance_watermark(watermark))
        elif kind == "watermark":
            watermark = Timestamp.of(arg)
            for key in sorted(reducers):
                take(key, reducers[key].advance_watermark(watermark))
        else:
            now += arg
            for key in sorted(reducers):
                take(key, reducers[key].advance_processing_time(now))
    for key in sorted(reducers):
        take(key, reducers[key].advance_watermark(MAX_TIMESTAMP))
    return sorted(as_published(r, case.sink) for r in out)


def _windowed(window_fn, value, ts):
    return WindowedValue(value, ts, window_fn.assign(W.WindowFn.AssignContext(Timestamp.of(ts), value)))


# --- the pipeline on SparkRunner --------------------------------------------


def _test_stream(case):
    stream = TestStream()
    for kind, arg in case.events:
        if kind == "input":
            stream = stream.add_elements([W.TimestampedValue((key, value), ts) for key, value, ts in arg])
        elif kind == "watermark":
            stream = stream.advance_watermark_to(arg)
        else:
            stream = stream.advance_processing_time(arg)
    return stream.advance_watermark_to_infinity()


def _capture_to(path):
    def capture(actual):
        with open(path + ".tmp", "w") as f:
            json.dump(sorted(_plain(r) for r in actual), f)
        os.replace(path + ".tmp", path)

    return capture


def _write(records, case, out):
    sink = case.sink
    num_shards, max_records = case.text_shards
    if sink == "memory":
        return
    if sink in ("text", "text_frequency"):
        frequency = {"triggering_frequency": 5} if sink == "text_frequency" else {}
        records | beam.io.WriteToText(
            os.path.join(out, "part"), num_shards=num_shards, max_records_per_shard=max_records, **frequency
        )
        return
    plain = records | "Plain" >> beam.Map(_plain)
    if sink == "fileio":
        plain | fileio.WriteToFiles(os.path.join(out, "files"), shards=max(num_shards, 1))
        return
    # Beam's rule: unbounded writes in the global window need a frequency.
    frequency = 5 if isinstance(case.window_fn, W.GlobalWindows) else None
    if sink == "avro":
        (
            plain
            | beam.Map(lambda t: {"pane": t})
            | beam.io.WriteToAvro(
                os.path.join(out, "part"), AVRO_SCHEMA, num_shards=num_shards, triggering_frequency=frequency
            )
        )
    elif sink == "parquet":
        import pyarrow

        schema = pyarrow.schema([("pane", pyarrow.string())])
        (
            plain
            | beam.Map(lambda t: {"pane": t})
            | beam.io.WriteToParquet(
                os.path.join(out, "part"), schema, num_shards=num_shards, triggering_frequency=frequency
            )
        )
    else:
        raise ValueError("unknown sink %r" % sink)


def run_on_spark(case, directory, streaming):
    """Runs the case; returns (records produced before the sink, records published)."""
    out = os.path.join(directory, "out")
    captured = os.path.join(directory, "produced.json")
    args = ["--allow_unsafe_triggers", "--parallelism=%d" % case.parallelism] + (["--streaming"] if streaming else [])
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(args))
    if streaming:
        elements = p | _test_stream(case)
    else:
        elements = (
            p
            | beam.Create([e for kind, arg in case.events if kind == "input" for e in arg])
            | beam.Map(lambda e: W.TimestampedValue((e[0], e[1]), e[2]))
        )
    records = (
        elements
        | beam.WindowInto(
            case.window_fn,
            trigger=case.trigger,
            accumulation_mode=case.mode,
            timestamp_combiner=case.combiner,
            allowed_lateness=case.lateness,
        )
        | beam.GroupByKey()
        | beam.ParDo(DescribePanes())
    )
    assert_that(records, _capture_to(captured), label="Collect")
    _write(records, case, out)
    p.run().wait_until_finish()
    with open(captured) as f:
        produced = sorted(as_published(_record_of(r), case.sink) for r in json.load(f))
    return produced, published(case.sink, out)


def _record_of(plain):
    return Retraction(plain[2:]) if plain.startswith("R:") else plain


def published(sink, out):
    """The records in the sink's published files (not in staging directories)."""
    if sink == "memory":
        return None
    files = []
    for root, dirs, names in os.walk(out):
        dirs[:] = [d for d in dirs if not d.startswith(("beam-temp", ".temp"))]
        files.extend(os.path.join(root, n) for n in names if not n.startswith("."))
    records = []
    for path in files:
        if sink == "avro":
            import fastavro

            with open(path, "rb") as f:
                records.extend(r["pane"] for r in fastavro.reader(f))
        elif sink == "parquet":
            import pyarrow.parquet

            records.extend(pyarrow.parquet.read_table(path).column("pane").to_pylist())
        else:
            with open(path) as f:
                records.extend(f.read().splitlines())
    return sorted(records)


def check(case, directory, streaming):
    """Runs the case on SparkRunner and raises AssertionError, naming the
    seed and the differences, unless the pure driver's records, the
    produced records and the published records are equal multisets."""
    expected = expected_records(case, streaming)
    produced, in_files = run_on_spark(case, directory, streaming)
    problems = []
    if produced != expected:
        problems.append("the runner's panes differ from the pure driver's:\n%s" % _diff(expected, produced))
    if in_files is not None and in_files != produced:
        problems.append("the sink published other records than it was given:\n%s" % _diff(produced, in_files))
    if problems:
        raise AssertionError(
            "%s case, %s\n%s" % ("streaming" if streaming else "batch", case.describe(), "\n".join(problems))
        )


def _diff(want, got):
    from collections import Counter

    missing = Counter(want) - Counter(got)
    extra = Counter(got) - Counter(want)
    return "  missing: %s\n  extra (or repeated): %s" % (sorted(missing.elements()), sorted(extra.elements()))
