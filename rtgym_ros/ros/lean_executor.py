"""
An executor for the env's main node whose loop costs a quarter of rclpy's per wake-up.

rclpy's :class:`~rclpy.executors.SingleThreadedExecutor` rebuilds its wait set in Python on
every wake-up: it gathers every entity of every node, makes a new rcl wait set and a timeout
timer, and wraps each callback in a task. On the main node, which wakes two or three times per
time-step, that is most of the env's CPU per step (0.2 to 0.5 ms per wake-up on a 2-core
machine, more than rtgym spends on a whole step; ``benchmarks/executor_cost.py``).

The main node has timers (the time-step deadline, ``/diagnostics``, the graph watch), work
posted by other threads, and the event handlers of publishers an interface makes there with
rclpy's defaults (the env's own have none: :mod:`rtgym_ros.ros.publisher_events`). For
exactly those this executor keeps one rcl wait set per set of entities, fires ready timers
directly and runs posted functions from a plain queue. A node that also has subscriptions,
service clients or servers, or guard conditions of its own (an interface that makes them on
the main node) is spun by rclpy's own loop, unchanged.
"""

import collections
import contextlib
import inspect
import threading
from typing import Any, Callable

from rclpy.context import Context
from rclpy.exceptions import InvalidHandle
from rclpy.executors import SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.timer import Timer, TimerInfo
from rclpy.waitable import NumberOfEntities, Waitable

RCLPY_LOOP_POLL = 0.1
"""The longest wait of rclpy's loop (s): a stop request can slip past its wake-up there."""


class LeanExecutor(SingleThreadedExecutor):
    """Spin one node of timers and publishers with a cached wait set; else as rclpy does."""

    def __init__(self, *, context: Context) -> None:
        super().__init__(context=context)
        self._posted: collections.deque = collections.deque()
        self._post_lock = threading.Lock()
        self._lean = True  # False while the node needs rclpy's own loop
        self._wait_set: Any = None
        self._wait_set_key: tuple = ()
        self._wants_info: dict[Callable[..., Any], str | None] = {}

    def post(self, function: Callable[..., Any], *args: Any) -> None:
        """Run ``function(*args)`` on the spinning thread, soon (any thread)."""
        with self._post_lock:
            if not self._lean:
                self.create_task(function, *args)
                return
            self._posted.append((function, args))
        self.wake()

    def has_work(self) -> bool:
        """Say whether posted work or rclpy tasks wait for the loop (any thread)."""
        return bool(self._posted) or bool(self._tasks)

    def next_timer_due(self) -> float | None:
        """Seconds until the first running timer of the node is due; None: none runs."""
        node = self._single_node()
        if node is None:
            return None
        due = []
        for timer in node.timers:
            try:
                ns = timer.time_until_next_call()
            except InvalidHandle:  # destroyed meanwhile (another thread): not due
                continue
            if ns is not None:
                due.append(ns)
        return max(0.0, min(due) * 1e-9) if due else None

    @property
    def lean(self) -> bool:
        """Say whether the last wait was this executor's own (else rclpy's loop served it)."""
        return self._lean

    def spin_once(self, timeout_sec: float | None = None) -> None:
        node = self._single_node()
        lean = node is not None and _is_lean(node)
        if lean != self._lean:
            with self._post_lock:
                self._lean = lean
                while not lean and self._posted:
                    function, args = self._posted.popleft()
                    self.create_task(function, *args)
        if not lean:
            if timeout_sec is None or timeout_sec < 0 or timeout_sec > RCLPY_LOOP_POLL:
                timeout_sec = RCLPY_LOOP_POLL
            super().spin_once(timeout_sec)
            return
        self._run_posted()
        try:
            self._wait_and_fire(node, timeout_sec)
        except InvalidHandle:
            pass  # an entity was destroyed meanwhile (another thread): gather them again
        self._run_posted()

    def _single_node(self) -> Node | None:
        nodes = self.get_nodes()
        return nodes[0] if len(nodes) == 1 else None

    def _run_posted(self) -> None:
        # What was posted before this call only: a posted time-step start can post the next
        # one before it returns, and the timers must get their turn in between.
        for _ in range(len(self._posted)):
            function, args = self._posted.popleft()
            function(*args)
        if self._tasks:  # rclpy tasks: coroutines of callbacks, events of publishers
            self._run_tasks()

    def _run_tasks(self) -> None:
        with self._tasks_lock:
            tasks = list(self._tasks)
        for task, _, _ in tasks:
            if not task.executing() and not task.done():
                task()
                error = task.exception()
                if error is not None:
                    raise error
        with self._tasks_lock:
            self._tasks = [entry for entry in self._tasks if not entry[0].done()]

    def _wait_and_fire(self, node: Node, timeout_sec: float | None) -> None:
        timers = list(node.timers)
        waitables = list(node.waitables)
        guards = [g for g in (self._guard, self._sigint_gc) if g is not None]
        if self._is_shutdown or not guards:
            return
        # Entered handles cannot be destroyed under rcl_wait (rclpy's Destroyable contract).
        with contextlib.ExitStack() as held:
            held.enter_context(self._context.handle)
            for entity in (*timers, *guards):
                held.enter_context(entity.handle)
            for waitable in waitables:
                held.enter_context(waitable)
            wait_set = self._wait_set_for(timers, waitables, guards)
            wait_set.clear_entities()
            for timer in timers:
                wait_set.add_timer(timer.handle)
            for guard in guards:
                wait_set.add_guard_condition(guard.handle)
            for waitable in waitables:
                waitable.add_to_wait_set(wait_set)
            wait_set.wait(_timeout_ns(timeout_sec))
            if self._is_shutdown or not self._context.ok():
                return
            ready = wait_set.get_ready_entities('timer')
            for waitable in waitables:
                if waitable.is_ready(wait_set):
                    self.create_task(_execute, waitable, waitable.take_data())
        if ready:
            for timer in timers:
                if timer.handle.pointer in ready:
                    self._fire(timer)

    def _wait_set_for(self, timers: list[Timer], waitables: list[Waitable],
                      guards: list) -> Any:
        """Return an rcl wait set sized for these entities; made again only when they change."""
        key = (len(timers), len(guards), tuple(id(w) for w in waitables))
        if self._wait_set is None or key != self._wait_set_key:
            count = NumberOfEntities(0, len(guards), len(timers), 0, 0)
            for waitable in waitables:
                count += waitable.get_num_entities()
            self._wait_set = _rclpy.WaitSet(
                count.num_subscriptions, count.num_guard_conditions, count.num_timers,
                count.num_clients, count.num_services, count.num_events, self._context.handle)
            self._wait_set_key = key
        return self._wait_set

    def _fire(self, timer: Timer) -> None:
        """Call a ready timer's callback as rclpy does (with a TimerInfo if it asks for one)."""
        with timer.handle:
            if not timer.handle.is_timer_ready():  # cancelled since the wait
                return
            callback = timer.callback
            info_argument = self._info_argument(callback)
            if info_argument is None:
                timer.handle.call_timer()
                result = callback()
            else:
                info = timer.handle.call_timer_with_info()
                result = callback(**{info_argument: TimerInfo(
                    expected_call_time=info['expected_call_time'],
                    actual_call_time=info['actual_call_time'], clock_type=timer.clock.clock_type)})
        if inspect.iscoroutine(result):
            self.create_task(result)

    def _info_argument(self, callback: Callable[..., Any]) -> str | None:
        """Name of the parameter annotated ``TimerInfo``, as rclpy looks for it; cached."""
        if callback not in self._wants_info:
            self._wants_info[callback] = next(
                (p.name for p in inspect.signature(callback).parameters.values()
                 if p.annotation is TimerInfo), None)
        return self._wants_info[callback]


async def _execute(waitable: Waitable, data: Any) -> None:
    await waitable.execute(data)


def _is_lean(node: Node) -> bool:
    """Say whether this executor's own loop serves everything the node has."""
    entities = (node.subscriptions, node.clients, node.services, node.guards)  # iterators
    return not any(next(iter(kind), None) is not None for kind in entities)


def _timeout_ns(timeout_sec: float | None) -> int:
    return -1 if timeout_sec is None or timeout_sec < 0 else int(timeout_sec * 1e9)
