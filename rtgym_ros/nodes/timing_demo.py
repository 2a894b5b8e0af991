"""
Run the env on a dummy interface and print how precisely it kept the time-step.

``timing_demo [--rate HZ] [--steps N] [--load sleep|numpy|python|idle]`` — a short check
that a machine (and its DDS setup) can hold the real-time schedule, before a robot is involved.
``benchmarks/step_timing.py`` measures with the same interface and agent loads, on rtgym too.
"""

import argparse
import math
import sys
import time
from typing import Any, Callable
import warnings

import gymnasium as gym
import gymnasium.spaces as spaces
import numpy as np

import rtgym_ros
from rtgym_ros import RealTimeGymInterface
from rtgym_ros.core.timing import capture_spacing_errors

LOADS = ('sleep', 'numpy', 'python', 'idle')
MATRIX_SIZE = 64  # the 'numpy' load multiplies two matrices this size
CACHE_LINE = 64  # bytes: where the 'numpy' load's matrices start
PYTHON_CHUNK = 100  # loop iterations between two clock reads in the 'python' load


def clock_reading_interface(base: type = RealTimeGymInterface) -> type:
    """Build, on ``base`` (ours or rtgym's), an interface that only records when it is called."""

    class ClockReadingInterface(base):
        """Observes nothing but the instant of each capture; sends nothing but notes when."""

        def __init__(self, captures: list | None = None, sends: list | None = None) -> None:
            self.capture_times = [] if captures is None else captures
            self.send_times = [] if sends is None else sends

        def send_control(self, control: Any) -> None:
            self.send_times.append(time.perf_counter())

        def reset(self, seed: int | None = None, options: dict | None = None):
            return [np.zeros(1, dtype=np.float32)], {}

        def get_obs_rew_terminated_info(self):
            self.capture_times.append(time.perf_counter())
            return [np.zeros(1, dtype=np.float32)], 0.0, False, {}

        def get_observation_space(self):
            return spaces.Tuple((spaces.Box(-1.0, 1.0, (1,), dtype=np.float32),))

        def get_action_space(self):
            return spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)

        def get_default_action(self) -> np.ndarray:
            return np.zeros(1, dtype=np.float32)

    return ClockReadingInterface


ClockReadingInterface = clock_reading_interface()


def make_load(name: str) -> Callable[[float], int]:
    """
    Return a stand-in for policy inference: ``load(seconds)`` works that long, counts the work.

    ``sleep`` releases the GIL, ``numpy`` mostly does (matmul), ``python`` holds it, ``idle``
    returns at once.
    """
    if name == 'sleep':
        return _sleep_load
    if name == 'numpy':
        return _make_numpy_load()
    if name == 'python':
        return _python_load
    if name == 'idle':
        return lambda duration: 0
    raise ValueError(f'load must be one of {LOADS}, got {name!r}')


def _sleep_load(duration: float) -> int:
    time.sleep(duration)
    return 0


def cache_aligned(values: np.ndarray) -> np.ndarray:
    """
    Return a copy of ``values`` whose data starts on a cache line.

    numpy aligns its arrays to 16 bytes, so where a matrix starts depends on what the process
    allocated before it; OpenBLAS multiplies by a 64x64 float64 matrix that starts off a cache
    line about 15 % slower. Unaligned, each process's agent would run at one speed or the
    other by chance, and two envs' runs would differ by it.
    """
    raw = np.empty(values.nbytes + CACHE_LINE, dtype=np.uint8)
    start = -raw.ctypes.data % CACHE_LINE
    aligned = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    aligned[...] = values
    return aligned


def numpy_operands() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the ``numpy`` load's two matrices and its output, the same in every process."""
    rng = np.random.default_rng(0)
    shape = (MATRIX_SIZE, MATRIX_SIZE)
    return (cache_aligned(rng.random(shape)), cache_aligned(rng.random(shape)),
            cache_aligned(np.zeros(shape)))


def _make_numpy_load() -> Callable[[float], int]:
    a, b, out = numpy_operands()

    def load(duration: float) -> int:
        deadline = time.perf_counter() + duration
        count = 0
        while time.perf_counter() < deadline:
            np.matmul(a, b, out=out)
            count += 1
        return count

    return load


def _python_load(duration: float) -> int:
    deadline = time.perf_counter() + duration
    count = 0
    while time.perf_counter() < deadline:
        total = 0
        for i in range(PYTHON_CHUNK):
            total += i
        count += PYTHON_CHUNK
    return count


def _positive(kind: type) -> Callable[[str], Any]:
    """Return an argparse type: a finite ``kind`` > 0, refused as a usage error otherwise."""
    def parse(text: str) -> Any:
        value = kind(text)
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f'must be a finite number > 0, got {text!r}')
        return value

    parse.__name__ = kind.__name__  # argparse names it in "invalid float value: 'x'"
    return parse


def main(args: list[str] | None = None) -> int:
    # Imported here: step_timing imports this module into rtgym's processes, which load no rclpy.
    from rclpy.utilities import remove_ros_args

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument('--rate', type=_positive(float), default=100.0,
                        help='time-steps per second')
    parser.add_argument('--steps', type=_positive(int), default=1000, help='time-steps to run')
    parser.add_argument('--load', choices=LOADS, default='sleep',
                        help='what the agent does for half a step between steps')
    options = parser.parse_args(remove_ros_args(sys.argv if args is None else args)[1:])

    period = 1.0 / options.rate
    config = dict(rtgym_ros.DEFAULT_CONFIG_DICT, interface=ClockReadingInterface,
                  time_step_duration=period, start_obs_capture=period,
                  ep_max_length=options.steps, benchmark=True)
    env = gym.make('rtgym_ros/real-time-gym-v1', config=config, disable_env_checker=True)
    action = np.zeros(1, np.float32)
    load = make_load(options.load)
    print(f'running {options.steps} steps at {options.rate:g} Hz, agent load: {options.load}')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        started = time.perf_counter()
        env.reset()
        truncated = False
        while not truncated:
            load(period / 2)
            *_, truncated, _ = env.step(action)
        wall = time.perf_counter() - started
    timeouts = sum('timed out' in str(w.message) for w in caught)
    errors = capture_spacing_errors(env.unwrapped.interface.capture_times, period,
                                    warmup=min(20, options.steps // 10)) * 1e6
    stats = env.unwrapped.benchmarks()
    env.close()

    print(f'\nwall time {wall:.2f} s for {options.steps} steps '
          f'(nominal {options.steps * period:.2f} s)\n')
    print('| capture spacing error | p50 | p99 | max | time-outs |')
    print('|---|---|---|---|---|')
    print(f'| µs | {np.percentile(errors, 50):.0f} | {np.percentile(errors, 99):.0f} '
          f'| {errors.max():.0f} | {timeouts} |\n')
    print('| duration (running average) | average (ms) | average deviation (ms) |')
    print('|---|---|---|')
    for name, (average, deviation) in stats.items():
        shown = '-' if average is None else f'{average * 1e3:.3f}'
        print(f'| {name} | {shown} | {deviation * 1e3:.3f} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
