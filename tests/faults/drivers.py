"""Driver processes the fault tests start and SIGKILL: each in its own
process group (a kill takes its Spark JVM too), its stderr in a file in
its working directory. A pipe that nobody reads while the driver runs
would fill (Spark's warnings on a slow machine are enough) and stop the
driver in the middle of a batch; a file never does, and survives the kill
for the failure message."""

import os
import signal
import subprocess
import sys

LOG = "driver.log"


def start(argv, cwd, env=None):
    """Starts `python argv...` in `cwd` (made here) with this process's
    import path."""
    os.makedirs(cwd)
    path = os.path.join(cwd, LOG)
    with open(path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, *argv],
            cwd=cwd,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **(env or {})),
        )
    proc.log_path = path
    return proc


def log_tail(proc, chars=3000):
    """The end of what the driver `proc` wrote to stderr so far, after the
    log's first lines that name an error (a Spark query's exception puts
    its cause first and pages of offsets and plan after it, which the tail
    alone would cut off)."""
    with open(proc.log_path, "rb") as f:
        text = f.read().decode(errors="replace")
    if len(text) <= chars:
        return text
    errors = [line for line in text.splitlines() if _names_an_error(line)][:_ERROR_LINES]
    return "%s\n[...]\n%s" % ("\n".join(line[:500] for line in errors), text[-chars:])


_ERROR_LINES = 12


def _names_an_error(line):
    return ("Error" in line or "Exception" in line or "Traceback" in line) and " WARN " not in line


def kill(proc):
    """SIGKILLs the driver's process group and reaps the driver."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
