"""
``BagWriter``: messages into a rosbag2 directory (MCAP storage), from a thread of its own.

Whoever records (a subscription callback, the time-step's publisher, ``step()``) only puts a
reference to the message in a bounded queue, which never blocks: when the queue is full the
message is dropped and counted. The writer thread serializes it to CDR
(``rclpy.serialization.serialize_message``, what ``ros2 bag record`` stores) and writes it
with rosbags; ``close()`` drains the queue and writes the bag's index and ``metadata.yaml``.

rosbags keeps the MCAP chunk being filled in memory (up to 1 MiB) and the file behind a
buffer: a process killed before ``close()`` would leave an empty file. So the writer thread
ends the chunk and flushes the file at least every ``FLUSH_PERIOD`` seconds: a killed process
loses at most that much, and ``ros2 bag reindex`` (or ``mcap recover``) reads the rest.
"""

from collections import Counter
import json
from pathlib import Path
import queue
import threading
import time
from typing import Any, Callable

from rclpy.qos import QoSProfile
from rclpy.serialization import serialize_message
from rosbags.interfaces import (Qos, QosDurability, QosHistory, QosLiveliness, QosReliability,
                                QosTime)
from rosbags.rosbag2 import StoragePlugin, Writer
from rtgym_ros.record.message_types import cdr_size, describe

_POLL = 0.1  # s: how often an idle writer thread looks for close()
FLUSH_PERIOD = 1.0
"""Seconds a written message may stay in memory, at most, before it is in the file."""


class BagWriter:
    """A rosbag2 (MCAP) being written: topics declared first, then messages from any thread."""

    def __init__(self, path: str | Path, *, queue_size: int = 1000) -> None:
        self.path = Path(path)
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._lock = threading.Lock()  # the rosbags writer: topics declared vs messages written
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._connections: list[Any] = []
        self._sizes: list[Callable[[Any], int]] = []
        self._topics: list[str] = []
        self._dropped: Counter = Counter()
        self._drop_lock = threading.Lock()
        self._closing = threading.Event()
        self._closed = False
        self._can_flush = True  # False: this rosbags version has not the internals it uses
        self.written = 0
        self.failed = 0
        """Messages (or flushes) that could not be serialized or written (``error``: the first)."""
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name=f'rtgym_ros bag {self.path.name}',
                                        daemon=True)
        self._thread.start()

    def add_topic(self, topic: str, msg_type: type, *, qos: QoSProfile | None = None) -> int:
        """
        Declare a topic of ``msg_type`` (once: again, the same id); return its id.

        ``qos``: the topic's offered QoS in the bag's metadata, which ``ros2 bag play`` offers
        when it replays the topic (none: its own default, reliable and volatile).
        """
        name, msgdef, rihs01 = describe(msg_type, key=f'record: topic {topic}')
        with self._lock:
            for topic_id, connection in enumerate(self._connections):
                if (connection.topic, connection.msgtype) == (topic, name):
                    return topic_id
            self._connections.append(self._writer.add_connection(
                topic, name, msgdef=msgdef, rihs01=rihs01, serialization_format='cdr',
                offered_qos_profiles=() if qos is None else (bag_qos(qos),)))
            self._sizes.append(cdr_size(name))
            self._topics.append(topic)
            return len(self._connections) - 1

    def write(self, topic_id: int, time_ns: int, message: Any) -> bool:
        """
        Any thread, never blocks: queue ``message`` (a ROS message) stamped ``time_ns``.

        Returns False when it was dropped (the queue is full, or the bag is closed).
        """
        return self._put((topic_id, time_ns, message))

    def write_later(self, topic_id: int, time_ns: int, build: Callable[[], Any]) -> bool:
        """Like :meth:`write`, but the writer thread builds the message with ``build()``."""
        return self._put((topic_id, time_ns, build))

    def _put(self, item: tuple) -> bool:
        if not self._closing.is_set():
            try:
                self._queue.put_nowait(item)
                return True
            except queue.Full:
                pass
        with self._drop_lock:
            self._dropped[self._topics[item[0]]] += 1
        return False

    @property
    def dropped(self) -> dict[str, int]:
        """Messages not written, by topic (the queue was full, or they came after close)."""
        with self._drop_lock:
            return dict(self._dropped)

    def _run(self) -> None:
        flushed = time.monotonic()
        while not (self._closing.is_set() and self._queue.empty()):
            if self._can_flush and time.monotonic() - flushed >= FLUSH_PERIOD:
                self._flush()
                flushed = time.monotonic()
            try:
                topic_id, time_ns, message = self._queue.get(timeout=_POLL)
            except queue.Empty:
                continue
            try:
                if callable(message):
                    message = message()
                data = serialize_message(message)
                data = data[:self._sizes[topic_id](message)]  # the estimate's padding cut off
                with self._lock:
                    self._writer.write(self._connections[topic_id], time_ns, data)
                self.written += 1
            except Exception as error:  # noqa: B902 - counted, reported by close()
                self.failed += 1
                self.error = self.error or error

    def _flush(self) -> None:
        """End the MCAP chunk being filled (if it holds a message) and flush the file."""
        try:
            with self._lock:
                storage = self._writer.storage
                chunk = getattr(storage, 'chunk', None)
                if chunk is None or not chunk.msgs:
                    return
                storage.close_chunk()
                storage.bio.flush()
        except AttributeError:  # rosbags' MCAP writer of another version (its internals)
            self._can_flush = False
        except Exception as error:  # noqa: B902 - counted, reported by close()
            self.failed += 1
            self.error = self.error or error

    def discard(self) -> None:
        """Stop the writer thread and remove the bag: nothing was recorded (the env failed)."""
        self._closing.set()
        self._thread.join(_POLL * 10)
        self._closed = True
        with self._lock:
            self._writer.abort()
        try:
            (self.path / f'{self.path.name}.mcap').unlink()
            self.path.rmdir()
        except OSError:
            pass  # not ours to remove (something else put a file there)

    def close(self, *, timeout: float = 30.0) -> bool:
        """
        Write what is queued, then the bag's index and ``metadata.yaml``; idempotent.

        Returns False if the writer thread did not finish within ``timeout`` (the bag then
        has no ``metadata.yaml``: ``ros2 bag reindex`` rebuilds it).
        """
        if self._closed:
            return True
        self._closing.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        self._closed = True
        with self._lock:
            dropped = self.dropped
            if dropped:
                self._writer.set_custom_data('rtgym_ros.dropped', json.dumps(dropped))
            self._writer.close()
        return True


def bag_qos(qos: QoSProfile) -> Qos:
    """Return ``qos`` as rosbag2's metadata writes a QoS (rmw's values, durations in s + ns)."""
    def duration(value: object) -> QosTime:
        nanoseconds = getattr(value, 'nanoseconds', 0)
        return QosTime(nanoseconds // 1_000_000_000, nanoseconds % 1_000_000_000)

    return Qos(history=QosHistory(int(qos.history)), depth=int(qos.depth),
               reliability=QosReliability(int(qos.reliability)),
               durability=QosDurability(int(qos.durability)), deadline=duration(qos.deadline),
               lifespan=duration(qos.lifespan), liveliness=QosLiveliness(int(qos.liveliness)),
               liveliness_lease_duration=duration(qos.liveliness_lease_duration),
               avoid_ros_namespace_conventions=bool(qos.avoid_ros_namespace_conventions))
