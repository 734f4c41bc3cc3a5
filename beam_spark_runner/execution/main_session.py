"""The classes of the driver's main script, resolvable in Spark's Python
workers as `__main__.<name>`.

cloudpickle pickles what a DoFn references from the driver's `__main__` by
value, so the DoFn itself runs. A value of such a class that is encoded
with pickle, though (FastPrimitivesCoder's fallback for a
`typing.NamedTuple` defined in the script, for example), is pickled by
reference: `__main__.Point`. The worker's `__main__` is Spark's daemon,
which has no `Point`, so the encoding fails. DirectRunner runs in the
driver and never sees this. Beam's `--save_main_session` does not help
with cloudpickle, Beam's default pickler: its session holds only Beam's
registries.

The driver's half, `ship_main_session`, pickles (cloudpickle, by value)
the classes defined in the driver's `__main__`. The file is
named by its content and handed to `SparkContext.addFile`. The worker's
half, `install`, gives the worker's `__main__` a module `__getattr__`
(PEP 562). A name missing there is looked up in the session files Spark
delivered to the worker, newest last, so a re-defined class (a notebook)
wins. Both halves use Beam's own pickler, as the DoFns do: its
cloudpickle keeps one class object per class it unpickles in a process, so
the class a DoFn built and the one looked up are the same object, which
pickle requires.

Guarantees: the worker's own `__main__` attributes are never replaced; a
driver whose `__main__` defines no class ships nothing; a class that
cannot be pickled is left out with a warning naming it.
"""

import glob
import hashlib
import logging
import os
import sys
import tempfile
import threading

_LOG = logging.getLogger(__name__)
PREFIX = "beam-main-session-"
_lock = threading.Lock()
_shipped = {}
_loaded = set()
_session_values = {}


# -- driver -------------------------------------------------------------------------


def main_definitions(main=None):
    """{name: class} of the classes defined in `main` (default: this
    process's `__main__`). Functions are left out: pickle finds a function
    by reference only when a value holds one, and pickling them by value
    would carry the globals they use."""
    main = main if main is not None else sys.modules.get("__main__")
    found = {}
    for name, value in sorted(vars(main).items()):
        if isinstance(value, type) and getattr(value, "__module__", None) == "__main__" and not name.startswith("__"):
            found[name] = value
    return found


def ship_main_session(spark_context):
    """Ships the driver's `__main__` classes; returns the
    file's path, or None when there are none."""
    from beam_spark_runner.worker.beam_internals import pickler

    picklable = {}
    for name, value in main_definitions().items():
        try:
            pickler.dumps(value)
        except Exception as e:  # noqa: BLE001 -- leave it out, say which
            _LOG.warning("%s of the main script cannot be pickled for Spark's workers (%s); left out", name, e)
            continue
        picklable[name] = value
    if not picklable:
        return None
    data = pickler.dumps(picklable)
    name = "%s%s.pkl" % (PREFIX, hashlib.sha256(data).hexdigest()[:20])
    with _lock:
        if name in _shipped:
            return _shipped[name]
        path = os.path.join(tempfile.mkdtemp(prefix="beam-spark-main-session-"), name)
        with open(path, "wb") as f:
            f.write(data)
        spark_context.addFile(path)
        _shipped[name] = path
    return path


# -- worker -------------------------------------------------------------------------


def _files_dir():
    from pyspark.files import SparkFiles

    try:
        return SparkFiles.getRootDirectory()
    except Exception:  # noqa: BLE001 -- not in a task: nothing delivered
        return None


def _load_new_sessions():
    from beam_spark_runner.worker.beam_internals import pickler

    directory = _files_dir()
    if not directory:
        return
    paths = sorted(glob.glob(os.path.join(directory, PREFIX + "*.pkl")), key=os.path.getmtime)
    for path in paths:
        if path in _loaded:
            continue
        with open(path, "rb") as f:
            _session_values.update(pickler.loads(f.read()))
        _loaded.add(path)


def _main_getattr(name):
    if name.startswith("__"):
        raise AttributeError(name)
    with _lock:
        if name not in _session_values:
            _load_new_sessions()
        if name in _session_values:
            return _session_values[name]
    raise AttributeError("module '__main__' has no attribute %r" % name)


def install():
    """In a Spark Python worker: names the driver's main script defines
    resolve in this process's `__main__`. Idempotent; never in a driver."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if main is None or spec is None or spec.name not in _WORKER_MAINS:
        return
    if getattr(main, "__getattr__", None) is not _main_getattr:
        main.__getattr__ = _main_getattr


# The modules Spark's Python workers run as `__main__`.
_WORKER_MAINS = frozenset(("pyspark.daemon", "pyspark.worker", "beam_spark_runner.execution.spark_daemon"))
