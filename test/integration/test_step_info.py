"""
What each step says about itself: time-outs, stale data, a robot that is gone.

``info['timed_out']`` marks the step whose time-step started late; a time-out prints one line;
a slot stale for ``stale_warn_steps`` captures under ``on_stale: flag`` is logged; with
``truncate_on_stale`` an episode whose robot went silent ends, truncated, with the reason.
"""

import os
import re
import subprocess
import sys
import time
import warnings

from dummy_interfaces import CountingInterface
from emulated_robots import act, CHILD_ENV, DEFAULT, REPO, robot_params, write_config
import gymnasium as gym
import numpy as np
import pytest
from ros_probe import RosoutLog
import rtgym_ros
from std_msgs.msg import Float64

T = 0.02
SCRIPT_ENV = dict(CHILD_ENV, PYTHONPATH=os.pathsep.join(
    [str(REPO / 'test' / 'support'), CHILD_ENV['PYTHONPATH']]))


@pytest.fixture
def counting_env():
    envs = []

    def make(**changes) -> gym.Env:
        config = dict(rtgym_ros.DEFAULT_CONFIG_DICT, interface=CountingInterface,
                      time_step_duration=T, start_obs_capture=T)
        config.update(changes)
        envs.append(gym.make('rtgym_ros/real-time-gym-v1', config=config,
                             disable_env_checker=True))
        return envs[-1]

    yield make
    for env in envs:
        env.close()


def test_timed_out_marks_the_step_whose_time_step_started_late(counting_env):
    env = counting_env(time_step_duration=0.05, start_obs_capture=0.05)
    env.reset()
    zero = np.zeros(2, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        infos = [env.step(zero)[-1] for _ in range(5)]  # on time
        time.sleep(0.25)  # the agent is late: the next time-step starts late
        infos.append(env.step(zero)[-1])  # this one's time-step was running: on time
        infos.append(env.step(zero)[-1])  # captured in the late time-step
        infos += [env.step(zero)[-1] for _ in range(3)]
        # A late step()'s time-step is counted on the executor thread after it returned: the
        # last one ends, and the step after wait() takes its flag and starts afresh, on time.
        env.unwrapped.wait()
        infos.append(env.step(zero)[-1])
    flags = [info['timed_out'] for info in infos]
    assert flags[6], flags
    # Every time-out is flagged once, on its own step (a busy machine may add some).
    assert sum(flags) == env.unwrapped.timeouts, (flags, env.unwrapped.timeouts)
    assert all(type(flag) is bool for flag in flags)


TIME_OUT_SCRIPT = f"""
import time
import gymnasium as gym
import numpy as np
import rtgym_ros
from dummy_interfaces import CountingInterface
config = dict(rtgym_ros.DEFAULT_CONFIG_DICT, interface=CountingInterface,
              time_step_duration={T}, start_obs_capture={T})
env = gym.make('rtgym_ros/real-time-gym-v1', config=config, disable_env_checker=True)
env.reset()
env.step(np.zeros(2, np.float32))
time.sleep({5 * T})
for _ in range(3):
    env.step(np.zeros(2, np.float32))
time.sleep(1.5)  # past the period of the node's throttled log lines
print('timeouts', env.unwrapped.timeouts, flush=True)
env.close()
"""


def test_a_time_out_prints_one_line():
    # In a process of its own: Python prints the warning as it does for a user (pytest would
    # record it), and the ROS log lines come out on the same stream.
    result = subprocess.run([sys.executable, '-c', TIME_OUT_SCRIPT], cwd=REPO, env=SCRIPT_ENV,
                            capture_output=True, text=True, timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert 'timeouts 1' in output
    lines = [line for line in output.splitlines() if 'timed out' in line]
    assert len(lines) == 1, output
    assert re.search(r'env\.py:0: UserWarning: Time-step timed out\. Elapsed since last '
                     r'time-step: [0-9.]+$', lines[0]), lines
    assert 'warn_explicit' not in output  # no source line under the warning


def test_a_time_out_is_still_rtgyms_user_warning(counting_env):
    env = counting_env()
    env.reset()
    env.step(np.zeros(2, np.float32))
    time.sleep(5 * T)
    with pytest.warns(UserWarning, match='^Time-step timed out'):
        env.step(np.zeros(2, np.float32))
        env.step(np.zeros(2, np.float32))
    with warnings.catch_warnings():  # rtgym users silence it so, and still can
        warnings.filterwarnings('ignore', message='Time-step timed out', category=UserWarning)
        time.sleep(5 * T)
        with warnings.catch_warnings(record=True) as caught:
            env.step(np.zeros(2, np.float32))
            env.step(np.zeros(2, np.float32))
    assert caught == []


def test_ep_max_length_truncation_says_why(counting_env):
    env = counting_env(ep_max_length=3)
    env.reset()
    results = [env.step(np.zeros(2, np.float32)) for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert 'truncated_reason' not in results[0][-1]
    assert results[-1][-1]['truncated_reason'] == 'ep_max_length'


# -- a robot that stops publishing ------------------------------------------------------------


def steps_until_stale(env: gym.Env, limit: int = 60) -> dict:
    for _ in range(limit):
        info = env.step(act(0.5))[-1]
        if info['stale']:
            return info
    raise AssertionError(f'no stale observation within {limit} steps')


def test_stale_counts_and_a_rate_limited_line_under_flag(probe, spawn, make_env):
    robot = spawn()
    log = RosoutLog(probe, robot.ns)
    try:
        env = make_env(robot, joints={'max_age': 0.1, 'on_stale': 'flag',
                                      'stale_warn_steps': 5})
        env.reset()
        for _ in range(10):
            info = env.step(act(0.5))[-1]
        assert 'stale_steps' not in info
        time.sleep(1.2)  # a log flush with nothing to say
        assert not [line for line in log.lines() if 'has been stale' in line]
        robot.control('silent')
        first = steps_until_stale(env)
        runs = [first['stale_steps']['joints']]
        for _ in range(7):
            runs.append(env.step(act(0.5))[-1]['stale_steps']['joints'])
        assert runs == list(range(1, 9)), runs
        line = log.wait_for('has been stale for', 5.0)
        assert re.search(r'observations\.joints \(joint_states\) has been stale for \d+ steps '
                         r'\(age [0-9.]+ s > max_age 0\.1 s\): observations and rewards use '
                         r'old data \(on_stale: flag\)', line), line
        time.sleep(1.2)  # the next flush, had it more to say
        lines = [line for line in log.lines() if 'has been stale for' in line]
        assert 1 <= len(lines) <= 2, lines  # at most one line a second, for 8 steps
        robot.control('run')
        for _ in range(60):
            info = env.step(act(0.5))[-1]
            if not info['stale']:
                break
        assert not info['stale'] and 'stale_steps' not in info
        robot.control('silent')
        assert steps_until_stale(env)['stale_steps'] == {'joints': 1}, 'the count starts again'
    finally:
        probe.node.destroy_subscription(log.sub)


def test_an_episode_ends_when_the_robot_is_gone(spawn, make_env):
    robot = spawn()
    # Silence of 0.7 s ends the episode: a robot process stalled by a loaded machine for a
    # few tenths of a second is not gone.
    env = make_env(robot, joints={'max_age': 0.3, 'on_stale': 'flag'},
                   truncate_on_stale={'steps': 8})
    env.reset()
    for _ in range(10):
        result = env.step(act(0.5))
        assert not result[3]
    robot.control('silent')
    for count in range(1, 60):
        _, _, terminated, truncated, info = env.step(act(0.5))
        if truncated:
            break
    assert truncated and not terminated
    assert info['truncated_reason'] == 'stale_observations'
    assert info['stale_steps'] == {'joints': 8}
    with pytest.raises(RuntimeError, match='reset'):
        env.step(act(0.5))
    robot.wait_last(DEFAULT)  # the episode ended: the robot got its default action
    robot.control('run')
    env.reset()
    assert not any(env.step(act(0.5))[3] for _ in range(10))


def test_truncate_on_stale_watches_the_named_slots_only(probe, spawn, make_env, tmp_path):
    robot = spawn()
    # A second sensor, the probe's beacon; only it is watched.
    beacon = probe.node.create_publisher(Float64, f'{robot.ns}/beacon', 10)
    timer = probe.node.create_timer(0.01, lambda: beacon.publish(Float64(data=1.0)))
    params = robot_params(joints={'max_age': 0.1, 'on_stale': 'flag'},
                          truncate_on_stale={'steps': 3, 'slots': ['beacon']})
    params['observations'].update(names=['joints', 'beacon'], beacon={
        'topic': 'beacon', 'type': 'std_msgs/msg/Float64', 'field': 'data',
        'stamp': 'receive', 'max_age': 0.1, 'on_stale': 'flag'})
    env = make_env(robot, config=write_config(tmp_path / 'beacon.yaml', params))
    try:
        env.reset()
        robot.control('silent')
        steps_until_stale(env)
        for _ in range(10):  # joints stale, the beacon fresh: the episode goes on
            _, _, _, truncated, info = env.step(act(0.5))
            assert not truncated and info['stale'] == ['joints'], info
        probe.node.destroy_timer(timer)
        for _ in range(60):
            _, _, _, truncated, info = env.step(act(0.5))
            if truncated:
                break
        assert truncated and info['truncated_reason'] == 'stale_observations'
        assert info['stale_steps']['beacon'] == 3 and info['stale_steps']['joints'] > 3
    finally:
        probe.node.destroy_timer(timer)
        probe.node.destroy_publisher(beacon)
