"""Spark Structured Streaming progress events, collected for benchmarks."""

import collections
import datetime
import json
import threading

from beam_spark_runner.execution import spark_internals


class Progress:
    """Every streaming query's progress records (Spark's JSON, as dicts),
    by query id, and each query's name. Collected through the runner's
    progress listener, which fetches each record as one JSON text: PySpark's
    own listener converts every event field by field, which costs the
    driver (and the JVM's listener thread) a good part of a sub-second
    micro-batch, on the native side as on Beam's."""

    def __init__(self):
        self.by_query = collections.defaultdict(list)
        self.names = {}
        self._lock = threading.Lock()

    def on_progress(self, event):
        data = json.loads(event.json())
        with self._lock:
            self.by_query[data["id"]].append(data)
            self.names.setdefault(data["id"], data.get("name"))

    def of(self, query_id):
        with self._lock:
            return list(self.by_query.get(str(query_id), ()))

    def ids_named(self, prefix):
        with self._lock:
            return [i for i, n in self.names.items() if n and n.startswith(prefix)]


def progress_listener(spark):
    """Collects every streaming query's progress events from now on."""
    listener = Progress()
    spark_internals.add_progress_listener(spark, listener.on_progress)
    return listener


def iso_ms(text):
    """Spark progress timestamps ('2026-01-01T00:00:00.000Z') -> epoch ms."""
    dt = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp() * 1000.0
