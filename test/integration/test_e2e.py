"""
End to end across processes, over real DDS, on wall time and sim time.

sim_robot runs in its own process, the ros-v1 env (or the agent console script) in another.
"""

from contextlib import contextmanager
import itertools
import math
import os
from pathlib import Path
import signal
import subprocess
import sys
import time
from typing import Callable, Iterator

import gymnasium as gym
import numpy as np
import pytest
from ros_probe import die_with_parent, exit_code_after_a_hangup

import rtgym_ros  # noqa: F401  (registers the env ids)
from rtgym_ros.sim.controllers import make_controller

REPO = Path(__file__).resolve().parents[2]
ROBOT_CONFIG = REPO / 'config' / 'robots' / 'pendulum_sim.yaml'
SIM_CONFIG = REPO / 'config' / 'sim_robot' / 'pendulum.yaml'
# Hanging still from theta = pi for 500 steps scores about -4935; the controller alone, on the
# pure model, swings up in ~6 s and scores about -1850 from pi (test_controllers.py). Through
# DDS, real timers and a busy 2-core machine we allow 1000 of slack for late swing-ups.
RETURN_THRESHOLD = -2850.0
_names = itertools.count()


class Sim:
    """sim_robot in a namespace of its own, stopped with SIGINT."""

    def __init__(self, tmp_path: Path, *params: str) -> None:
        self.namespace = f'/e2e_{os.getpid()}_{next(_names)}'
        self.log = tmp_path / f'{self.namespace.strip("/")}.log'
        command = [sys.executable, '-m', 'rtgym_ros.nodes.sim_robot', '--ros-args',
                   '--params-file', str(SIM_CONFIG), '-r', f'__ns:={self.namespace}']
        for param in params:
            command += ['-p', param]
        with open(self.log, 'wb') as log:
            self.process = subprocess.Popen(command, cwd=REPO, stdout=log,
                                            stderr=subprocess.STDOUT,
                                            preexec_fn=die_with_parent)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(2)
        try:
            return self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=5)


@pytest.fixture
def sim(tmp_path):
    sims = []

    def start(*params: str) -> Sim:
        sims.append(Sim(tmp_path, *params))
        return sims[-1]

    yield start
    for running in sims:
        assert running.stop() == 0, running.log.read_text()


@pytest.fixture
def make_env():
    envs = []

    def make(namespace: str, **overrides):
        env = gym.make('rtgym_ros/ros-v1', robot_config=str(ROBOT_CONFIG),
                       namespace=namespace, reset_timeout=30.0, clock_wait_timeout=30.0,
                       **overrides)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def run_controlled_episode(env, *, steps: int = 500, seed: int = 0):
    controller = make_controller('pendulum_swingup',
                                 time_step=env.unwrapped.time_step_duration)
    obs, _ = env.reset(seed=seed, options=None)
    total, thetas = 0.0, []
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(controller(obs))
        total += reward
        thetas.append(float(obs['joints'][0]))
        if terminated or truncated:
            break
    return total, np.array(thetas)


def assert_swung_up_and_held(total: float, thetas: np.ndarray) -> None:
    assert total > RETURN_THRESHOLD, f'return {total:.1f}'
    upright = np.abs(np.mod(thetas[-50:] + math.pi, 2 * math.pi) - math.pi)
    assert upright.max() < 0.3, f'not held upright at the end: {upright.max():.2f} rad'


def test_controller_swings_up_on_wall_time(sim, make_env):
    robot = sim('initial_state:=[3.14159, 0.0]')
    env = make_env(robot.namespace)
    assert_swung_up_and_held(*run_controlled_episode(env))


@pytest.mark.parametrize('real_time_factor', [1.0, 5.0])
def test_controller_swings_up_on_sim_time(sim, make_env, real_time_factor):
    robot = sim('initial_state:=[3.14159, 0.0]', 'publish_clock:=true',
                f'real_time_factor:={real_time_factor}', 'clock_rate:=1000.0')
    env = make_env(robot.namespace, use_sim_time=True)
    started = time.perf_counter()
    total, thetas = run_controlled_episode(env)
    wall = time.perf_counter() - started
    assert_swung_up_and_held(total, thetas)
    # 500 steps of 20 ms of sim time: 10 s at 1x, 2 s at 5x, plus the first reset's discovery;
    # generous, as a CPU hog beside the suite slows the simulator too.
    assert wall < 10.0 / real_time_factor * 1.8 + 6.0, f'{wall:.1f} s of wall time'
    if real_time_factor > 1:  # below the 10 s the episode takes at 1x, discovery included
        assert wall < 10.0 * 0.9, f'{wall:.1f} s: the env did not follow the faster clock'


def test_reset_service_resets_the_sim(sim, make_env):
    robot = sim('initial_state:=[3.14159, 0.0]')
    env = make_env(robot.namespace)
    env.reset()
    speeds = [abs(env.step(np.array([2.0], np.float32))[0]['joints'][1]) for _ in range(40)]
    assert max(speeds) > 0.5  # it moved
    obs, _ = env.reset()
    theta, velocity = obs['joints']
    assert abs(abs(theta) - math.pi) < 0.05 and abs(velocity) < 0.05, obs  # hanging again


def paused_falling_pendulum(sim, make_env) -> tuple:
    """Return an env whose pendulum fell for 10 steps, then wait() paused it; its interface."""
    robot = sim('initial_state:=[1.0, 0.0]')
    env = make_env(robot.namespace, wait_on_done=False)
    env.reset()
    for _ in range(10):
        env.step(np.array([0.0], np.float32))
    env.unwrapped.wait()  # pause service: the pendulum (falling) freezes
    time.sleep(0.3)
    return env, env.unwrapped.interface


def test_wait_pauses_the_sim_and_reset_resumes_it(sim, make_env):
    env, interface = paused_falling_pendulum(sim, make_env)
    first = interface.slots[0].read().copy()
    time.sleep(0.5)
    np.testing.assert_allclose(interface.slots[0].read(), first)
    obs, _ = env.reset()  # unpause + reset
    assert interface.paused is False
    env.step(np.array([0.0], np.float32))
    obs, *_ = env.step(np.array([0.0], np.float32))
    assert abs(obs['joints'][1]) > 0.0


def test_wait_pauses_the_sim_and_the_next_step_resumes_it(sim, make_env):
    env, interface = paused_falling_pendulum(sim, make_env)  # a gradient step, say
    frozen = float(interface.slots[0].read()[0])
    thetas = [float(env.step(np.array([0.0], np.float32))[0]['joints'][0]) for _ in range(10)]
    assert interface.paused is False
    assert abs(thetas[-1] - frozen) > 0.01, (frozen, thetas)  # falling again


def response_step(env, *, kick_at: int = 5, steps: int = 15) -> int:
    """Index of the first observation showing a torque kick applied with step(kick_at)."""
    env.reset()
    velocities = []
    for index in range(steps):
        action = np.array([2.0 if index == kick_at else 0.0], np.float32)
        obs, *_ = env.step(action)
        velocities.append(abs(float(obs['joints'][1])))
    moved = np.flatnonzero(np.array(velocities) > 0.01)  # a 2 N m, 20 ms kick: ~0.04 rad/s
    assert moved.size, f'the kick never showed: {velocities}'
    return int(moved[0])


def test_injected_command_latency_shows_where_the_action_buffer_predicts(sim, make_env):
    """
    Show a kick sent with step(k) from step k+1 on, or 2 steps later with 2 steps of latency.

    That is exactly the delay an action buffer of length 3 covers.
    """
    still = ('initial_state:=[3.14159, 0.0]', 'sensor_rate:=500.0', 'timer_rate:=500.0')
    prompt = sim(*still)
    delayed = sim(*still, 'command_latency:=0.04')
    direct = response_step(make_env(prompt.namespace, act_buf_len=3))
    late = response_step(make_env(delayed.namespace, act_buf_len=3))
    assert direct in (6, 7), direct  # applied during time-step k+1, seen at its end
    assert late - direct in (1, 2, 3), (direct, late)


def test_agent_console_script_with_params_file(sim, tmp_path):
    robot = sim('initial_state:=[3.14159, 0.0]')
    csv_path = tmp_path / 'timing.csv'
    result = subprocess.run(
        [sys.executable, '-m', 'rtgym_ros.nodes.agent', '--ros-args', '--params-file',
         str(ROBOT_CONFIG), '-r', f'__ns:={robot.namespace}', '-p', 'policy:=zero',
         '-p', 'episodes:=2', '-p', 'ep_max_length:=25', '-p', f'timing_csv:={csv_path}'],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count('episode ') >= 2
    assert 'capture spacing error' in result.stdout
    assert len(csv_path.read_text().splitlines()) == 1 + 2 * 25
    assert 'terminate called' not in result.stderr


def test_agent_reports_a_bad_config_without_a_traceback(tmp_path):
    bad = tmp_path / 'bad.yaml'
    bad.write_text(ROBOT_CONFIG.read_text().replace('high: [2.0]', 'high: [-5.0]'))
    result = subprocess.run(
        [sys.executable, '-m', 'rtgym_ros.nodes.agent', '--ros-args', '--params-file',
         str(bad)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert 'actions.effort' in result.stderr and 'Traceback' not in result.stderr


def test_agent_without_a_robot_config_says_so():
    result = subprocess.run(
        [sys.executable, '-m', 'rtgym_ros.nodes.agent', '--ros-args', '-p', 'policy:=random'],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith('agent: no robot config: give one with --ros-args '
                                    '--params-file ROBOT_CONFIG'), result.stderr


def _sigint_ignored() -> None:
    """Start the child as a non-interactive shell starts ``agent ... &``: SIGINT ignored."""
    die_with_parent()  # which sets SIGINT's default action: ignore it after
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _sighup_ignored() -> None:
    """Start the child as ``nohup agent ...`` does: SIGHUP ignored."""
    die_with_parent()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


@contextmanager
def _agent_without_a_robot(log: Path,
                           preexec_fn: Callable[[], None]) -> Iterator[subprocess.Popen]:
    """Run the agent until its first reset waits (for a robot that never comes)."""
    with open(log, 'wb') as out:
        agent = subprocess.Popen(
            [sys.executable, '-m', 'rtgym_ros.nodes.agent', '--ros-args', '--params-file',
             str(ROBOT_CONFIG), '-r', f'__ns:=/no_robot_{os.getpid()}'],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT, preexec_fn=preexec_fn)
    try:
        deadline = time.monotonic() + 60.0
        while 'agent: policy' not in log.read_text():
            assert agent.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield agent
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(5.0)


def test_agent_started_with_sigint_ignored_still_stops_on_sigint(tmp_path):
    # Python keeps an ignored SIGINT ignored; rclpy.init() installs its handler regardless, so
    # a plain rclpy node started by `agent ... &` in a script stops on kill -INT. The agent
    # ran on instead (here: to its reset time-out, exit 1).
    log = tmp_path / 'agent.log'
    with _agent_without_a_robot(log, _sigint_ignored) as agent:
        agent.send_signal(signal.SIGINT)
        assert agent.wait(timeout=30) == 0, log.read_text()
        assert 'agent: interrupted, stopping the robot' in log.read_text()


def test_agent_whose_terminal_closes_stops_the_robot_and_exits_0():
    # Once the terminal is gone every write to it fails (EIO): the agent's stop messages
    # raised on their way, and it exited 1 (the robot stopped all the same).
    command = [sys.executable, '-m', 'rtgym_ros.nodes.agent', '--ros-args', '--params-file',
               str(ROBOT_CONFIG), '-r', f'__ns:=/no_robot_{os.getpid()}']
    assert exit_code_after_a_hangup(command, 'agent: policy', cwd=REPO) == 0


@pytest.mark.parametrize('nohup', [False, True], ids=['terminal', 'nohup'])
def test_agent_stops_the_robot_on_a_hangup_unless_started_under_nohup(tmp_path, nohup):
    # By default SIGHUP (the terminal or ssh session of `ros2 run` closed) ends a process at
    # once: the robot kept its last command. Under nohup the agent is meant to run on.
    log = tmp_path / 'agent.log'
    with _agent_without_a_robot(log, _sighup_ignored if nohup else die_with_parent) as agent:
        agent.send_signal(signal.SIGHUP)
        if nohup:
            time.sleep(1.0)
            assert agent.poll() is None, log.read_text()
            agent.send_signal(signal.SIGINT)
        assert agent.wait(timeout=30) == 0, log.read_text()
        assert 'agent: interrupted, stopping the robot' in log.read_text()
