"""A progress bar for batch runs, in terminals and notebooks (tqdm).

`--progress_bar=auto` (the default) draws it when the driver's stderr is a
terminal or the driver runs in a Jupyter kernel; `on` always, `off` never.
The bar counts Spark tasks, completed of those known so far: a batch run
is several Spark jobs and the total grows as each starts. Its label is
the stage running now (the Beam transforms in it). No Spark in here: the
bar polls a function returning `batch_progress.BatchRunProgress`.
"""

import functools
import sys
import threading

MODES = ("auto", "on", "off")
# Longest stage name shown in the bar's label.
_LABEL_CHARS = 40


def enabled(mode, stream=None):
    """Whether `--progress_bar=mode` draws a bar on `stream` (stderr)."""
    if mode not in MODES:
        raise ValueError("--progress_bar must be one of %s, not %r" % (", ".join(MODES), mode))
    if mode != "auto":
        return mode == "on"
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) or "ipykernel" in sys.modules


def _label(progress):
    stage = progress.running_stage
    if stage is None:
        return "Beam on Spark"
    stage = stage if len(stage) <= _LABEL_CHARS else stage[: _LABEL_CHARS - 3] + "..."
    return "Beam on Spark: %s" % stage


class ProgressBar:
    """Polls `poll()` every `interval_s` on a daemon thread and draws what it
    returns until `stop()`, which draws the final state and closes the bar.
    `file`: where a text bar goes (None: tqdm.auto picks, a widget in a
    notebook, stderr elsewhere)."""

    def __init__(self, poll, file=None, interval_s=0.5):
        self._poll = poll
        self._file = file
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = None
        self._bar = None

    def start(self):
        self._thread = threading.Thread(target=self._loop, name="beam-spark-progress-bar", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Draws the run's final progress and closes the bar."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._draw()
        if self._bar is not None:
            self._bar.close()

    def _loop(self):
        while not self._stop.wait(self._interval_s):
            self._draw()

    def _draw(self):
        try:
            progress = self._poll()
        except Exception:  # noqa: BLE001 -- a bar must never fail the run (e.g. Spark stopping)
            return
        if self._bar is None:
            if not progress.jobs:
                return
            self._bar = self._new_bar()
        self._bar.total = progress.tasks_total
        self._bar.n = progress.tasks_completed
        self._bar.set_description(_label(progress), refresh=False)
        self._bar.refresh()

    def _new_bar(self):
        if self._file is None:
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm

            tqdm = functools.partial(tqdm, file=self._file)
        return tqdm(total=0, unit="task", leave=True, dynamic_ncols=True)
