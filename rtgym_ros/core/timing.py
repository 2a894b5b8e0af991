"""
Timing statistics of the env, with the keys and meaning of rtgym 0.16's benchmarks.

Durations are wall-clock (``time.perf_counter``) even under sim time: they measure the cost of
the env and of the agent on this machine, not the simulated schedule.

:func:`capture_spacing_errors` is the figure of how well the schedule held, as the timing demo,
the agent node and the benchmarks report it.
"""

from collections.abc import Sequence
import threading
import time

import numpy as np

DURATION_KEYS = ('time_step_duration', 'step_duration', 'join_duration',
                 'inference_duration', 'send_control_duration', 'get_obs_duration')


class Benchmark:
    """
    The events rtgym's env marks, one method each; what is kept depends on the subclass.

    A step is ``start_step`` (agent's action arrives), ``end_step_join`` (time-step done),
    ``end_step`` (step returns); inside the time-step: ``send_control`` and ``get_obs``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def _mark(self, event: str, *, since: str | None = None, key: str | None = None) -> None:
        """Record ``event`` now; ``key`` names the duration measured from ``since``."""
        raise NotImplementedError

    def start_step_time(self) -> None:
        self._mark('start_step', since='end_step', key='inference_duration')

    def end_step_join_time(self) -> None:
        self._mark('end_step_join', since='start_step', key='join_duration')

    def end_step_time(self) -> None:
        self._mark('end_step', since='start_step', key='step_duration')

    def start_send_control_time(self) -> None:
        self._mark('start_send_control', since='start_send_control', key='time_step_duration')

    def end_send_control_time(self) -> None:
        self._mark('end_send_control', since='start_send_control', key='send_control_duration')

    def start_get_obs_time(self) -> None:
        self._mark('start_get_obs')

    def end_get_obs_time(self) -> None:
        self._mark('end_get_obs', since='start_get_obs', key='get_obs_duration')

    def start_reset_time(self) -> None:
        """Mark a reset's start (kept by the trace type only, as in rtgym)."""

    def end_reset_join_time(self) -> None:
        """Mark a reset's join (kept by the trace type only, as in rtgym)."""

    def end_reset_time(self) -> None:
        """Mark a reset's end (kept by the trace type only, as in rtgym)."""

    def get_benchmark_dict(self) -> dict:
        raise NotImplementedError


class PolyakBenchmark(Benchmark):
    """Running average and average deviation of each duration (rtgym's ``polyak`` type)."""

    def __init__(self, *, polyak: float = 0.1) -> None:
        super().__init__()
        self.polyak = polyak
        self._last: dict[str, float] = {}
        self._stats: dict[str, tuple[float | None, float]] = {k: (None, 0.0)
                                                              for k in DURATION_KEYS}

    def _update(self, key: str, value: float) -> None:
        average, deviation = self._stats[key]
        if average is None:
            self._stats[key] = (value, 0.0)
            return
        delta = value - average
        self._stats[key] = (average + self.polyak * delta,
                            deviation + self.polyak * (abs(delta) - deviation))

    def _mark(self, event: str, *, since: str | None = None, key: str | None = None) -> None:
        with self._lock:
            now = time.perf_counter()
            if since is not None and since in self._last:
                self._update(key, now - self._last[since])
            self._last[event] = now

    def get_benchmark_dict(self) -> dict:
        """``{name: (average, average_deviation)}`` in seconds; average is None until seen."""
        with self._lock:
            return dict(self._stats)


TRACE_EVENTS = ('start_step', 'end_step_join', 'end_step', 'start_get_obs', 'end_get_obs',
                'start_send_control', 'end_send_control')


class TraceBenchmark(Benchmark):
    """Every timestamp, kept (rtgym's ``trace`` type); a reset counts as a step."""

    def __init__(self) -> None:
        super().__init__()
        self._trace: dict[str, list[float]] = {event: [] for event in TRACE_EVENTS}

    def _mark(self, event: str, *, since: str | None = None, key: str | None = None) -> None:
        with self._lock:
            self._trace[event].append(time.perf_counter())

    def start_reset_time(self) -> None:
        self.start_step_time()

    def end_reset_join_time(self) -> None:
        self.end_step_join_time()

    def end_reset_time(self) -> None:
        self.end_step_time()

    def get_benchmark_dict(self) -> dict:
        """``{'clock': {event: times}, 'deltas': {name: durations}}``, deltas once 2+ steps."""
        with self._lock:
            clock = {event: np.array(times) for event, times in self._trace.items()}
        result: dict = {'clock': clock}
        if min(len(times) for times in clock.values()) > 1:
            result['deltas'] = {
                'step_duration': _paired(clock['end_step'], clock['start_step']),
                'join_duration': _paired(clock['end_step_join'], clock['start_step']),
                'inference_duration': (clock['start_step'][1:len(clock['end_step'])]
                                       - clock['end_step'][:-1]),
                'send_control_duration': _paired(clock['end_send_control'],
                                                 clock['start_send_control']),
                'get_obs_duration': _paired(clock['end_get_obs'], clock['start_get_obs']),
                'time_step_duration': np.diff(clock['start_step']),
            }
        return result


def _paired(ends: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """End minus start for each end (a start may still be waiting for its end)."""
    return ends - starts[:len(ends)]


def make_benchmark(benchmark_type: str, *, polyak: float) -> Benchmark:
    """Build the benchmark named by the ``benchmark_type`` config key."""
    if benchmark_type == 'trace':
        return TraceBenchmark()
    return PolyakBenchmark(polyak=polyak)


def capture_spacing_errors(capture_times: Sequence[float] | np.ndarray, period: float, *,
                           warmup: int = 0) -> np.ndarray:
    """
    Return how far each gap between two observation captures is from the time-step, in s.

    ``|t[k+1] - t[k] - period|`` for the captures after the first ``warmup``; a missing capture
    (NaN) gives NaN errors.
    """
    times = np.asarray(capture_times, dtype=np.float64)[warmup:]
    return np.abs(np.diff(times) - period)
