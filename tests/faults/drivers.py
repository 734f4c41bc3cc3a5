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
    """The end of what the driver `proc` wrote to stderr so far."""
    with open(proc.log_path, "rb") as f:
        return f.read().decode(errors="replace")[-chars:]


def kill(proc):
    """SIGKILLs the driver's process group and reaps the driver."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
