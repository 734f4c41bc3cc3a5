"""Spark's Python worker daemon, with Beam imported before workers fork.

Spark forks every Python worker from this daemon; importing Beam's SDK
harness here (2-4 s cold, measured) makes each forked worker start with it
already loaded. Used through `spark.python.daemon.module` on sessions the
runner creates; everything else is PySpark's own daemon.
"""

import apache_beam  # noqa: F401
import beam_spark_runner.worker.harness_stage  # noqa: F401 -- with it, Beam's SDK harness (worker/beam_internals.py)
from beam_spark_runner.execution import main_session
from beam_spark_runner.execution.spark_internals import run_python_daemon

if __name__ == "__main__":
    # Forked workers inherit it: the driver script's classes resolve as
    # __main__.<name> (execution/main_session.py).
    main_session.install()
    run_python_daemon()
