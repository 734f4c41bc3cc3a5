"""Spark Structured Streaming progress events, collected for benchmarks."""

import collections
import datetime
import json
import threading


def progress_listener(spark):
    """Collects every streaming query's progress events, by query id."""
    from pyspark.sql.streaming import StreamingQueryListener

    class Progress(StreamingQueryListener):
        def __init__(self):
            self.by_query = collections.defaultdict(list)
            self.names = {}
            self._lock = threading.Lock()

        def onQueryStarted(self, event):
            with self._lock:
                self.names[str(event.id)] = event.name

        def onQueryProgress(self, event):
            data = json.loads(event.progress.json)
            with self._lock:
                self.by_query[data["id"]].append(data)

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

        def of(self, query_id):
            with self._lock:
                return list(self.by_query.get(str(query_id), ()))

        def ids_named(self, prefix):
            with self._lock:
                return [i for i, n in self.names.items() if n and n.startswith(prefix)]

    listener = Progress()
    spark.streams.addListener(listener)
    return listener


def iso_ms(text):
    """Spark progress timestamps ('2026-01-01T00:00:00.000Z') -> epoch ms."""
    dt = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp() * 1000.0
