"""A micro-batch cut short by its query's stop, told to Spark in words it
recognises.

When a streaming query stops (a cancel, a restart after a failed batch),
Spark interrupts its stream thread: a Spark job the runner's foreachBatch
callback waits on (the batch's collect, a sink's staging write) fails in
Python with a Py4JJavaError whose Java cause is an InterruptedException.
The callback's error goes back to Spark as the text of its Python
traceback, and Spark tells a stop from a failure by a regular expression
over that text (`StreamExecution.isInterruptionException`): "Py4JJavaError:
An error occurred while calling" followed, anywhere after, by the name of
an interruption exception. Java's regex engine recurses once per character
the expression's `(.|\\n)*` spans, so over a whole traceback with its Java
stack (tens of thousands of characters) the stream thread dies of a
StackOverflowError instead of stopping.

`interruption_of` finds the interruption behind such an error;
`stops_reported` around the callback's work raises `MicroBatchInterrupted`
instead, which says it in one short line that ends the traceback,
so the match spans a few dozen characters: Spark sees a stop, the batch is
not committed and replays when the pipeline runs again.
"""

import contextlib
import logging

from py4j.protocol import Py4JError, Py4JJavaError

# The Java exceptions that mean "this thread was interrupted", as Spark
# counts them when it tells a stop from a failure.
INTERRUPTIONS = frozenset(
    {
        "java.lang.InterruptedException",
        "java.io.InterruptedIOException",
        "java.nio.channels.ClosedByInterruptException",
    }
)

# A cause chain longer than this is not followed further.
_MAX_CAUSES = 16


class MicroBatchInterrupted(Exception):
    """Micro-batch `batch_id` stopped because its query stopped; nothing of
    it was committed. The message quotes the Py4J call that was interrupted
    and the interruption's Java class, on one line."""

    def __init__(self, batch_id: int, call: str, interruption: str):
        self.batch_id = batch_id
        self.interruption = interruption
        super().__init__(
            "micro-batch %d was stopped with its query; it runs again when the pipeline resumes "
            "(py4j.protocol.Py4JJavaError: %s: %s)" % (batch_id, call, interruption)
        )


def interruption_of(error: BaseException):
    """The Java class name of the interruption behind `error` (a
    Py4JJavaError whose Java exception, or one of its causes, is an
    interruption), or None."""
    if not isinstance(error, Py4JJavaError):
        return None
    try:
        throwable = error.java_exception
        for _ in range(_MAX_CAUSES):
            if throwable is None:
                return None
            name = throwable.getClass().getName()
            if name in INTERRUPTIONS:
                return name
            throwable = throwable.getCause()
    except Py4JError:
        # The JVM is going away: what the error was cannot be asked.
        return None
    return None


def interrupted(batch_id: int, error: BaseException):
    """`MicroBatchInterrupted` for an error that is an interruption, else
    None (the error is a failure and goes to Spark as it is)."""
    name = interruption_of(error)
    if name is None:
        return None
    return MicroBatchInterrupted(batch_id, error.errmsg.strip().rstrip("."), name)


@contextlib.contextmanager
def stops_reported(batch_id: int):
    """Around a foreachBatch callback's work on micro-batch `batch_id`: an
    interruption leaves as `MicroBatchInterrupted` (its cause not chained,
    so the traceback Spark reads ends with the one line); any other error
    as it is."""
    try:
        yield
    except Exception as e:
        stopped = interrupted(batch_id, e)
        if stopped is None:
            raise
        raise stopped from None


class _DropInterruptions(logging.Filter):
    """Py4J logs every error a Python callback returns to the JVM, with its
    traceback, at ERROR; a batch stopped with its query is no error."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, MicroBatchInterrupted)


_FILTER = _DropInterruptions()


def quiet_py4j_callback_log():
    """Keeps Py4J's callback server from logging stopped batches as errors
    (idempotent)."""
    # clientserver with PySpark's pinned threads (its default), java_gateway without.
    for name in ("py4j.clientserver", "py4j.java_gateway"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
