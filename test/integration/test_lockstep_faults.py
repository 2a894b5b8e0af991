"""
Lockstep against a simulator that misbehaves: the env keeps its grid and the agent's actions.

The simulator runs the agent's actions, not the safe one, on the env's time grid. It is
``scripted_sim``, its own process: it advances only when asked, like a paused Gazebo world,
and drops a request, restarts by itself, steps in physics steps that do not divide the
time-step, or runs free after an unpause, on cue.
"""

import json
import os
from pathlib import Path
import subprocess
import sys
import threading
import time
from typing import Any

from emulated_robots import CHILD_ENV, next_name, write_config
import gymnasium as gym
import numpy as np
import pytest
import rtgym_ros  # noqa: F401
from rtgym_ros.robot import services

SUPPORT = Path(__file__).resolve().parents[1] / 'support'
T = 0.02


class Sim:
    """``scripted_sim`` in its own process; ``lines`` is what it logged (calls, commands)."""

    def __init__(self, **options: Any) -> None:
        self.ns = f'/scripted_{next_name()}'
        env = dict(CHILD_ENV, PYTHONPATH=os.pathsep.join([str(SUPPORT), CHILD_ENV['PYTHONPATH']]))
        self._process = subprocess.Popen(
            [sys.executable, str(SUPPORT / 'scripted_sim.py'), json.dumps(options),
             '--ros-args', '-r', f'__ns:={self.ns}'],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        assert self._ready.wait(30.0), f'scripted_sim did not start:\n{self.output()}'

    def _read(self) -> None:
        for line in self._process.stdout:
            self.lines.append(line.strip())
            if line.strip() == 'READY':
                self._ready.set()

    def output(self) -> str:
        return '\n'.join(self.lines)

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(10.0)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


@pytest.fixture
def start_sim():
    sims: list[Sim] = []

    def start(**options: Any) -> Sim:
        sims.append(Sim(**options))
        return sims[-1]

    yield start
    for sim in sims:
        sim.stop()


def robot_params(**changes: Any) -> dict:
    params = {
        'use_sim_time': True, 'stepping': 'lockstep', 'step': {'topic': 'step_until'},
        'time_step_duration': T, 'start_obs_capture': T, 'time_step_timeout_factor': 1.0,
        'act_buf_len': 1, 'ep_max_length': 10, 'watchdog_timeout': 0.5,
        'clock_stall_timeout': 3.0, 'reset_timeout': 5.0,
        'clock_wait_timeout': 30.0,  # the simulator started with the env: slow discovery
        'actions': {'names': ['cmd'], 'cmd': {
            'topic': 'cmd', 'type': 'std_msgs/msg/Float64MultiArray', 'field': 'data',
            'low': [-100.0], 'high': [100.0], 'default': [0.0]}},
        'observations': {'names': ['s'], 's': {
            'topic': 'state', 'type': 'sensor_msgs/msg/JointState', 'joint_names': ['j'],
            'fields': ['position'], 'qos': 'reliable', 'max_age': 0.05, 'on_stale': 'flag'}},
        'reset': {'service': 'reset_simulation', 'type': 'std_srvs/srv/Empty'}}
    params.update(changes)
    return params


def sim_times(sim: Sim, tmp_path: Path, *, steps: int, episodes: int = 1,
              **changes: Any) -> tuple[list[list[float]], Any]:
    """Run episodes of actions 1, 2, 3, ...; return the simulator times observed, and the env."""
    config = write_config(tmp_path / 'robot.yaml', robot_params(**changes))
    env = gym.make('rtgym_ros/ros-v1', robot_config=str(config), namespace=sim.ns,
                   disable_env_checker=True)
    try:
        runs = []
        for _ in range(episodes):
            obs, _ = env.reset()
            times = [float(obs['s'][0])]
            for k in range(steps):
                obs, *_ = env.step(np.array([k + 1.0], np.float32))
                times.append(float(obs['s'][0]))
            runs.append(times)
        return runs, env.unwrapped
    except Exception as error:
        raise AssertionError(f'{error!r}\nscripted_sim:\n{sim.output()}') from error
    finally:
        env.close()


def test_a_physics_step_that_does_not_divide_the_time_step(start_sim, tmp_path):
    # 3 ms physics steps, T = 20 ms: each target is reached up to one physics step late,
    # never short of it (which would leave the env waiting for a clock nobody moves).
    sim = start_sim(dt_ns=3_000_000)
    [times], env = sim_times(sim, tmp_path, steps=8, step={
        'service': 'step', 'type': 'lifecycle_msgs/srv/ChangeState',
        'steps_field': 'transition.id', 'step_size': 0.003})
    for k, time_ in enumerate(times[1:], start=1):
        assert k * T - 1e-6 <= time_ < k * T + 0.003, (k, times)  # float32 observations
    assert env.timeouts == 0


def test_a_dropped_step_request_does_not_send_the_safe_action(start_sim, tmp_path):
    # The env asks again after half a second without /clock; meanwhile the simulator is
    # paused and waits for the env: the agent has not stalled.
    sim = start_sim(drop=[3])
    _, env = sim_times(sim, tmp_path, steps=6)
    commands = [float(line.split()[1]) for line in sim.lines if line.startswith('cmd ')]
    first = commands.index(1.0)  # before: the reset's default action
    assert commands[first:first + 6] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], sim.output()
    assert env.stalls == 0


def test_a_step_service_that_answers_but_does_not_advance_is_named(start_sim, tmp_path):
    sim = start_sim(drop=[2])  # it answers, with success, and does not advance
    with pytest.raises(AssertionError) as error:
        sim_times(sim, tmp_path, steps=4, clock_stall_timeout=1.0, step={
            'service': 'step', 'type': 'lifecycle_msgs/srv/ChangeState',
            'steps_field': 'transition.id', 'step_size': 0.001})
    assert 'TimeoutError' in str(error.value) and '/clock has not moved' in str(error.value)
    assert f'the last step request: {sim.ns}/step asked for 20 physics steps to t = 0.06 s: ' \
        'answered' in str(error.value), str(error.value)


def test_a_simulator_that_restarts_by_itself_is_followed(start_sim, tmp_path):
    sim = start_sim(restart_at=4)
    [times], env = sim_times(sim, tmp_path, steps=8)
    drops = [k for k in range(1, len(times)) if times[k] < times[k - 1]]
    assert len(drops) == 1, f'{times}\nscripted_sim:\n{sim.output()}'
    after = times[drops[0]:]
    assert after == pytest.approx([T * (k + 1) for k in range(len(after))], abs=1e-6), \
        f'{times}\nscripted_sim:\n{sim.output()}'
    assert env.timeouts == 0 and env.stalls == 0


def test_a_reset_waits_for_a_state_publisher_that_comes_up_late(start_sim, tmp_path):
    # The paused simulator announces its reset state once: asked before the env's
    # subscription knew the publisher, that state would be lost and reset() would time out.
    sim = start_sim(state_after=1.0)
    [times], env = sim_times(sim, tmp_path, steps=2)
    assert times == pytest.approx([0.0, T, 2 * T], abs=1e-6), times


def test_no_pause_or_unpause_in_lockstep(start_sim, tmp_path):
    # A gz world runs free after an unpause until the next paused step: in lockstep the env
    # keeps it paused instead, and every episode starts at the reset's time.
    sim = start_sim(free_after_unpause=True)
    runs, _ = sim_times(sim, tmp_path, steps=3, episodes=2, ep_max_length=3,
                        pause={'service': 'pause_physics', 'type': 'std_srvs/srv/Empty'},
                        unpause={'service': 'unpause_physics', 'type': 'std_srvs/srv/Empty'})
    assert 'pause_physics' not in sim.lines and 'unpause_physics' not in sim.lines
    for times in runs:
        assert times == pytest.approx([0.0, T, 2 * T, 3 * T], abs=1e-6), runs


def test_a_simulator_whose_time_starts_at_the_epoch(start_sim, tmp_path):
    """
    A state stamped at the very time of /clock is that time's state, at 1.7e9 s as at 0.

    Stamps and the clock are both read from nanoseconds: one read as ``sec + nanosec * 1e-9``
    and the other as ``ns * 1e-9`` differ by a float's last bit there (2.4e-7 s), and a state
    one bit short of the clock was waited for until ``reset_timeout``.
    """
    sim = start_sim(start_ns=1_700_000_000_123_456_789)
    params = robot_params(reset_timeout=3.0, ep_max_length=100)
    config = write_config(tmp_path / 'robot.yaml', params)
    env = gym.make('rtgym_ros/ros-v1', robot_config=str(config), namespace=sim.ns,
                   disable_env_checker=True)
    try:
        env.reset()
        durations = []
        for k in range(30):
            start = time.monotonic()
            try:
                env.step(np.array([k + 1.0], np.float32))
            except TimeoutError as error:  # what the simulator got, and when
                raise AssertionError(f'{error}\nscripted_sim:\n{sim.output()}') from error
            durations.append(time.monotonic() - start)
        # No capture waited out its 3 s bound (a request DDS repairs may take a second).
        assert max(durations) < 2.5, (durations, sim.output())
        assert env.unwrapped.timeouts == 0 and env.unwrapped.stalls == 0
    finally:
        env.close()


def test_a_simulator_with_a_step_service_has_its_resets_looked_at_the_poll_after_the_answer(
        start_sim, tmp_path, monkeypatch):
    # A step service is gz's way: gz answers its reset, then applies it. The poll after the
    # answer (made 2 s here; 10 ms in the package) gives it that long before a first reset
    # looks at the data. On a step_until topic the answer ends the wait at once
    # (test_lockstep.py::test_a_lockstep_reset_returns_as_the_simulator_answers).
    monkeypatch.setattr(services, '_POLL', 2.0)
    sim = start_sim()
    config = write_config(tmp_path / 'robot.yaml', robot_params(step={
        'service': 'step', 'type': 'lifecycle_msgs/srv/ChangeState',
        'steps_field': 'transition.id', 'step_size': 0.001}))
    env = gym.make('rtgym_ros/ros-v1', robot_config=str(config), namespace=sim.ns,
                   disable_env_checker=True)
    try:
        env.reset()
        env.step(np.array([1.0], np.float32))
        start = time.monotonic()
        env.reset()
        took = time.monotonic() - start
    except Exception as error:
        raise AssertionError(f'{error!r}\nscripted_sim:\n{sim.output()}') from error
    finally:
        env.close()
    # retry: true (the default of a reset) polls at most its 1 s resend period at a time.
    assert took >= 1.0, f'the reset took {took:.3f} s: it did not wait for the poll'
