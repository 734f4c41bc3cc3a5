"""Process CPU accounting from /proc, shared by the benchmark scripts."""
import os


def process_table():
    """pid -> (ppid, utime + stime in clock ticks) for every process."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as f:
                    stat = f.read()
                fields = stat[stat.rindex(")") + 2:].split()
                table[int(name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
            except (OSError, ValueError, IndexError):
                continue
    return table
