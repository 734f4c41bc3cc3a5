"""Process CPU accounting from /proc, shared by the benchmark scripts."""

import collections
import os
import threading
import time


def process_table():
    """pid -> (ppid, utime + stime in clock ticks) for every process."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as f:
                    stat = f.read()
                fields = stat[stat.rindex(")") + 2 :].split()
                table[int(name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
            except (OSError, ValueError, IndexError):
                continue
    return table


def _machine_busy_ticks():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields[:8]) - idle


def _own_tree_ticks():
    """{pid: utime+stime} of this process and all its living descendants
    (the JVM, PySpark daemons and workers)."""
    table = process_table()
    children = collections.defaultdict(list)
    for pid, (ppid, _) in table.items():
        children[ppid].append(pid)
    out, todo = {}, [os.getpid()]
    while todo:
        pid = todo.pop()
        if pid in table:
            out[pid] = table[pid][1]
        todo.extend(children.get(pid, ()))
    return out


class CpuMeter:
    """CPU seconds used by this benchmark's process tree and by every other
    process between start() and stop(). A thread samples the tree every
    `interval_s` (0.5 s) so that processes ending in between (Python
    workers) still count."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, interval_s=0.5):
        # Each sample reads every process's /proc/<pid>/stat, in this
        # process: a few ms. Measuring an idle run, sample seldom.
        self._interval_s = interval_s

    def start(self):
        self._t, self._busy = time.monotonic(), _machine_busy_ticks()
        self._first = _own_tree_ticks()
        self._last = dict(self._first)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_loop, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        for pid, ticks in _own_tree_ticks().items():
            if pid not in self._first and pid not in self._last:
                self._first[pid] = 0  # new since start(): all its CPU counts
            self._last[pid] = ticks

    def _sample_loop(self):
        while not self._stop.wait(self._interval_s):
            self._sample()

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._sample()
        wall = time.monotonic() - self._t
        busy = (_machine_busy_ticks() - self._busy) / float(self.TICK)
        own = sum(max(0, t - self._first.get(pid, 0)) for pid, t in self._last.items()) / float(self.TICK)
        return {"wall_s": wall, "own_cpu_s": own, "other_cpu_s": max(0.0, busy - own)}
