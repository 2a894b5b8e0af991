"""CPU accounting from Linux /proc, shared by the benchmarks."""

import os


def process_cpu(pid: int, tid: int | None = None) -> float | None:
    """User + system CPU seconds of a process (or one of its threads); None if gone."""
    path = f'/proc/{pid}/stat' if tid is None else f'/proc/{pid}/task/{tid}/stat'
    try:
        with open(path) as stream:
            fields = stream.read().rsplit(')', 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def machine_busy() -> float | None:
    """Busy CPU seconds of the whole machine so far (all cores, /proc/stat)."""
    try:
        with open('/proc/stat') as stream:
            fields = [int(x) for x in stream.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (fields + [0] * 7)[:7]
    return (user + nice + system + irq + softirq) / os.sysconf('SC_CLK_TCK')
