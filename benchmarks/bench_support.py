"""What the benchmarks share: child processes, their environment, CPU and memory from /proc."""

import os
from pathlib import Path
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

REPO = str(Path(__file__).resolve().parents[1])
"""This checkout: the rtgym_ros measured, in the benchmark's own process as in its children."""
if REPO not in sys.path:  # else an installed copy (colcon's install/, another clone) is found
    sys.path.insert(0, REPO)

from rtgym_ros.nodes.launch_logic import describe_exit  # noqa: E402, I100


STALL = 500e-6
"""Seconds late past which a capture gap or a wake-up is a stall (of the host, the GIL, an env)."""


def rate_label(rate: float) -> str:
    """Return a rate in Hz as the tables write it: '100 Hz', '1 kHz'."""
    return f'{rate / 1000:g} kHz' if rate >= 1000 else f'{rate:g} Hz'


def bench_environment() -> dict[str, str]:
    """Children share one private domain (from this process's pid) and stay on this host."""
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
               ROS_DOMAIN_ID=os.environ.get('RTGYM_BENCH_DOMAIN_ID',
                                            str(1 + os.getpid() % 200)))
    env.setdefault('OPENBLAS_NUM_THREADS', '1')
    env.setdefault('OMP_NUM_THREADS', '1')
    env.setdefault('PYTHONFAULTHANDLER', '1')  # a crash in C (rcl, DDS) leaves its Python stack
    env['PYTHONPATH'] = os.pathsep.join(p for p in (REPO, env.get('PYTHONPATH')) if p)
    return env


def join_bench_domain() -> dict[str, str]:
    """Put this process on its children's domain, on this host; return their environment."""
    env = bench_environment()
    os.environ.update(ROS_AUTOMATIC_DISCOVERY_RANGE=env['ROS_AUTOMATIC_DISCOVERY_RANGE'],
                      ROS_DOMAIN_ID=env['ROS_DOMAIN_ID'])
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


def thread_costs(pid: int | str = 'self') -> dict[int, tuple[str, int, int]]:
    """
    Each thread of a process: its name, CPU nanoseconds and voluntary context switches so far.

    ``schedstat`` counts the CPU in nanoseconds (``stat`` counts clock ticks, 10 ms here). A
    thread that ends while it is read is left out; a process that is gone gives {}. Read as
    bytes, one ``os.read`` per file: ``step_timing.py`` reads its own process between two
    steps, where text files cost 1.3 ms for an env's 20 threads, and this 0.5 ms.
    """
    try:
        tids = os.listdir(f'/proc/{pid}/task')
    except OSError:
        return {}
    threads = {}
    for tid in tids:
        base = f'/proc/{pid}/task/{tid}/'
        try:
            cpu_ns = int(_read_proc(base + 'schedstat').split(None, 1)[0])
            name = _read_proc(base + 'comm').strip().decode(errors='replace')
            status = _read_proc(base + 'status')
            start = status.index(_VOLUNTARY) + len(_VOLUNTARY)
            switches = int(status[start:status.index(b'\n', start)])
        except (OSError, ValueError, IndexError):
            continue
        threads[int(tid)] = (name, cpu_ns, switches)
    return threads


_VOLUNTARY = b'\nvoluntary_ctxt_switches:'


def is_dds_thread(name: str) -> bool:
    """Say whether a thread of ``thread_costs()`` is Fast DDS's own (it names them ``dds.*``)."""
    return name.startswith('dds.')


def threads_cpu_ns(tids: list[int]) -> int:
    """Return the CPU nanoseconds of these threads of this process so far (``schedstat``)."""
    return sum(int(_read_proc(f'/proc/self/task/{tid}/schedstat').split(None, 1)[0])
               for tid in tids)


def _read_proc(path: str) -> bytes:
    """Return a small /proc file's bytes (one read: the kernel writes them whole)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        return os.read(descriptor, 16384)
    finally:
        os.close(descriptor)


def machine_busy() -> float | None:
    """Busy CPU seconds of the whole machine so far (all cores, /proc/stat)."""
    times = machine_times()
    return None if times is None else times[0]


def machine_times() -> tuple[float, float] | None:
    """Busy and stolen CPU seconds of the whole machine so far (all cores, /proc/stat)."""
    try:
        with open('/proc/stat') as stream:
            fields = [int(x) for x in stream.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf('SC_CLK_TCK')
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) / tick, steal / tick


def process_rss_mib(pid: int) -> float | None:
    """Resident memory of a process (VmRSS), MiB; None if gone."""
    try:
        with open(f'/proc/{pid}/status') as stream:
            for line in stream:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


_DYING_WITH_PARENT = (
    'import os, sys\n'
    'from rtgym_ros.nodes.signals import die_with_parent\n'
    'die_with_parent()\n'
    'if os.getppid() != int(sys.argv[1]):\n'
    '    sys.exit("its benchmark ended before it started")\n'
    'os.execvp(sys.argv[2], sys.argv[2:])\n')
"""
A child's command, run with SIGTERM on its parent's death, then exec'd in place (same pid).

Set in the child's own fresh interpreter: ``preexec_fn`` would run in a fork of a process that
holds rclpy's threads.
"""


class Child:
    """
    A process whose stdout and stderr lines are collected by threads; stdin stays open.

    It gets SIGTERM when the thread that created it ends (``PR_SET_PDEATHSIG``; create it from
    the main thread): a benchmark killed, or a script that leaves without stopping its
    children, leaves no simulator running to load the runs after it.
    """

    def __init__(self, name: str, command: list[str], *, env: dict[str, str]) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, '-c', _DYING_WITH_PARENT, str(os.getpid()), *command],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, cwd=REPO)
        self._lines: queue.Queue = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, False), daemon=True).start()

    def _read(self, stream: Any, is_stdout: bool) -> None:
        for line in stream:
            line = line.rstrip('\n')
            (self.stdout if is_stdout else self.stderr).append(line)
            self._lines.put((is_stdout, line))

    def wait_for(self, text: str, timeout: float, *, stderr: bool = False) -> None:
        """Wait for a stdout line equal to ``text`` (or a stderr line containing it)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                is_stdout, line = self._lines.get(timeout=max(0.0, min(remaining, 0.5)))
                if (stderr and not is_stdout and text in line) or \
                        (not stderr and is_stdout and line.strip() == text):
                    return
            except queue.Empty:
                pass
            if self.proc.poll() is not None and self._lines.empty():
                raise RuntimeError(f'{self.name} exited ({describe_exit(self.proc.returncode)}) '
                                   f'before {text!r}: {" | ".join(self._last_words())}')
            if remaining <= 0:
                raise TimeoutError(f'{self.name}: no {text!r} within {timeout:.0f} s')

    def _last_words(self) -> list[str]:
        """Return the last stderr lines, or a crash's stack (faulthandler: innermost first)."""
        for index, line in enumerate(self.stderr):
            if line.startswith('Fatal Python error'):
                return self.stderr[index:index + 200]  # every thread: which one faulted
        return self.stderr[-5:]

    def send(self, line: str) -> None:
        try:
            self.proc.stdin.write(line + '\n')
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def wait(self, timeout: float) -> int:
        """Wait for the exit; kill it and raise TimeoutError if it takes longer."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise TimeoutError(f'{self.name}: not done within {timeout:.0f} s') from None

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM (roles write their results on it), then SIGKILL if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait(5.0)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def cpu_seconds(self) -> float | None:
        return process_cpu(self.proc.pid)

    def rss_mib(self) -> float | None:
        return process_rss_mib(self.proc.pid)

    def unexpected_stderr(self) -> list[str]:
        """Stderr lines other than time-out warnings (and the source line Python echoes)."""
        return [line for line in self.stderr if line.strip() and 'timed out' not in line
                and '[INFO]' not in line
                and not line.strip().startswith('warnings.warn')][-10:]
