"""
Subscriptions taken as serialized bytes on a thread of their own, with the GIL released.

rclpy takes every message with the GIL held, in its C++ code: for a 50 MB image that is about
90 ms during which no other thread of the process runs (the time-step's timers included), and
``raw=True`` does not help (the serialized bytes are copied into fresh memory twice, as much page
faulting as the message path). Here ``rcl_take_serialized_message`` is called through ctypes,
which releases the GIL for the call, into buffers kept for reuse: the copy (and DDS's own) runs
beside the Python threads, and the callback gets a read-only view of the bytes.

A buffer goes back to its subscription's pool once nothing refers to it (no view, no array made
from one), so an observation a user keeps is never overwritten; pools keep two spare buffers.

The subscriptions live on a node of their own that no executor spins (an executor would take
their messages itself); a thread waits on them with an rcl wait set, which releases the GIL too.
Only the rcl C API is called, with the addresses rclpy's handles give: ``rcl`` and ``rcutils``
are found among the libraries rclpy already loaded, and never loaded a second time.
"""

import contextlib
import ctypes
import os
import sys
import threading
from typing import Any, Callable
import weakref

from rclpy.context import Context
from rclpy.guard_condition import GuardCondition
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rclpy.subscription import Subscription
from rtgym_ros.ros.parameters import named

_WAIT_NS = 100_000_000  # the longest a stop request waits to be noticed if the wake is missed
_SPARE_BUFFERS = 2
_RCL_RET_OK = 0
_RCL_RET_SUBSCRIPTION_TAKE_FAILED = 401  # no message to take


class _Allocator(ctypes.Structure):
    _fields_ = [('allocate', ctypes.c_void_p), ('deallocate', ctypes.c_void_p),
                ('reallocate', ctypes.c_void_p), ('zero_allocate', ctypes.c_void_p),
                ('state', ctypes.c_void_p)]


class _SerializedMessage(ctypes.Structure):
    """rcl_serialized_message_t (rcutils_uint8_array_t)."""

    _fields_ = [('buffer', ctypes.c_void_p), ('buffer_length', ctypes.c_size_t),
                ('buffer_capacity', ctypes.c_size_t), ('allocator', _Allocator)]


class _ErrorString(ctypes.Structure):
    _fields_ = [('str', ctypes.c_char * 1024)]


def _loaded_library(name: str) -> ctypes.CDLL:
    """Return a library rclpy already loaded (RTLD_NOLOAD: never a second copy)."""
    if sys.platform.startswith('linux'):
        filename = f'lib{name}.so'
    elif sys.platform == 'darwin':
        filename = f'lib{name}.dylib'
    else:
        raise OSError(f'serialized takes are implemented for Linux and macOS, not {sys.platform}')
    return ctypes.CDLL(filename, mode=os.RTLD_NOLOAD)


class RclSerializedTake:
    """``rcl_take_serialized_message`` and rcutils' byte arrays, called without the GIL."""

    def __init__(self) -> None:
        """
        Bind the functions; raise OSError when rclpy's rcl cannot be found in the process.

        rclpy is imported by this module, so its libraries are loaded when this runs.
        """
        rcl = _loaded_library('rcl')
        rcutils = _loaded_library('rcutils')
        self._take = rcl.rcl_take_serialized_message
        self._take.argtypes = [ctypes.c_void_p, ctypes.POINTER(_SerializedMessage),
                               ctypes.c_void_p, ctypes.c_void_p]
        self._take.restype = ctypes.c_int
        self._init = rcutils.rcutils_uint8_array_init
        self._init.argtypes = [ctypes.POINTER(_SerializedMessage), ctypes.c_size_t,
                               ctypes.POINTER(_Allocator)]
        self._init.restype = ctypes.c_int
        self._fini = rcutils.rcutils_uint8_array_fini
        self._fini.argtypes = [ctypes.POINTER(_SerializedMessage)]
        self._fini.restype = ctypes.c_int
        default_allocator = rcutils.rcutils_get_default_allocator
        default_allocator.restype = _Allocator
        self._allocator = default_allocator()
        self._error = rcutils.rcutils_get_error_string
        self._error.restype = _ErrorString
        self._reset_error = rcutils.rcutils_reset_error

    def new_message(self, capacity: int = 0) -> _SerializedMessage:
        message = _SerializedMessage()
        ret = self._init(ctypes.byref(message), capacity, ctypes.byref(self._allocator))
        if ret != _RCL_RET_OK:
            raise MemoryError(f'rcutils_uint8_array_init of {capacity} bytes failed ({ret}): '
                              f'{self._last_error()}')
        return message

    def free_message(self, message: _SerializedMessage) -> None:
        self._fini(ctypes.byref(message))

    def take(self, subscription: int, message: _SerializedMessage) -> bool:
        """
        Take the next message of ``subscription`` (an ``rcl_subscription_t *``) into ``message``.

        Return False when there was none. The buffer grows when the message needs it.
        """
        ret = self._take(subscription, ctypes.byref(message), None, None)
        if ret == _RCL_RET_OK:
            return True
        if ret == _RCL_RET_SUBSCRIPTION_TAKE_FAILED:
            return False
        raise RuntimeError(f'rcl_take_serialized_message failed ({ret}): {self._last_error()}')

    def _last_error(self) -> str:
        text = self._error().str.decode(errors='replace')
        self._reset_error()
        return text


class SerializedBuffers:
    """Buffers for one subscription's takes, each reused once no view of it is left."""

    def __init__(self, rcl: RclSerializedTake, *, spare: int = _SPARE_BUFFERS) -> None:
        self._rcl = rcl
        self._spare = spare
        self._free: list[_SerializedMessage] = []
        # Reentrant: a collection while the lock is held may drop the last view of a buffer.
        self._lock = threading.RLock()
        self._closed = False
        self.made = 0
        """How many buffers were made (a measure of reuse, for tests and benchmarks)."""

    def take(self, fill: Callable[[_SerializedMessage], bool]) -> memoryview | None:
        """
        Fill a free buffer with ``fill(buffer)``; return a read-only view, or None if it failed.

        The view (and whatever is made from it) keeps the buffer from being reused.
        """
        with self._lock:
            message = self._free.pop() if self._free else None
        if message is None:
            message = self._rcl.new_message()
            self.made += 1
        try:
            filled = fill(message)
        except BaseException:
            self._give_back(message)
            raise
        if not filled:
            self._give_back(message)
            return None
        array = (ctypes.c_uint8 * message.buffer_length).from_address(message.buffer)
        weakref.finalize(array, self._give_back, message).atexit = False
        return memoryview(array).toreadonly()

    def _give_back(self, message: _SerializedMessage) -> None:
        """Any thread (the one that dropped the last view): keep the buffer, or free it."""
        with self._lock:
            if not self._closed and len(self._free) < self._spare:
                self._free.append(message)
                return
        self._rcl.free_message(message)

    def close(self) -> None:
        """Free the spare buffers; buffers still viewed are freed when their views go."""
        with self._lock:
            self._closed = True
            free, self._free = self._free, []
        for message in free:
            self._rcl.free_message(message)


class _Entry:

    def __init__(self, subscription: Any, buffers: SerializedBuffers,
                 callback: Callable[[memoryview], None]) -> None:
        self.subscription = subscription
        self.buffers = buffers
        self.callback = callback


class SerializedReceiver:
    """
    Serialized subscriptions of one context, taken by one thread with the GIL released.

    The node and the thread are made at the first :meth:`subscribe`. A callback that raises ends
    the thread and is reported to ``on_failure`` (as a failed executor thread is).
    """

    def __init__(self, context: Context, *, node_name: str, namespace: str = '',
                 on_failure: Callable[[BaseException], None] | None = None) -> None:
        """
        Bind rcl; raise OSError when serialized takes are not possible in this process.

        :param node_name: name of the node that holds the subscriptions (never spun).
        :param on_failure: called on the receiving thread when a take or a callback raised.
        """
        self._rcl = RclSerializedTake()
        self._context = context
        self._node_args = (node_name, namespace)
        self._on_failure = on_failure
        self._node: Node | None = None
        self._wake: GuardCondition | None = None
        self._thread: threading.Thread | None = None
        self._entries: list[_Entry] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.failure: BaseException | None = None

    def subscribe(self, msg_type: type, topic: str, callback: Callable[[memoryview], None],
                  qos_profile: QoSProfile) -> Subscription:
        """
        Subscribe to ``topic``; ``callback(view)`` gets each message's CDR bytes, read-only.

        The callback runs on the receiving thread; the view stays valid as long as it (or an
        array made from it) is referred to. Returns the rclpy subscription (for its matched
        publishers; nothing takes from it but this receiver).
        """
        with self._lock:
            if self._stop.is_set():
                raise RuntimeError('the serialized receiver is closed')
            if self._node is None:
                self._start()
            subscription = self._node.create_subscription(
                msg_type, topic, _never_called, qos_profile, raw=True)
            self._entries.append(_Entry(subscription, SerializedBuffers(self._rcl), callback))
        self._wake.trigger()
        return subscription

    def _start(self) -> None:
        name, namespace = self._node_args
        # A local __node rule: a global one (agent --ros-args -r __node:=x) names the env's
        # node, and would name this one the same. No clock is kept here: use_sim_time is off.
        self._node = Node(name, namespace=namespace, context=self._context,
                          cli_args=named(name),
                          start_parameter_services=False, parameter_overrides=[
                              Parameter('use_sim_time', Parameter.Type.BOOL, False),
                              Parameter('start_type_description_service',
                                        Parameter.Type.BOOL, False)])
        self._wake = GuardCondition(None, None, context=self._context)
        self._thread = threading.Thread(target=self._run, name=f'rtgym_ros:{name}', daemon=True)
        self._thread.start()

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and self._context.ok():
                for entry in self._wait():
                    if not self._stop.is_set():
                        self._drain(entry)
        except BaseException as error:  # recorded, reported; waiting callers re-raise it
            if self._stop.is_set():  # a close that did not wait destroyed the handles: no failure
                return
            self.failure = error
            if self._on_failure is not None:
                self._on_failure(error)

    def _wait(self) -> list[_Entry]:
        """
        Wait for messages (without the GIL); return the entries that have some.

        Every handle waited on is held for the wait: rclpy then defers a destroy (a close whose
        join timed out, a context destroyed) until the wait returns, instead of freeing what
        ``rcl_wait`` is using.
        """
        with self._lock:
            entries = list(self._entries)
        with contextlib.ExitStack() as held:
            held.enter_context(self._context.handle)
            held.enter_context(self._wake.handle)
            for entry in entries:
                held.enter_context(entry.subscription.handle)
            wait_set = _rclpy.WaitSet(len(entries), 1, 0, 0, 0, 0, self._context.handle)
            for entry in entries:
                wait_set.add_subscription(entry.subscription.handle)
            wait_set.add_guard_condition(self._wake.handle)
            wait_set.wait(_WAIT_NS)
            ready = set(wait_set.get_ready_entities('subscription'))
            return [entry for entry in entries if entry.subscription.handle.pointer in ready]

    def _drain(self, entry: _Entry) -> None:
        """Take every message waiting (each copy without the GIL), newest last."""
        handle = entry.subscription.handle
        while not self._stop.is_set():
            with handle:
                view = entry.buffers.take(lambda message: self._rcl.take(handle.pointer, message))
            if view is None:
                return
            entry.callback(view)

    def close(self, *, timeout: float = 5.0) -> None:
        """Stop and join the thread, destroy the subscriptions and the node. Idempotent."""
        with self._lock:
            already = self._stop.is_set()
            self._stop.set()
        if already or self._node is None:
            return
        try:
            self._wake.trigger()
        except Exception:  # a context already shut down: the wait returns on its own
            pass
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        for entry in self._entries:
            entry.buffers.close()
        self._wake.destroy()
        self._node.destroy_node()


def _never_called(_: Any) -> None:
    """Stand in for a callback: no executor spins the node, the receiving thread takes."""
