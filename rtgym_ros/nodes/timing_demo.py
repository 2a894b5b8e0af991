"""
Run the env on a dummy interface and print how precisely it kept the time-step.

``timing_demo [--rate HZ] [--steps N] [--load sleep|python|idle]`` — a minute-long check that a
machine (and its DDS setup) can hold the real-time schedule, before a robot is involved.
"""

import argparse
import sys
import time
import warnings

import gymnasium as gym
import gymnasium.spaces as spaces
import numpy as np
from rclpy.utilities import remove_ros_args

import rtgym_ros
from rtgym_ros import RealTimeGymInterface
from rtgym_ros.core.timing import capture_spacing_errors


class ClockReadingInterface(RealTimeGymInterface):
    """Observes nothing but the instant of each capture; controls nothing."""

    def __init__(self) -> None:
        self.capture_times: list[float] = []

    def send_control(self, control) -> None:
        pass

    def reset(self, seed=None, options=None):
        return [np.zeros(1, np.float32)], {}

    def get_obs_rew_terminated_info(self):
        self.capture_times.append(time.perf_counter())
        return [np.zeros(1, np.float32)], 0.0, False, {}

    def get_observation_space(self):
        return spaces.Tuple((spaces.Box(-1.0, 1.0, (1,), np.float32),))

    def get_action_space(self):
        return spaces.Box(-1.0, 1.0, (1,), np.float32)

    def get_default_action(self):
        return np.zeros(1, np.float32)


def agent_work(load: str, seconds: float) -> None:
    """Stand-in for policy inference between two steps."""
    if load == 'sleep':
        time.sleep(seconds)
    elif load == 'python':
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            sum(range(100))


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rate', type=float, default=100.0, help='time-steps per second')
    parser.add_argument('--steps', type=int, default=1000)
    parser.add_argument('--load', choices=('sleep', 'python', 'idle'), default='sleep',
                        help='what the agent does for half a step between steps')
    options = parser.parse_args(remove_ros_args(sys.argv if args is None else args)[1:])

    period = 1.0 / options.rate
    config = dict(rtgym_ros.DEFAULT_CONFIG_DICT, interface=ClockReadingInterface,
                  time_step_duration=period, start_obs_capture=period,
                  ep_max_length=options.steps, benchmark=True)
    env = gym.make('rtgym_ros/real-time-gym-v1', config=config, disable_env_checker=True)
    action = np.zeros(1, np.float32)
    print(f'running {options.steps} steps at {options.rate:g} Hz, agent load: {options.load}')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        started = time.perf_counter()
        env.reset()
        truncated = False
        while not truncated:
            agent_work(options.load, period / 2)
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
