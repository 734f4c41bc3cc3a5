"""Beam transforms that reach the user's data through this runner:
Spark's own data sources and writers (`ReadFromSpark`, `WriteToSpark`),
PostgreSQL and MariaDB / MySQL tables (`ReadFromDatabase`,
`WriteToDatabase`), NATS JetStream and Redis Streams (`ReadFromNats`,
`ReadFromRedisStreams`), Kafka topics written exactly once
(`WriteToKafka`); docs/io.md.

Each connector is one package here (`spark/`, `database/`, `nats/`,
`redis_streams/`, `kafka/`): its user transforms (`transforms.py`), its planning
(`planning.py`, registered in translation/runner_io.py), its Spark glue
(registered in execution/runner_io_glue.py) and its client. The names
below are imported when first used, so that the runner's planning and
Spark glue can import a connector's own modules without importing every
connector's transforms.
"""

import importlib

_EXPORTS = {
    "NatsMessage": "nats",
    "ReadFromDatabase": "database",
    "ReadFromNats": "nats",
    "ReadFromRedisStreams": "redis_streams",
    "ReadFromSpark": "spark",
    "RedisStreamEntry": "redis_streams",
    "WriteToDatabase": "database",
    "WriteToKafka": "kafka",
    "WriteToSpark": "spark",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    value = getattr(importlib.import_module("%s.%s.transforms" % (__name__, _EXPORTS[name])), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
