"""
The faults ``sim_robot`` injects: latency and jitter on both paths, sensor noise and dropout.

Delayed messages wait in a queue, so jitter never reorders them: a message is never due before
the one sent ahead of it. Times are integer nanoseconds of the node's time base.
"""

from collections import deque
from typing import Any, Deque, List, Optional, Tuple

import numpy as np
from rtgym_ros.nodes.sim_robot.time_bases import to_ns

# The parameters that configure the faults, as keyword arguments of FaultInjector.configure.
OPTIONS = ('command_latency', 'command_jitter', 'sensor_latency', 'sensor_jitter',
           'sensor_noise', 'sensor_dropout')


class _DelayLine:
    """Messages in flight on one path, due in the order they were sent."""

    def __init__(self) -> None:
        self._queue: Deque[Tuple[int, Any]] = deque()
        self._floor = 0
        self.latency_ns = 0
        self.jitter_ns = 0

    def restart(self, t: int) -> None:
        self._queue.clear()
        self._floor = t

    def clear(self) -> None:
        self._queue.clear()

    def put(self, due: int, item: Any) -> None:
        # A later message never overtakes an earlier one: delays are applied in order.
        self._floor = max(due, self._floor)
        self._queue.append((self._floor, item))

    def next_due(self) -> Optional[int]:
        """Return when the oldest message in flight falls due, or None if none is."""
        return self._queue[0][0] if self._queue else None

    def pop_due(self, t: int) -> List[Tuple[int, Any]]:
        due = []
        while self._queue and self._queue[0][0] <= t:
            due.append(self._queue.popleft())
        return due


class FaultInjector:
    """
    Delay commands and measurements (in order), add sensor noise and drop measurements.

    All randomness comes from two seeded generators, one for the sensor path (dropout, noise)
    and one for the delays, so a seed reproduces a run. Not thread-safe: the node calls it with
    its lock held.
    """

    def __init__(self, *, sensor_seed: np.random.SeedSequence,
                 delay_seed: np.random.SeedSequence) -> None:
        """Start with no fault; :meth:`configure` sets them."""
        self._sensor_rng = np.random.default_rng(sensor_seed)
        self._delay_rng = np.random.default_rng(delay_seed)
        self._commands = _DelayLine()
        self._measurements = _DelayLine()
        self._noise = 0.0
        self._dropout = 0.0

    def configure(self, *, command_latency: float, command_jitter: float,
                  sensor_latency: float, sensor_jitter: float, sensor_noise: float,
                  sensor_dropout: float) -> None:
        """Set the faults (the parameters of the same names, in seconds); queues are kept."""
        self._commands.latency_ns = to_ns(command_latency)
        self._commands.jitter_ns = to_ns(command_jitter)
        self._measurements.latency_ns = to_ns(sensor_latency)
        self._measurements.jitter_ns = to_ns(sensor_jitter)
        self._noise = float(sensor_noise)
        self._dropout = float(sensor_dropout)

    def restart(self, t: int) -> None:
        """Forget everything in flight; nothing sent from now on is due before ``t``."""
        self._commands.restart(t)
        self._measurements.restart(t)

    def drop_commands(self) -> None:
        """Forget the commands in flight (the robot goes to its safe state)."""
        self._commands.clear()

    def send_command(self, t: int, command: Any) -> None:
        """Queue a command that arrived at ``t`` behind the command latency and jitter."""
        self._commands.put(t + self._delay(self._commands), command)

    def due_command(self, t: int) -> Optional[Tuple[int, Any]]:
        """Return the latest command due at ``t`` and when it fell due, or None if none is."""
        due = self._commands.pop_due(t)
        return due[-1] if due else None

    def measure(self, *values: np.ndarray) -> Optional[Tuple[np.ndarray, ...]]:
        """Return ``values`` as the sensor reads them: None when dropped, else with noise."""
        if self._dropout > 0.0 and self._sensor_rng.random() < self._dropout:
            return None
        if self._noise > 0.0:
            return tuple(v + self._sensor_rng.normal(0.0, self._noise, v.shape) for v in values)
        return values

    def send_measurement(self, t: int, msg: Any) -> None:
        """Queue the message of a measurement taken at ``t`` behind the sensor delay."""
        self._measurements.put(t + self._delay(self._measurements), msg)

    def due_measurements(self, t: int) -> List[Any]:
        """Return the measurement messages due at ``t``, oldest first."""
        return [msg for _, msg in self._measurements.pop_due(t)]

    def next_measurement_due(self) -> Optional[int]:
        """Return when the oldest measurement in flight falls due, or None if none is."""
        return self._measurements.next_due()

    def _delay(self, line: _DelayLine) -> int:
        if line.jitter_ns <= 0:
            return line.latency_ns
        return line.latency_ns + int(self._delay_rng.uniform(0.0, line.jitter_ns))
