"""NATS JetStream as a replayable source (`beam_spark_runner.io.ReadFromNats`),
through nats-py. No Spark, no Beam here.

A position is a stream sequence number. A read fetches from an ephemeral
consumer that starts at a given sequence (no acknowledgements), so a
replay reads from the same position whatever was read before. A durable
consumer, when the read names one, records how far the pipeline's
checkpoints have come: it is acknowledged (AckAll) up to a position only
once a checkpoint covers it, so a work-queue or interest stream keeps
every message the pipeline may still replay, and a new run of the
pipeline starts after its acknowledged floor. nats-py is asynchronous: a
reader runs its own event loop.
"""

import asyncio
import dataclasses
import datetime
import threading
from typing import Dict, Optional


class NatsError(RuntimeError):
    """A stream cannot be read as asked: the message names the servers, the
    stream and the problem."""


@dataclasses.dataclass(frozen=True)
class Message:
    subject: str
    sequence: int
    published: datetime.datetime  # the server's timestamp
    data: bytes
    headers: Dict[str, str]


class JetStreamReader:
    """A connection to a NATS server with JetStream (`servers`: one URL or a
    list)."""

    def __init__(self, servers):
        import nats

        self.servers = [servers] if isinstance(servers, str) else list(servers)
        # The reader's own event loop, on a thread of its own: the caller's
        # thread may run a loop already (a Jupyter kernel's), where another
        # loop cannot run.
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="nats-reader", daemon=True)
        self._thread.start()
        try:
            self._nc = self._run(
                nats.connect(self.servers, connect_timeout=5, max_reconnect_attempts=2, allow_reconnect=False)
            )
        except Exception as e:  # noqa: BLE001 -- nats-py raises several classes
            self._stop_loop()
            raise NatsError(
                "cannot connect to NATS at %s: %s" % (", ".join(self.servers), e or type(e).__name__)
            ) from None
        self._js = self._nc.jetstream()

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _stop_loop(self):
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def close(self):
        if self._loop.is_closed():
            return
        try:
            self._run(self._nc.close())
        finally:
            self._stop_loop()

    def stream_info(self, stream):
        import nats.js.errors

        try:
            return self._run(self._js.stream_info(stream))
        except nats.js.errors.NotFoundError:
            raise NatsError("NATS at %s has no JetStream stream %r" % (", ".join(self.servers), stream)) from None
        except Exception as e:  # noqa: BLE001 -- nats-py raises several classes (timeouts, a lost connection)
            raise self._failed("reading the state of JetStream stream %r" % stream, e) from e

    def _failed(self, what, error):
        return NatsError("%s at %s failed: %s" % (what, ", ".join(self.servers), str(error) or type(error).__name__))

    def last_time(self, stream) -> Optional[datetime.datetime]:
        """The publish time of the stream's newest message (None: empty):
        a message published later gets a later one."""
        last = self.stream_info(stream).state.last_seq
        if not last:
            return None
        try:
            found = self._run(self._js.get_msg(stream, seq=last))
        except Exception as e:  # noqa: BLE001 -- nats-py raises several classes
            raise self._failed("reading the last message of JetStream stream %r" % stream, e) from e
        return _parse_time(found.time) if found.time else None

    def end_sequence(self, stream) -> int:
        """The sequence after the stream's last message now."""
        return self.stream_info(stream).state.last_seq + 1

    def read(self, stream, subject: Optional[str], start: int, stop: int, count: int, wait_s: float):
        """(messages, exhausted): up to `count` messages (of `subject`, if
        given) with sequences in [start, stop), in order, and whether none
        is left in that range after them now. Waits up to `wait_s` when
        none is there."""
        if start >= stop:
            return [], True
        try:
            return self._run(self._read(stream, subject, start, stop, count, wait_s))
        except NatsError:
            raise
        except Exception as e:  # noqa: BLE001 -- nats-py raises several classes (timeouts, a lost connection)
            raise self._failed("reading JetStream stream %r from sequence %d" % (stream, start), e) from e

    @property
    def closed(self) -> bool:
        """True once the connection is lost (the server went away): a new
        reader is needed."""
        return self._nc.is_closed or not self._nc.is_connected

    async def _read(self, stream, subject, start, stop, count, wait_s):
        import nats.errors
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=start,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=60.0,
            filter_subject=subject,
        )
        pull = await self._js.pull_subscribe(subject or "", stream=stream, config=config)
        try:
            # The consumer knows how many messages wait from `start`: a
            # fetch of that many returns as soon as they are in.
            pending = (await pull.consumer_info()).num_pending
            try:
                if pending:
                    fetched = await pull.fetch(min(count, pending), timeout=max(30.0, wait_s))
                else:
                    fetched = await pull.fetch(1, timeout=max(wait_s, 0.05))
            except nats.errors.TimeoutError:
                fetched = []
            name = (await pull.consumer_info()).name
        finally:
            await pull.unsubscribe()
        try:
            await self._js.delete_consumer(stream, name)
        except Exception:  # noqa: BLE001 -- an inactive ephemeral consumer goes by itself
            pass
        messages = []
        passed_stop = False
        for msg in fetched:
            sequence = msg.metadata.sequence.stream
            if sequence >= stop:
                passed_stop = True
                break
            messages.append(Message(msg.subject, sequence, msg.metadata.timestamp, msg.data, dict(msg.headers or {})))
        exhausted = passed_stop or (len(fetched) >= pending and len(fetched) < count)
        return messages, exhausted

    def acknowledged_floor(self, stream, durable) -> Optional[int]:
        """The sequence after the durable consumer's acknowledged floor, or
        None when it does not exist."""
        import nats.js.errors

        try:
            info = self._run(self._js.consumer_info(stream, durable))
        except nats.js.errors.NotFoundError:
            return None
        return info.ack_floor.stream_seq + 1

    def start_durable(self, stream, durable, subject, start: int):
        """Creates the durable consumer (AckAll) at `start`, unless it exists."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        if self.acknowledged_floor(stream, durable) is not None:
            return
        config = ConsumerConfig(
            durable_name=durable,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=max(start, 1),
            ack_policy=AckPolicy.ALL,
            filter_subject=subject,
        )
        self._run(self._js.add_consumer(stream, config))

    def acknowledge(self, stream, durable, subject, position: int):
        """Acknowledges the durable consumer up to `position` - 1 (never
        back): fetches from it until that sequence and acks the last message
        below it (AckAll: the ones before go with it); later messages it
        delivered are handed back (nak) for the next acknowledgement."""
        floor = self.acknowledged_floor(stream, durable)
        if floor is None:
            self.start_durable(stream, durable, subject, position)
            return
        if position <= floor:
            return
        self._run(self._acknowledge(stream, durable, subject, position))

    async def _acknowledge(self, stream, durable, subject, position):
        import nats.errors

        pull = await self._js.pull_subscribe_bind(durable, stream)
        try:
            while True:
                try:
                    batch = await pull.fetch(1000, timeout=1.0)
                except nats.errors.TimeoutError:
                    return
                below = [m for m in batch if m.metadata.sequence.stream < position]
                if below:
                    await max(below, key=lambda m: m.metadata.sequence.stream).ack()
                beyond = [m for m in batch if m.metadata.sequence.stream >= position]
                for m in beyond:
                    await m.nak()  # delivered again at once, for the next acknowledgement
                if beyond or not batch:
                    return
        finally:
            await pull.unsubscribe()


def _parse_time(value):
    """A JetStream time (RFC 3339, nanoseconds) as a datetime."""
    if isinstance(value, datetime.datetime):
        return value
    text = str(value).replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits) :]
        text = "%s.%s%s" % (head, digits[:6], zone)
    return datetime.datetime.fromisoformat(text)
