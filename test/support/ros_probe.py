"""
Test-side ROS helpers: a probe node in its own context, message recorders, a sim process.

Shared by the tests that talk to other processes over real DDS.
"""

import fcntl
import itertools
import os
from pathlib import Path
import pty
import select
import signal
import subprocess
import sys
import termios
import threading
import time
import traceback
from typing import Any, Callable, List

from rcl_interfaces.msg import Log
import rclpy
from rclpy.context import Context
from rclpy.exceptions import InvalidHandle
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rtgym_ros.nodes import signals
from rtgym_ros.ros.spin import SpinThread

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
DOMAIN = int(os.environ.get('ROS_DOMAIN_ID') or 1 + os.getpid() % 101)
# PYTHONFAULTHANDLER: a child that a fatal signal ends (SIGABRT, SIGSEGV) logs every stack.
CHILD_ENV = dict(
    os.environ, ROS_DOMAIN_ID=str(DOMAIN), ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
    PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get('PYTHONPATH')])),
    PYTHONUNBUFFERED='1', RCUTILS_LOGGING_BUFFERED_STREAM='0', PYTHONFAULTHANDLER='1')
_names = itertools.count()


def die_with_parent() -> None:
    """
    Prepare a test's child process: SIGTERM when the test dies; SIGINT, SIGHUP as from a tty.

    A test run started in the background by a non-interactive shell ignores SIGINT (and under
    ``nohup`` SIGHUP), and children inherit that: Python would then install no
    KeyboardInterrupt, and a test of what Ctrl-C or a hangup does would test nothing.
    """
    signals.die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def in_a_terminal() -> None:
    """
    Start a child as a shell in a terminal starts it (``preexec_fn``).

    Its stdout is the slave side of a pty: the child gets a session of its own, with that
    terminal as its controlling one, so closing the master side hangs the session up.
    """
    die_with_parent()
    os.setsid()
    fcntl.ioctl(1, termios.TIOCSCTTY, 0)


def read_terminal_until(terminal: int, text: str, *, timeout: float) -> str:
    """Read the master side of a pty until ``text`` shows; return what was read."""
    deadline = time.monotonic() + timeout
    seen = b''
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([terminal], [], [], left)[0]:
            raise AssertionError(f'no {text!r} on the terminal within {timeout} s: {seen!r}')
        try:
            seen += os.read(terminal, 4096)
        except OSError:  # EIO: the child and the terminal with it are gone
            raise AssertionError(f'the terminal closed before {text!r}: {seen!r}') from None
    return seen.decode(errors='replace')


def start_on_a_terminal(command: List[str], **popen: Any) -> tuple[subprocess.Popen, int]:
    """
    Start ``command`` with a terminal of its own as stdout and stderr (``in_a_terminal``).

    Return the child and the terminal's master side: reading it reads what the child prints,
    closing it hangs the child's session up.
    """
    terminal, tty = pty.openpty()
    try:
        child = subprocess.Popen(command, stdout=tty, stderr=tty, preexec_fn=in_a_terminal,
                                 **popen)
    except BaseException:
        os.close(terminal)
        raise
    finally:
        os.close(tty)
    return child, terminal


def exit_code_after_a_hangup(command: List[str], ready: str, *, timeout: float = 60.0,
                             **popen: Any) -> int:
    """
    Run ``command`` on a terminal until it prints ``ready``, hang up; return its exit code.

    The terminal is the child's own (``in_a_terminal``); closing it, the kernel hangs the
    child's session up.
    """
    child, terminal = start_on_a_terminal(command, stdin=subprocess.DEVNULL, **popen)
    try:
        read_terminal_until(terminal, ready, timeout=timeout)
        os.close(terminal)
        terminal = None
        return child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(5.0)
        if terminal is not None:
            os.close(terminal)


def wait_until(predicate: Callable[[], Any], timeout: float,
               what: str | Callable[[], str]) -> Any:
    """Return the predicate's first truthy value; fail after ``timeout`` s saying ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            what = what() if callable(what) else what
            raise AssertionError(f'timed out after {timeout} s waiting for {what}')
        time.sleep(0.01)


def _report_failure(error: BaseException) -> None:
    """Print why the probe's turn failed (a callback raised), before the tests time out."""
    if isinstance(error, InvalidHandle):
        return  # a test destroyed an entity while rclpy's loop gathered it: the next turn won't
    traceback.print_exception(error)


class Probe:
    """The test side: a node in its own context, spun by an executor in a daemon thread."""

    def __init__(self) -> None:
        self.context = Context()
        rclpy.init(context=self.context, domain_id=DOMAIN,
                   signal_handler_options=SignalHandlerOptions.NO)
        self.node = Node(f'test_probe_{os.getpid()}_{next(_names)}', context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        # One test's failing callback (printed) must not leave the module's later tests without
        # a probe.
        self.spinner = SpinThread(self.executor, context=self.context, name=self.node.get_name(),
                                  on_failure=_report_failure, survive_errors=True)

    def call(self, client, request, timeout: float = 5.0):
        future = client.call_async(request)
        wait_until(future.done, timeout, f'an answer from {client.srv_name}')
        return future.result()

    def close(self) -> None:
        self.spinner.stop(timeout=5.0)
        self.executor.shutdown(timeout_sec=5.0)
        self.node.destroy_node()
        self.context.try_shutdown()


class Recorder:
    """Keeps every message with its wall receipt time; the callback does no real work."""

    def __init__(self, probe: Probe, msg_type, topic: str) -> None:
        self._lock = threading.Lock()
        self._items: List[tuple] = []
        self.sub = probe.node.create_subscription(
            msg_type, topic, self._on_msg, QoSProfile(depth=200))

    def _on_msg(self, msg) -> None:
        with self._lock:
            self._items.append((time.monotonic(), msg))

    def since(self, start: float) -> List[tuple]:
        with self._lock:
            return [item for item in self._items if item[0] >= start]

    def wait_for(self, predicate: Callable[[object], bool], *, since: float,
                 timeout: float, what: str):
        """Return the first message received at or after ``since`` that ``predicate`` takes."""
        return self.wait_for_receipt(predicate, since=since, timeout=timeout, what=what)[1]

    def wait_for_receipt(self, predicate: Callable[[object], bool], *, since: float,
                         timeout: float, what: str) -> tuple:
        """Return ``(receipt time, message)`` of the first such message; fail after timeout."""
        found = []

        def check() -> bool:
            found[:] = [item for item in self.since(since) if predicate(item[1])]
            return bool(found)

        wait_until(check, timeout, what)
        return found[0]


def taken_after_call(states: Recorder, called: float, *, wall_clock: bool, what: str) -> float:
    """
    Return the receipt time from which only states of after a call that just returned come.

    ``called``: when the call was made (monotonic). On wall time, the receipt of the first
    state stamped after now: a state sampled before the call may be published after it (a
    physics thread sends its batch outside its lock) and arrive later than any margin on a
    loaded machine. On sim time stamps do not say: a margin, and a caller that needs more
    waits for the rewound /clock itself.
    """
    if not wall_clock:
        time.sleep(0.05)  # messages sent just before the call may still be on the wire
        return time.monotonic()
    done = time.time()
    received, _ = states.wait_for_receipt(
        lambda m: m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 > done, since=called,
        timeout=5.0, what=f'a state stamped after {what}')
    return received


class RosoutLog:
    """
    What the nodes of one namespace log, read from ``/rosout`` (late-joined lines too).

    For a warning logged once by another thread: pytest's ``capfd.readouterr()`` truncates the
    captured stderr after reading it, and loses a line written in between.
    """

    def __init__(self, probe: Probe, namespace: str) -> None:
        self._prefix = namespace.strip('/').replace('/', '.') + '.'
        self._lock = threading.Lock()
        self._lines: List[str] = []
        self.sub = probe.node.create_subscription(
            Log, '/rosout', self._on_log, QoSProfile(
                depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL))

    def _on_log(self, log: Log) -> None:
        if log.name.startswith(self._prefix):
            with self._lock:
                self._lines.append(f'[{log.name}] {log.msg}')

    def lines(self) -> List[str]:
        with self._lock:
            return list(self._lines)

    def wait_for(self, text: str, timeout: float) -> str:
        """Return the first line that holds ``text``; fail after ``timeout`` s with all lines."""
        return wait_until(lambda: next((line for line in self.lines() if text in line), None),
                          timeout, lambda: f'{text!r} in /rosout; got {self.lines()}')


class SimProcess:
    """One simulator process (sim_robot unless ``module`` says) in its own namespace."""

    def __init__(self, log_dir: Path, *params: str,
                 config: str = 'config/sim_robot/pendulum.yaml',
                 namespace: str | None = None, module: str = 'rtgym_ros.nodes.sim_robot',
                 env: dict[str, str] | None = None, ros_args: tuple[str, ...] = ()) -> None:
        self.ns = namespace or f'/sim_test_{os.getpid()}_{next(_names)}'
        self.name = module.rsplit('.', 1)[-1]
        self.log_path = log_dir / f'{self.ns.strip("/")}_{next(_names)}.log'
        command = [sys.executable, '-m', module, '--ros-args',
                   '--params-file', str(REPO / config), '-r', f'__ns:={self.ns}', *ros_args]
        for param in params:
            command += ['-p', param]
        with open(self.log_path, 'wb') as log:
            self.proc = subprocess.Popen(command, cwd=REPO, env=dict(CHILD_ENV, **(env or {})),
                                         stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=die_with_parent)

    def output(self) -> str:
        return self.log_path.read_text(errors='replace')

    def stop(self, signum: int = signal.SIGINT, timeout: float = 10.0) -> tuple:
        """Signal the process; return (exit code, seconds it took)."""
        start = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)  # its threads' stacks, into the log
            try:
                self.proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5.0)
            raise AssertionError(f'{self.name} ignored signal {signum} for {timeout} s:\n'
                                 + self.output())
        return code, time.monotonic() - start
