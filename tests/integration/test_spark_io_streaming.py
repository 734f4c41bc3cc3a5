"""ReadFromSpark and WriteToSpark in streaming pipelines: Spark's
readStream as a Beam source whose watermark follows its data, and Spark's
writers publishing each micro-batch's rows once it is a completed
checkpoint."""

import collections
import datetime
import json
import os
import time
import typing

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window

from beam_spark_runner import SparkRunner
from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.io import ReadFromSpark, WriteToSpark
from beam_spark_runner.result import PipelineState
from tests.window_totals import Total, WindowTotal

SCHEMA = "user string, score long, ts timestamp"
EPOCH = datetime.datetime(2026, 1, 1)
TIMEOUT_S = 180


def _options(checkpoint_dir=None):
    args = ["--streaming"]
    if checkpoint_dir is not None:
        args.append("--checkpoint_dir=%s" % checkpoint_dir)
    return PipelineOptions(args)


def _write_json(directory, name, records):
    """One file of JSON lines, appearing at once (renamed into place)."""
    tmp = os.path.join(os.path.dirname(directory), "." + name)
    with open(tmp, "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    os.rename(tmp, os.path.join(directory, name))


def _event(user, score, second):
    return {"user": user, "score": score, "ts": (EPOCH + datetime.timedelta(seconds=second)).isoformat()}


def _windowed_totals(p, source, out, window_s=10, **read_args):
    _ = (
        p
        | "Read" >> ReadFromSpark(format="json", path=str(source), schema=SCHEMA, timestamp_column="ts", **read_args)
        | "Window" >> beam.WindowInto(window.FixedWindows(window_s))
        | "Pairs" >> beam.Map(lambda r: (r.user, r.score))
        | "Sum" >> beam.CombinePerKey(sum)
        | "Totals" >> beam.ParDo(WindowTotal()).with_output_types(Total)
        | "Write" >> WriteToSpark(format="parquet", path=str(out))
    )


def _expected(events, window_s=10):
    totals = collections.Counter()
    for e in events:
        second = (datetime.datetime.fromisoformat(e["ts"]) - datetime.datetime(1970, 1, 1)).total_seconds()
        totals[(e["user"], int(second // window_s * window_s))] += e["score"]
    return sorted((user, start, total) for (user, start), total in totals.items())


def _published(spark, out):
    if not os.path.exists(out) or not any(n.startswith("part-") for n in os.listdir(out)):
        return []
    return sorted(tuple(r) for r in spark.read.parquet(str(out)).select("user", "window_start", "total").collect())


def _wait(condition, what, timeout_s=TIMEOUT_S):
    deadline = time.time() + timeout_s
    while not condition():
        if time.time() > deadline:
            pytest.fail("timed out waiting for %s" % what)
        time.sleep(0.5)


def _drain(result):
    result.drain()
    state = result.wait_until_finish(TIMEOUT_S * 1000)
    if state is None:
        result.cancel()
        pytest.fail("the drained run had not ended after %d s" % TIMEOUT_S)
    assert state == PipelineState.DRAINED


def _rounds():
    """Three files of events: users a-c, event times spread over 0-45 s."""
    return [[_event("abc"[(i + r) % 3], i + 1, r * 15 + i) for i in range(15)] for r in range(3)]


def test_a_growing_json_directory_is_windowed_counted_and_written_as_parquet(tmp_path, spark_session):
    """Files appended while the pipeline runs are read as they come; after a
    drain the published Parquet holds exactly the batch answer."""
    source, out = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    rounds = _rounds()
    _write_json(str(source), "events-0.json", rounds[0])
    p = beam.Pipeline(runner=SparkRunner(), options=_options())
    _windowed_totals(p, source, out)
    result = p.run()
    try:
        # The first file's windows that its own newest event closes are published.
        _wait(lambda: _published(spark_session, out), "the first windows to be published")
        for i, records in enumerate(rounds[1:], start=1):
            _write_json(str(source), "events-%d.json" % i, records)
            time.sleep(1.0)
        _wait(
            lambda: any(r[1] >= 1767225630 for r in _published(spark_session, out)),
            "the last file to be read",
        )
        _drain(result)
    finally:
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE):
            result.cancel()
    everything = [e for r in rounds for e in r]
    assert _published(spark_session, out) == _expected(everything)
    assert not os.listdir(out / "_beam_staging" / os.listdir(out / "_beam_staging")[0])


def test_the_watermark_trails_the_newest_event_by_the_allowed_out_of_orderness(tmp_path, spark_session):
    """With max_out_of_orderness=20 s a window fires only once an event 20 s
    past its end was read; an event behind that watermark is late (dropped:
    no allowed lateness) and counted as such."""
    source, out = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    _write_json(str(source), "a.json", [_event("a", 1, 1), _event("a", 2, 25)])
    p = beam.Pipeline(runner=SparkRunner(), options=_options())
    _windowed_totals(p, source, out, max_out_of_orderness=20)
    result = p.run()
    try:
        # Newest 25 s: watermark 5 s, window [0, 10) still open.
        time.sleep(6)
        assert _published(spark_session, out) == []
        _write_json(str(source), "b.json", [_event("a", 4, 3), _event("a", 8, 31)])
        # Newest 31 s: watermark 11 s, window [0, 10) fires with the out-of-order event in it.
        _wait(lambda: _published(spark_session, out), "window [0, 10) to fire")
        assert _published(spark_session, out) == [("a", 1767225600, 5)]
        _write_json(str(source), "c.json", [_event("a", 100, 2)])  # behind the watermark: late
        # Drained only once the late event was read (and dropped), however
        # long the machine takes to get to c.json.
        _wait(lambda: _dropped(result) >= 1, "the late event to be read and dropped")
        _drain(result)
    finally:
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE):
            result.cancel()
    # The late event (100 at 2 s) is in no published window.
    assert _published(spark_session, out) == [("a", 1767225600, 5), ("a", 1767225620, 2), ("a", 1767225630, 8)]
    assert _dropped(result) == 1


def _dropped(result):
    dropped = result.metrics().query(beam.metrics.MetricsFilter().with_name("dropped_due_to_lateness"))
    return sum(c.committed or 0 for c in dropped["counters"])


def test_a_silent_partition_stops_holding_the_watermark_after_the_idle_timeout(tmp_path, spark_session):
    """Partitioned by `user`: user b sends once, early; without an idle
    timeout b would hold the watermark at its only event forever, with
    idle_timeout=2 s user a's events alone move it and a's windows fire."""
    source, out = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    _write_json(str(source), "a.json", [_event("b", 7, 1), _event("a", 1, 2)])
    p = beam.Pipeline(runner=SparkRunner(), options=_options())
    _windowed_totals(p, source, out, partition_columns=["user"], idle_timeout=2)
    result = p.run()
    try:
        time.sleep(4)
        _write_json(str(source), "b.json", [_event("a", 2, 15)])
        time.sleep(4)
        _write_json(str(source), "c.json", [_event("a", 3, 40)])
        # a's newest is 40 s and b is idle: windows [0, 10) and [10, 20) fire.
        _wait(lambda: len(_published(spark_session, out)) == 3, "the windows before 40 s to fire")
        assert _published(spark_session, out) == [
            ("a", 1767225600, 1),
            ("a", 1767225610, 2),
            ("b", 1767225600, 7),
        ]
    finally:
        result.cancel()


class Tick(typing.NamedTuple):
    second: int
    ticks: int


def test_the_rate_source_drives_a_windowed_count(tmp_path, spark_session):
    """Spark's `rate` source: 20 rows a second, counted per 1 s window of
    their own timestamps; every window published is complete."""
    out = tmp_path / "out"
    p = beam.Pipeline(runner=SparkRunner(), options=_options())
    _ = (
        p
        | ReadFromSpark(format="rate", options={"rowsPerSecond": 20}, timestamp_column="timestamp")
        | beam.WindowInto(window.FixedWindows(1))
        | beam.Map(lambda r: ("ticks", 1))
        | beam.CombinePerKey(sum)
        | beam.ParDo(WindowTotal())
        | beam.Map(lambda t: Tick(t.window_start, t.total)).with_output_types(Tick)
        | WriteToSpark(format="parquet", path=str(out))
    )
    result = p.run()
    try:

        def windows():
            if not os.path.exists(out) or not any(n.startswith("part-") for n in os.listdir(out)):
                return []
            return spark_session.read.parquet(str(out)).collect()

        _wait(lambda: len(windows()) >= 4, "four windows of rate rows")
    finally:
        result.cancel()
    published = sorted((r.second, r.ticks) for r in windows())
    seconds = [s for s, _ in published]
    assert len(seconds) == len(set(seconds)), published
    # The first window may start mid-second; every later one is full.
    assert all(ticks == 20 for _, ticks in published[1:]), published


def test_bad_streaming_input_is_refused_at_submission_naming_the_transform(tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    _write_json(str(source), "a.json", [_event("a", 1, 1)])

    def read(p, **kwargs):
        return p | ReadFromSpark(format="json", path=str(source), schema=SCHEMA, **kwargs)

    cases = [
        (lambda p: read(p, partition_columns=["nope"]), "partition_columns names columns"),
        (
            lambda p: (
                read(p)
                | beam.Map(lambda r: Total(r.user, 0, r.score)).with_output_types(Total)
                | WriteToSpark(table="t_streamed")
            ),
            "cannot write a catalog table",
        ),
        (
            lambda p: (
                read(p)
                | beam.Map(lambda r: Total(r.user, 0, r.score)).with_output_types(Total)
                | WriteToSpark(path=str(tmp_path / "o"), mode="overwrite")
            ),
            "mode 'overwrite' is for batch",
        ),
        (
            lambda p: (
                read(p)
                | beam.Map(lambda r: Total(r.user, 0, r.score)).with_output_types(Total)
                | WriteToSpark(format="jdbc", path=str(tmp_path / "o"))
            ),
            "has no exactly-once commit",
        ),
        (lambda p: p | ReadFromSpark(format="nosuchformat", path=str(source)), "nosuchformat"),
    ]
    for build, message in cases:
        p = beam.Pipeline(runner=SparkRunner(), options=_options())
        with pytest.raises(UnsupportedPipelineError, match=message) as raised:
            build(p)
            p.run()
        assert "ReadFromSpark" in str(raised.value) or "WriteToSpark" in str(raised.value)


def test_streaming_only_arguments_are_refused_in_batch(tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    _write_json(str(source), "a.json", [_event("a", 1, 1)])
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([]))
    with pytest.raises(UnsupportedPipelineError, match="max_out_of_orderness.*batch"):
        _ = p | ReadFromSpark(format="json", path=str(source), max_out_of_orderness=5)


def test_a_source_copied_as_read_and_counted_beside_it_feeds_both(tmp_path, spark_session):
    """The source's rows go to two readers (a WriteToSpark copying them as
    read, and a windowed sum): they are encoded and addressed to both, and
    each gets every row."""
    source, out, copy = tmp_path / "in", tmp_path / "out", tmp_path / "copy"
    source.mkdir()
    events = _rounds()[0]
    _write_json(str(source), "a.json", events)
    p = beam.Pipeline(runner=SparkRunner(), options=_options())
    rows = p | "Read" >> ReadFromSpark(format="json", path=str(source), schema=SCHEMA, timestamp_column="ts")
    _ = rows | "Copy" >> WriteToSpark(format="parquet", path=str(copy))
    _ = (
        rows
        | beam.WindowInto(window.FixedWindows(10))
        | beam.Map(lambda r: (r.user, r.score))
        | beam.CombinePerKey(sum)
        | beam.ParDo(WindowTotal()).with_output_types(Total)
        | "Write" >> WriteToSpark(format="parquet", path=str(out))
    )
    result = p.run()
    try:
        _wait(lambda: _published(spark_session, out), "the first windows to be published")
        _drain(result)
    finally:
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE):
            result.cancel()
    assert _published(spark_session, out) == _expected(events)
    copied = spark_session.read.parquet(str(copy)).collect()
    assert sorted((r.user, r.score) for r in copied) == sorted((e["user"], e["score"]) for e in events)


def test_two_sinks_writing_one_directory_publish_every_row_of_both(tmp_path, spark_session):
    """Files are named by run, sink, batch and index: a second sink's files
    never replace the first's."""
    source, out = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    events = _rounds()[0]
    _write_json(str(source), "a.json", events)
    p = beam.Pipeline(runner=SparkRunner(), options=_options())
    rows = p | "Read" >> ReadFromSpark(format="json", path=str(source), schema=SCHEMA)
    _ = rows | "CopyA" >> WriteToSpark(format="parquet", path=str(out))
    _ = rows | "CopyB" >> WriteToSpark(format="parquet", path=str(out))
    result = p.run()
    try:
        _wait(lambda: len(_published_rows(spark_session, out)) >= 2 * len(events), "both copies to be published")
        time.sleep(2)
    finally:
        result.cancel()
    copied = _published_rows(spark_session, out)
    assert sorted((r.user, r.score) for r in copied) == sorted(
        (e["user"], e["score"]) for e in events for _ in range(2)
    )


def _published_rows(spark, out):
    if not os.path.exists(out) or not any(n.startswith("part-") for n in os.listdir(out)):
        return []
    return spark.read.parquet(str(out)).collect()
