"""Beam transforms that reach the user's data through this runner:
Spark's own data sources and writers (`ReadFromSpark`, `WriteToSpark`),
PostgreSQL and MariaDB / MySQL tables (`ReadFromDatabase`,
`WriteToDatabase`), NATS JetStream and Redis Streams (`ReadFromNats`,
`ReadFromRedisStreams`); docs/io.md."""

from beam_spark_runner.io.database import ReadFromDatabase, WriteToDatabase
from beam_spark_runner.io.nats import NatsMessage, ReadFromNats
from beam_spark_runner.io.redis_streams import ReadFromRedisStreams, RedisStreamEntry
from beam_spark_runner.io.spark import ReadFromSpark, WriteToSpark

__all__ = [
    "NatsMessage",
    "ReadFromDatabase",
    "ReadFromNats",
    "ReadFromRedisStreams",
    "ReadFromSpark",
    "RedisStreamEntry",
    "WriteToDatabase",
    "WriteToSpark",
]
