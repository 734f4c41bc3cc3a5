"""The memory and CPU sampler of benchmarks/batch_wordcount.py: a process
forked before the JVM (MemoryMonitor) polls /proc and keeps, per variant,
the peak RSS of the driver, of the Spark JVM and of the PySpark Python
workers, and the CPU time of this process tree and of every other process
(the benchmark's docstring says how exact each number is)."""

import collections
import multiprocessing
import os

from procstat import process_table


# -- memory sampling (separate process) --------------------------------------


def _read_status(pid):
    fields = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "PPid"):
                    fields[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return fields


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _descendants(root, exclude, table=None):
    children = collections.defaultdict(list)
    for pid, (ppid, _) in (table if table is not None else process_table()).items():
        children[ppid].append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, ()):
            if child not in exclude:
                out.append(child)
                todo.append(child)
    return out


def _sampler_main(driver_pid, conn, interval):
    """Answers 'reset' and 'peaks' on conn; samples RSS (kB) in between."""
    me = os.getpid()
    peaks = collections.Counter()
    ticks = os.sysconf("SC_CLK_TCK")
    last_cpu = {}  # pid -> cpu ticks at the previous sample, for processes not ours
    primed = []

    def sample():
        table = process_table()
        ours = set(_descendants(driver_pid, {me}, table))
        # CPU used by processes outside the benchmark: a noisy neighbour.
        foreign = own = 0
        for pid, (_, cpu) in table.items():
            if pid == me:
                continue
            if primed:  # a process new since the last sample counts in full
                delta = max(0, cpu - last_cpu.get(pid, 0))
                if pid in ours or pid == driver_pid:
                    own += delta
                else:
                    foreign += delta
            last_cpu[pid] = cpu
        primed.append(True) if not primed else None
        peaks["foreign_cpu_s"] += foreign / float(ticks)
        peaks["own_cpu_s"] += own / float(ticks)
        jvm = workers = 0
        for pid in ours:
            status = _read_status(pid)
            if not status or "VmRSS" not in status:
                continue
            cmd = _cmdline(pid)
            exe = os.path.basename(cmd[0]).decode(errors="replace") if cmd and cmd[0] else ""
            if exe == "java":
                jvm += status["VmRSS"]
            elif exe.startswith("python") or any(b"pyspark" in c for c in cmd):
                workers += status["VmRSS"]
        driver = (_read_status(driver_pid) or {}).get("VmRSS", 0)
        for key, value in (("driver", driver), ("jvm", jvm), ("workers", workers), ("total", driver + jvm + workers)):
            peaks[key] = max(peaks[key], value)

    while True:
        if conn.poll(interval):
            cmd = conn.recv()
            if cmd == "stop":
                return
            sample()
            if cmd == "reset":
                peaks.clear()
                peaks["foreign_cpu_s"] = peaks["own_cpu_s"] = 0.0
                conn.send(None)
            elif cmd == "peaks":
                conn.send(dict(peaks))
        else:
            sample()


class MemoryMonitor:
    def __init__(self, interval=0.1):
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_sampler_main, args=(os.getpid(), child, interval), daemon=True)
        self._proc.start()
        self.hwm_reset_ok = None

    def _jvm_pids(self):
        return [
            pid
            for pid in _descendants(os.getpid(), {self._proc.pid})
            if _cmdline(pid)[:1] and os.path.basename(_cmdline(pid)[0]) == b"java"
        ]

    def reset(self):
        """Starts a new measurement; resets the kernel's peak RSS where allowed."""
        ok = True
        for pid in [os.getpid()] + self._jvm_pids():
            try:
                with open("/proc/%d/clear_refs" % pid, "w") as f:
                    f.write("5")
            except OSError:
                ok = False
        self.hwm_reset_ok = ok if self.hwm_reset_ok is None else (self.hwm_reset_ok and ok)
        self._conn.send("reset")
        self._conn.recv()

    def peaks(self):
        """Peaks (MiB) since reset: sampled, raised to VmHWM where exact."""
        self._conn.send("peaks")
        kb = self._conn.recv()
        if self.hwm_reset_ok:
            kb["driver"] = max(kb.get("driver", 0), (_read_status(os.getpid()) or {}).get("VmHWM", 0))
            jvm_hwm = sum((_read_status(p) or {}).get("VmHWM", 0) for p in self._jvm_pids())
            kb["jvm"] = max(kb.get("jvm", 0), jvm_hwm)
        cpu = {k: kb.pop(k, 0.0) for k in ("foreign_cpu_s", "own_cpu_s")}
        out = {k: v / 1024.0 for k, v in kb.items()}
        out.update(cpu)
        return out

    def stop(self):
        try:
            self._conn.send("stop")
        except OSError:
            pass
        self._proc.join(5)
