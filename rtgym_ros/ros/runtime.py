"""
One ROS node in a private context, spun by an executor in its own daemon thread.

Everything that touches the node (interface calls, timers, publishers) runs on that thread;
other threads hand work over with :meth:`RosRuntime.post` or :meth:`RosRuntime.call`. A private
``rclpy.Context`` keeps several envs in one process independent of each other and of the
user's own ``rclpy.init()``; no signal handlers are installed, Ctrl-C stays the user's.

Node names are unique in the process: rcl keeps one ``/rosout`` publisher per node name for the
whole process, so a second live node of the same name warns (``Publisher already registered
for node name``) and, once either node is gone, silences the other's ``/rosout``. A runtime
whose name is taken by a live one (``gym.make`` twice, Gymnasium's ``check_env``, a
``SyncVectorEnv``) takes the first free ``<name>_<k>``, k = 2, 3, ..., and says so. The names
are ours: a global ``-r __node:=`` on the command line (which rcl would apply to every node of
the process, the io node too) does not rename them; the agent reads it and passes the name.

An interface that must block on the network (wait for a fresh sensor message, for a service
response) uses :attr:`RosRuntime.io_node`: a second node, spun by a second thread, whose
callbacks only store what arrives. The executor thread can then wait, bounded, for them. Large
messages (images) can be taken serialized instead, by a third thread that releases the GIL while
it copies them (:meth:`IoNode.create_serialized_subscription`, :mod:`rtgym_ros.ros.serialized`).
"""

import os
import sys
import threading
import time
from typing import Any, Callable, TypeVar

import rclpy
from rclpy.context import Context
from rclpy.exceptions import NameValidationException
from rclpy.executors import Executor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rclpy.signals import SignalHandlerOptions
from rclpy.subscription import Subscription
from rclpy.time_source import TimeSource
from rclpy.validate_namespace import validate_namespace
from rclpy.validate_node_name import validate_node_name

from rtgym_ros.ros.clock_reader import ClockReader
from rtgym_ros.ros.lean_executor import LeanExecutor, RCLPY_LOOP_POLL
from rtgym_ros.ros.parameters import named, remap_args
from rtgym_ros.ros.publisher_events import drop_event_handlers
from rtgym_ros.ros.serialized import SerializedReceiver
from rtgym_ros.ros.spin import SpinThread

T = TypeVar('T')
_LONGEST_TURN = 1.0  # s: timers created meanwhile, tasks of publisher events, wait that long
_SHORT_TURN = 0.05  # s: the turn rclpy's loop gets when it serves subscriptions or services
_TURN_PATIENCE = 4.0  # s a due turn of the lean loop waits for room in a time-step
_LEAN_POLL = 1.0  # s: an idle lean executor's longest wait (whatever it serves wakes it)


def _no_work() -> bool:
    return False


class RuntimeClosedError(RuntimeError):
    """The runtime was closed, or its executor thread died."""


_names_lock = threading.Lock()
_live_names: set[str] = set()  # full names of the nodes of the live runtimes of this process


_rcl_started = False  # this process, or the one it was forked from, initialized rcl
_forked_after_rcl = False  # this process was forked from one that had initialized rcl


def _note_fork_in_child() -> None:
    global _forked_after_rcl
    _forked_after_rcl = _forked_after_rcl or _rcl_started


os.register_at_fork(after_in_child=_note_fork_in_child)


def _check_not_forked_after_rcl() -> None:
    """
    Refuse to start rcl in a forked child of a process that had started it: it would hang.

    DDS keeps process-wide state whose threads do not come along with a fork: ``rclpy.init``
    waits forever in such a child. Gymnasium's ``AsyncVectorEnv`` makes an env in the parent
    (for the spaces) and then starts its workers with the platform's default, fork on Linux.
    """
    global _rcl_started
    if _forked_after_rcl:
        raise RuntimeError(
            'this process was forked from one that had started ROS (an env was made there): '
            'rcl would hang here, as DDS does not survive a fork; start subprocesses with '
            "spawn or forkserver: AsyncVectorEnv(..., context='spawn'), "
            "gym.make_vec(..., vector_kwargs={'context': 'spawn'}), "
            "SubprocVecEnv(..., start_method='forkserver')")
    _rcl_started = True


def _full_name(namespace: str, name: str) -> str:
    return f'/{namespace.strip("/")}/{name}'.replace('//', '/')


def _claim_name(namespace: str, name: str) -> str:
    """Return ``name``, or the first ``name_<k>`` whose node and io node are free; claim it."""
    with _names_lock:
        candidate, k = name, 1
        while any(_full_name(namespace, n) in _live_names for n in (candidate, f'{candidate}_io')):
            k += 1
            candidate = f'{name}_{k}'
        _live_names.update(_full_name(namespace, n) for n in (candidate, f'{candidate}_io'))
        return candidate


def _release_name(namespace: str, name: str) -> None:
    with _names_lock:
        _live_names.difference_update(_full_name(namespace, n) for n in (name, f'{name}_io'))


class NodeNameClaim:
    """
    A node name of this process, held (with its io node's) until released.

    Claimed before the node exists where the name must be known first: the env reads its
    params file for the node it will make, ``rtgym_env_2`` when ``rtgym_env`` is taken.
    Where an ``__ns`` remap of the command line (``args``, else ``sys.argv``) may move the node
    (``-r __ns:=/r5`` moves every node of the process there), the name is claimed in every
    namespace: two envs asking for ``r1`` and ``r2`` would both be ``/r5/rtgym_env``.
    """

    def __init__(self, namespace: str, name: str, *, args: list[str] | None = None) -> None:
        self.namespace = namespace
        self.requested = name
        moved = any('__ns:=' in str(rule) for rule in remap_args(
            getattr(sys, 'argv', []) if args is None else args))
        self._key = '/<any namespace>' if moved else namespace
        self.name = _claim_name(self._key, name)
        """``name``, or ``name_<k>`` if that one is taken."""
        self._held = True

    def release(self) -> None:
        """Free the name; once only, as a name claimed again since is another claim's."""
        with _names_lock:
            held, self._held = self._held, False
        if held:
            _release_name(self._key, self.name)


def check_node_name(node_name: str, namespace: str) -> None:
    """Refuse, naming the config key, a node name or namespace that ROS would refuse."""
    for key, check, value, checked in (
            ('node_name', validate_node_name, node_name, node_name),
            ('namespace', validate_namespace, namespace,
             namespace if namespace.startswith('/') else f'/{namespace}')):
        try:
            check(checked)
        except NameValidationException as error:
            reason = str(error).splitlines()[0]
            raise ValueError(f"config['{key}'] must be a valid ROS "
                             f"{key.replace('_', ' ')}, got {value!r}: {reason}") from None


class RosRuntime:
    """A node, its private context and the thread that spins it."""

    def __init__(self, *, node_name: str, namespace: str = '', use_sim_time: bool = False,
                 domain_id: int | None = None, args: list[str] | None = None,
                 parameter_overrides: list[Parameter] | None = None,
                 name_claim: NodeNameClaim | None = None) -> None:
        """
        Start the node ``namespace/node_name``, or the next free name (see ``NodeNameClaim``).

        :param name_claim: the claim of ``node_name`` in ``namespace``, taken by the caller;
            the runtime releases it when it closes or fails to start.
        """
        if name_claim is None:
            name_claim = NodeNameClaim(namespace, node_name, args=args)
        elif (name_claim.requested, name_claim.namespace) != (node_name, namespace):
            name_claim.release()
            raise ValueError(f'name_claim is for {name_claim.requested!r} in namespace '
                             f'{name_claim.namespace!r}, expected {node_name!r} in '
                             f'{namespace!r}')
        self._name_claim = name_claim
        self.requested_name = node_name
        self.node_name = name_claim.name
        """The name of the node: ``node_name``, or ``node_name_<k>`` if that one is taken."""
        try:
            self._start(node_name=self.node_name, namespace=namespace,
                        use_sim_time=use_sim_time, domain_id=domain_id, args=args,
                        parameter_overrides=parameter_overrides)
        except BaseException:
            name_claim.release()
            raise
        if self.node_name != node_name:
            placed = self.node.get_namespace()  # where a command line's __ns remap moved it
            self.logger.info(f'node name {_full_name(placed, node_name)} is taken by another '
                             f'env of this process: this one is '
                             f'{self.node.get_fully_qualified_name()}')

    def _start(self, *, node_name: str, namespace: str, use_sim_time: bool,
               domain_id: int | None, args: list[str] | None,
               parameter_overrides: list[Parameter] | None) -> None:
        _check_not_forked_after_rcl()
        self.context = Context()
        rclpy.init(args=args, context=self.context, domain_id=_domain_id(domain_id),
                   signal_handler_options=SignalHandlerOptions.NO)
        overrides = list(parameter_overrides or [])
        # Under sim time the main node's clock is driven from the io thread (below), not by a
        # /clock subscription of its own.
        overrides.append(Parameter('use_sim_time', Parameter.Type.BOOL, False))
        # Every service of the node is polled by the executor on every wake-up; the parameter
        # and type-description services cost the time-step precision and serve no env user.
        overrides.append(Parameter('start_type_description_service', Parameter.Type.BOOL,
                                   False))
        try:
            self.node = Node(node_name, namespace=namespace, context=self.context,
                             cli_args=named(node_name), parameter_overrides=overrides,
                             start_parameter_services=False)
            drop_event_handlers(self.node)  # rclpy's /parameter_events: waited on at each wake
            self.executor = make_main_executor(self.context)
            self.executor.add_node(self.node)
            self._clock = ClockReader(self.node.get_clock())
        except BaseException:
            self.context.try_shutdown()
            raise
        self.failure: BaseException | None = None
        """What ended one of the runtime's threads (executor, io, serialized receiver)."""
        self.failed_thread = ''
        self.on_failure: Callable[[], None] | None = None
        """Called on the dying executor thread if a callback raised (put the robot safe)."""
        self._closed = False
        self._node_args = (node_name, namespace, overrides)
        self._io: tuple[Node, SpinThread] | None = None
        self._serialized: SerializedReceiver | None = None
        # Posted work, a stop, a new entity or a timer wake the lean executor: an idle env
        # looks once a second instead of ten times (0.2 ms of CPU each). rclpy's loop, which
        # can miss a stop request's wake-up, keeps looking every RCLPY_LOOP_POLL.
        poll = _LEAN_POLL if isinstance(self.executor, LeanExecutor) else RCLPY_LOOP_POLL
        self._spinner = self._start_spinning(self.executor, f'rtgym_ros:{node_name}',
                                             poll=poll)
        self._clock_source: TimeSource | None = None
        if use_sim_time:
            self._follow_clock_on_io_thread()

    def _follow_clock_on_io_thread(self) -> None:
        """
        Let the io thread take /clock and set the main node's clock (use_sim_time).

        The time then moves while the executor thread is busy (a reset waiting for first
        messages, a capture waiting for a fresh one), so stamps, ages and stall checks read
        the simulator's current time; and /clock costs no wake-up of the main executor.
        Timers of the main node follow it as with its own /clock subscription.
        """
        self._clock_source = _ClockSource(node=self.io_node)
        self._clock_source.ros_time_is_active = True
        self._clock_source.attach_clock(self.node.get_clock())

    def clock_step(self) -> float | None:
        """Under sim time, how far /clock moved with its last message (s); else None."""
        source = self._clock_source
        return None if source is None else source.step

    def add_clock_listener(self, listener: Callable[[], None]) -> None:
        """Under sim time, call ``listener()`` on the io thread after each /clock is set."""
        self._clock_source.listeners.append(listener)

    @property
    def io_node(self) -> Node:
        """Return the node for subscriptions and service clients, spun by its own thread."""
        if self._io is None:
            name, namespace, overrides = self._node_args
            node = IoNode(f'{name}_io', namespace=namespace, context=self.context,
                          cli_args=named(f'{name}_io'), parameter_overrides=overrides,
                          start_parameter_services=False,
                          serialized_receiver=self.serialized_receiver)
            executor = make_io_executor(self.context)
            executor.add_node(node)
            self._io = (node, self._start_spinning(executor, f'rtgym_ros:{name}_io'))
        return self._io[0]

    def serialized_receiver(self) -> SerializedReceiver:
        """
        Return the receiver of serialized subscriptions (made at the first call).

        :raises OSError: serialized takes are impossible in this process (rcl not found).
        """
        if self._closed:
            raise RuntimeClosedError(self.dead_reason())
        if self._serialized is None:
            name, namespace, _ = self._node_args
            self._serialized = SerializedReceiver(
                self.context, node_name=f'{name}_frames', namespace=namespace,
                on_failure=self._executor_failed)
        return self._serialized

    @property
    def executor_thread(self) -> threading.Thread:
        """Return the thread that runs every callback of the main node."""
        return self._spinner.thread

    @property
    def io_executor(self) -> Executor | None:
        """Return the executor of the io node (None until the io node is made)."""
        return None if self._io is None else self._io[1].executor

    def _start_spinning(self, executor: Executor, name: str, **options: Any) -> SpinThread:
        return SpinThread(executor, context=self.context, name=name,
                          on_failure=self._executor_failed, **options)

    def _executor_failed(self, error: BaseException) -> None:
        """Spinning thread, dying: log it and put the robot in its safe state."""
        self.failed_thread = threading.current_thread().name
        self.failure = error
        self.node.get_logger().error(f'thread {self.failed_thread} stopped: {error!r}')
        if self.on_failure is not None:
            self.on_failure()

    @property
    def logger(self):
        return self.node.get_logger()

    def now(self) -> float:
        """Seconds on the node's clock (``/clock`` under ``use_sim_time``)."""
        return self._clock.now()

    def wait_for_clock(self, *, timeout: float) -> None:
        """
        Under sim time, wait for the first /clock message (a lockstep sim starts at 0).

        :raises RuntimeClosedError: the runtime was closed (from another thread) meanwhile.
        """
        deadline = time.monotonic() + timeout
        while not self._clock_source.heard.is_set():
            if not self.alive():
                raise RuntimeClosedError(self.dead_reason())
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f'use_sim_time is set but no /clock message arrived within {timeout} s '
                    f'(clock_wait_timeout; domain {self.context.get_domain_id()}): is the '
                    'simulator running, in this domain? One that starts slowly, or is '
                    'discovered slowly on a loaded host, needs a longer clock_wait_timeout')
            time.sleep(0.01)

    @property
    def domain_id(self) -> int:
        return self.context.get_domain_id()

    def count_publishers(self, topic: str) -> int:
        """Return how many publishers the ROS graph knows on ``topic`` (any thread)."""
        return self.node.count_publishers(topic)

    def on_executor_thread(self) -> bool:
        return self._spinner.is_current()

    def alive(self) -> bool:
        return not self._closed and self._spinner.is_alive() and self.failure is None

    def post(self, function: Callable[..., Any], *args: Any) -> None:
        """Run ``function(*args)`` on the executor thread, soon; do not wait for it."""
        if not self.alive():
            raise RuntimeClosedError(self.dead_reason())
        if isinstance(self.executor, LeanExecutor):
            self.executor.post(function, *args)
        else:
            self.executor.create_task(function, *args)

    def executor_turn(self) -> float:
        """
        Executor thread: seconds it may run back-to-back time-steps before its loop needs it.

        Until the node's next timer is due (at most ``_LONGEST_TURN``) when this runtime's own
        loop serves the node; rclpy's loop (a node with subscriptions or services) cannot say
        when a message comes, so it gets a turn every ``_SHORT_TURN``.
        """
        executor = self.executor
        if not isinstance(executor, LeanExecutor) or not executor.lean:
            return _SHORT_TURN
        due = executor.next_timer_due()
        return _LONGEST_TURN if due is None else min(due, _LONGEST_TURN)

    def turn_patience(self) -> float:
        """
        Executor thread: how long a due turn may wait for a time-step with room for it.

        Time-steps shorter than ``TURN_ROOM`` (``ros/deadline.py``) have none: past
        this the turn is taken at a step's end, before the next action. Long for the lean
        loop (its timers: the log flush, ``/diagnostics``, the graph watch); rclpy's loop
        may have messages waiting, so as long as its turn. Wall time only: the env gives none
        under sim time.
        """
        executor = self.executor
        if not isinstance(executor, LeanExecutor) or not executor.lean:
            return _SHORT_TURN
        return _TURN_PATIENCE

    def executor_work_check(self) -> Callable[[], bool]:
        """Return a call that says whether work posted to the executor thread waits for it."""
        if isinstance(self.executor, LeanExecutor):
            return self.executor.has_work
        return _no_work  # rclpy's loop: its tasks are not ours to see

    def call(self, function: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        """Run ``function(*args)`` on the executor thread and return its result (or raise)."""
        if self.on_executor_thread():
            return function(*args)
        done = threading.Event()
        outcome: list = []

        def run() -> None:
            try:
                outcome.append((True, function(*args)))
            except BaseException as error:  # handed to the caller, who re-raises it
                outcome.append((False, error))
            finally:
                done.set()

        self.post(run)
        self.wait_for(done, timeout=timeout, what=getattr(function, '__name__', 'call'))
        succeeded, value = outcome[0]
        if not succeeded:
            raise value
        return value

    def wait_for(self, event: threading.Event, *, timeout: float | None = None,
                 what: str = 'the executor') -> None:
        """Wait for ``event``, but fail fast if the executor thread dies meanwhile."""
        remaining = timeout
        while not event.wait(0.1 if remaining is None else min(0.1, max(remaining, 0.0))):
            if not self.alive():
                raise RuntimeClosedError(self.dead_reason())
            if remaining is not None:
                remaining -= 0.1
                if remaining <= 0.0:
                    raise TimeoutError(f'{what} did not complete within {timeout} s')

    def dead_reason(self) -> str:
        if self.failure is not None:
            return f'the ROS thread {self.failed_thread} failed: {self.failure!r}'
        return 'the ROS runtime is closed'

    def close(self, *, timeout: float = 5.0) -> None:
        """
        Executor shutdown, thread join, node destroyed, context shut down. Idempotent.

        A Ctrl-C meanwhile is raised once every step has run (each bounded by ``timeout``):
        a teardown cut short leaves executor threads running, which the interpreter's exit
        then aborts on (``terminate called without an active exception``).
        """
        if self._closed:
            return
        self._closed = True
        spun = [(self.node, self._spinner)]
        if self._io is not None:
            spun.append(self._io)
        steps = [lambda spinner=spinner: spinner.stop(timeout=timeout) for _, spinner in spun]
        if self._serialized is not None:
            steps.append(lambda: self._serialized.close(timeout=timeout))
        steps += [lambda spinner=spinner: spinner.executor.shutdown(timeout_sec=timeout)
                  for _, spinner in spun]
        steps.append(self._clock.destroy)
        steps += [node.destroy_node for node, _ in spun]
        steps += [self.context.try_shutdown, self._name_claim.release]
        interrupted: BaseException | None = None
        for step in steps:
            try:
                step()
            except KeyboardInterrupt as error:
                interrupted = interrupted or error
        if interrupted is not None:
            raise interrupted


class IoNode(Node):
    """The io node: subscriptions and clients spun by the io thread, or taken serialized."""

    def __init__(self, *args: Any,
                 serialized_receiver: Callable[[], SerializedReceiver], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._serialized_receiver = serialized_receiver

    def create_serialized_subscription(self, msg_type: type, topic: str,
                                       callback: Callable[[memoryview], None],
                                       qos_profile: QoSProfile) -> Subscription:
        """
        Subscribe with ``callback(view)`` on the CDR bytes of each message, taken without the GIL.

        For messages too large to convert on the io thread (images): the receiving thread copies
        them with the GIL released and hands over a read-only view (see
        :mod:`rtgym_ros.ros.serialized`). The topic is resolved against this node's namespace.

        :raises OSError: serialized takes are impossible here; subscribe with
            ``create_subscription`` instead.
        """
        topic = self.resolve_topic_name(topic)
        return self._serialized_receiver().subscribe(msg_type, topic, callback, qos_profile)


MAIN_EXECUTOR_VARIABLE = 'RTGYM_ROS_MAIN_EXECUTOR'
MAIN_EXECUTORS = ('lean', 'single')


def make_main_executor(context: Context) -> Executor:
    """
    Make the main node's executor: :class:`LeanExecutor`, or rclpy's own.

    ``RTGYM_ROS_MAIN_EXECUTOR=single`` selects rclpy's SingleThreadedExecutor (several times the
    CPU per time-step; for comparison, or if the lean loop misbehaves with some rclpy).
    """
    choice = os.environ.get(MAIN_EXECUTOR_VARIABLE, 'lean').strip() or 'lean'
    if choice not in MAIN_EXECUTORS:
        raise ValueError(f'{MAIN_EXECUTOR_VARIABLE} must be one of {MAIN_EXECUTORS}, '
                         f'found {choice!r}')
    if choice == 'lean':
        return LeanExecutor(context=context)
    return SingleThreadedExecutor(context=context)


IO_EXECUTOR_VARIABLE = 'RTGYM_ROS_IO_EXECUTOR'
IO_EXECUTORS = ('events', 'single')


def make_io_executor(context: Context) -> Executor:
    """
    Make rclpy's C++ events executor where it exists: about 2.5x less CPU per message.

    For nodes without timers: the env's io node (subscriptions, service clients),
    ``sim_robot`` and ``mujoco_sim``. (The events executor of the kilted wheels does fire
    timers, on wall time and on ``/clock``; the main node's timers run on the lean executor.)
    ``RTGYM_ROS_IO_EXECUTOR=single`` falls back to rclpy's Python executor. Drive it with
    ``spin_once(timeout_sec=...)``: its ``spin()`` busy-waits a whole core in those wheels.
    """
    choice = os.environ.get(IO_EXECUTOR_VARIABLE, 'events').strip() or 'events'
    if choice not in IO_EXECUTORS:
        raise ValueError(f'{IO_EXECUTOR_VARIABLE} must be one of {IO_EXECUTORS}, '
                         f'found {choice!r}')
    if choice == 'events':
        try:
            from rclpy.experimental.events_executor import EventsExecutor
        except ImportError:  # rclpy before jazzy
            pass
        else:
            return EventsExecutor(context=context)
    return SingleThreadedExecutor(context=context)


def _domain_id(domain_id: int | None) -> int | None:
    """Pick the explicit domain, else ROS_DOMAIN_ID (rclpy reads it too when given None)."""
    if domain_id is not None:
        return domain_id
    value = os.environ.get('ROS_DOMAIN_ID', '').strip()
    return int(value) if value.isdigit() else None


class _ClockSource(TimeSource):
    """rclpy's TimeSource, which also says when the first /clock message came, and to whom."""

    def __init__(self, *, node: Node) -> None:
        self.heard = threading.Event()
        self.listeners: list[Callable[[], None]] = []
        self._logger = node.get_logger()
        self._last: float | None = None
        self.step: float | None = None
        """How far the last /clock message moved the clock (s; negative: back)."""
        super().__init__(node=node)

    def clock_callback(self, msg: Any) -> None:
        if msg.clock.sec < 0:  # rclpy's Time refuses it: the io thread would end with it
            self._logger.error(f'/clock: ignored a time before 0 ({msg.clock.sec} s, '
                               f'{msg.clock.nanosec} ns): the clock stays where it is',
                               throttle_duration_sec=5.0)
            return
        if not self.heard.is_set():
            self.heard.set()
        seconds = msg.clock.sec + msg.clock.nanosec * 1e-9
        if self._last is not None:
            self.step = seconds - self._last
        self._last = seconds
        super().clock_callback(msg)
        for listener in self.listeners:
            listener()
