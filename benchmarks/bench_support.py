"""What the benchmarks share: the children's environment and CPU accounting from /proc."""

import os
from pathlib import Path

REPO = str(Path(__file__).resolve().parents[1])


def bench_environment() -> dict[str, str]:
    """Children share one private domain (from this process's pid) and stay on this host."""
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
               ROS_DOMAIN_ID=os.environ.get('RTGYM_BENCH_DOMAIN_ID',
                                            str(1 + os.getpid() % 200)))
    env.setdefault('OPENBLAS_NUM_THREADS', '1')
    env.setdefault('OMP_NUM_THREADS', '1')
    env['PYTHONPATH'] = os.pathsep.join(p for p in (REPO, env.get('PYTHONPATH')) if p)
    return env


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
