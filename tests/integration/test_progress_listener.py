"""The runner's streaming progress listener (execution/spark_internals.
add_progress_listener): each progress event of a query reaches the callback
with its query id and batch id, and Spark's whole record on request; none
after it was removed."""

import json
import threading
import time

from beam_spark_runner.execution import spark_internals


def _wait_for(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_each_committed_batch_reaches_the_listener_with_its_query_and_batch(spark_session):
    events = []
    lock = threading.Lock()

    def on_progress(event):
        record = json.loads(event.json())
        with lock:
            events.append((event.query_id, event.batch_id, record["id"], record["batchId"]))

    handle = spark_internals.add_progress_listener(spark_session, on_progress)
    query = (
        spark_session.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .writeStream.format("noop")
        .queryName("progress-listener-test")
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        _wait_for(lambda: len([e for e in list(events) if e[0] == str(query.id)]) >= 3)
    finally:
        query.stop()
        spark_internals.remove_progress_listener(spark_session, handle)
    mine = [e for e in events if e[0] == str(query.id)]
    batches = [batch for _, batch, _, _ in mine]
    assert batches[:3] == [0, 1, 2]
    assert all(record_id == query_id and record_batch == batch for query_id, batch, record_id, record_batch in mine)

    # Removed: another query's events no longer arrive.
    with lock:
        events.clear()
    again = spark_session.readStream.format("rate").load().writeStream.format("noop").start()
    try:
        _wait_for(lambda: again.lastProgress is not None and again.lastProgress["batchId"] >= 2)
    finally:
        again.stop()
    assert events == []


def test_the_beam_tabs_cells_reach_the_jvm_as_one_string_array_whatever_they_hold(spark_session):
    """The Beam tab's table crosses to the JVM in one call: a cell holding
    the separator shows U+FFFD, empty cells stay, no cells give an empty
    array."""
    from beam_spark_runner.execution.ui_watermarks import WatermarkTab

    tab = WatermarkTab(spark_session.sparkContext, {})
    tab._splitter = spark_session.sparkContext._jvm.java.util.regex.Pattern.compile(WatermarkTab._SEPARATOR)
    assert list(tab._strings(["a", "b\x1fc", "", "d", ""])) == ["a", "b\ufffdc", "", "d", ""]
    assert list(tab._strings([])) == []
