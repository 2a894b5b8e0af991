"""
Simulators plugged in directly: services of any type by config, and lockstep stepping.

A real ``sim_robot`` process in lockstep (paused, advancing only to the times the env asks on
``step_until``) and a service of a type with nested request fields in another process.
"""

from pathlib import Path
import re
import subprocess
import sys
import time

from emulated_robots import act, CHILD_ENV, next_name, REPO
import gymnasium as gym
import numpy as np
import pytest
from rclpy.time import Time
from ros_probe import die_with_parent, Recorder, RosoutLog, SimProcess, wait_until
from rosgraph_msgs.msg import Clock
import rtgym_ros  # noqa: F401
from rtgym_ros.robot import services
from sensor_msgs.msg import JointState
import yaml

ROBOT = str(REPO / 'config' / 'robots' / 'pendulum_sim.yaml')
LOCKSTEP = {'use_sim_time': True, 'stepping': 'lockstep', 'step': {'topic': 'step_until'}}
T = 0.02  # the pendulum config's time-step


@pytest.fixture
def lockstep_sim(tmp_path):
    sims = []

    def start(*params: str) -> SimProcess:
        sims.append(SimProcess(tmp_path, 'stepping:=lockstep', 'reset_time:=true',
                               'initial_state:=[3.0, 0.0]', *params))
        return sims[-1]

    yield start
    for sim in sims:
        sim.stop()


def run_episode(sim: SimProcess, *, steps: int, pause: float = 0.0, **overrides) -> dict:
    # The sim starts with the env: on a loaded host its start and discovery took over 10 s.
    overrides.setdefault('clock_wait_timeout', 30.0)
    env = gym.make('rtgym_ros/ros-v1', robot_config=ROBOT, namespace=sim.ns,
                   ep_max_length=steps, disable_env_checker=True, **LOCKSTEP, **overrides)
    try:
        obs, info = env.reset()
        # Not now(): the reset's action, sent after reset() returned, may have advanced it.
        start_time = info['capture_time']
        observations, rewards = [obs['joints'].copy()], []
        rng = np.random.default_rng(7)
        for _ in range(steps):
            obs, reward, terminated, truncated, _ = env.step(
                rng.uniform(-2.0, 2.0, 1).astype(np.float32))
            observations.append(obs['joints'].copy())
            rewards.append(reward)
            time.sleep(pause)  # the agent's own time (a gradient step): free in lockstep
            if terminated or truncated:
                break
        return {'obs': np.array(observations), 'rewards': rewards,
                'timeouts': env.unwrapped.timeouts, 'elapsed': env.unwrapped.now() - start_time}
    except AssertionError as error:
        raise AssertionError(f'{error}\nsim_robot:\n{sim.output()}') from None
    finally:
        env.close()


def test_lockstep_never_times_out_and_advances_exactly(lockstep_sim):
    sim = lockstep_sim()
    result = run_episode(sim, steps=40, pause=3 * T)  # the agent is 3x slower than real time
    assert result['timeouts'] == 0
    assert result['elapsed'] == pytest.approx(40 * T, abs=1e-6)


def test_the_paused_simulator_says_its_state_again_until_a_request(lockstep_sim, probe):
    sim = lockstep_sim()
    step = probe.node.create_publisher(Clock, f'{sim.ns}/step_until', 10)
    wait_until(step.get_subscription_count, 30.0, f'sim_robot at {sim.ns}')
    # Subscribed after the start's announcement, as an env that matched late.
    states = Recorder(probe, JointState, f'{sim.ns}/pendulum/joint_states')
    try:
        states.wait_for(lambda state: state.header.stamp.nanosec == 0, since=0.0,
                        timeout=5.0, what='the start state, said again')
        step.publish(Clock(clock=Time(nanoseconds=int(T * 1e9)).to_msg()))
        states.wait_for(lambda state: state.header.stamp.nanosec == int(T * 1e9), since=0.0,
                        timeout=5.0, what='the state at the target')
        idle = time.monotonic() + 0.3
        time.sleep(0.6)
        assert states.since(idle) == [], 'the state said again after a request'
    finally:
        probe.node.destroy_subscription(states.sub)
        probe.node.destroy_publisher(step)


@pytest.mark.parametrize('simulator', [
    ('rtgym_ros.nodes.sim_robot', 'config/sim_robot/pendulum.yaml', ROBOT, T),
    ('rtgym_ros.nodes.mujoco_sim', 'config/mujoco_sim/inverted_pendulum.yaml',
     str(REPO / 'config' / 'robots' / 'mujoco_inverted_pendulum.yaml'), 0.04),
], ids=['sim_robot', 'mujoco_sim'])
def test_an_env_started_after_the_paused_simulator_resets_and_steps(tmp_path, probe, simulator):
    # As a user starts them: the simulator first (a launch file, a terminal), training later,
    # long after its start-up /clock. The env's first reset waits for a /clock.
    module, sim_config, robot_config, time_step = simulator
    sim = SimProcess(tmp_path, 'stepping:=lockstep', config=sim_config, module=module)
    env = None
    try:
        wait_until(lambda: probe.node.count_publishers(f'{sim.ns}/step_until') == 0
                   and probe.node.count_subscribers(f'{sim.ns}/step_until') > 0, 30.0,
                   f'{sim.name} at {sim.ns}')
        time.sleep(1.0)
        env = gym.make('rtgym_ros/ros-v1', robot_config=robot_config, namespace=sim.ns,
                       disable_env_checker=True, clock_wait_timeout=5.0, **LOCKSTEP)
        env.reset()
        # Captures, not the clock: when step() returns, the simulator may or may not have
        # reached the next step's end already.
        captures = [env.step(np.zeros(1, dtype=np.float32))[4]['capture_time']
                    for _ in range(3)]
        assert np.diff(captures) == pytest.approx([time_step] * 2, abs=1e-6), captures
        assert env.unwrapped.timeouts == 0
    except (AssertionError, TimeoutError) as error:
        raise AssertionError(f'{error}\n{sim.name}:\n{sim.output()}') from None
    finally:
        if env is not None:
            env.close()
        sim.stop()


def test_lockstep_is_deterministic(lockstep_sim):
    # One simulator at a time: /clock is global, two sims on one domain would fight over it.
    first_sim = lockstep_sim()
    first = run_episode(first_sim, steps=60)
    first_sim.stop()
    second = run_episode(lockstep_sim(), steps=60)
    assert np.array_equal(first['obs'], second['obs']), \
        np.flatnonzero(np.any(first['obs'] != second['obs'], axis=1))
    assert first['rewards'] == second['rewards']


def test_lockstep_capture_within_the_step(lockstep_sim):
    # c < T: two advances per time-step; the capture sees the state at t_start + c.
    sim = lockstep_sim()
    result = run_episode(sim, steps=20, start_obs_capture=T / 2)
    assert result['timeouts'] == 0
    assert result['elapsed'] == pytest.approx(20 * T, abs=1e-6)


def test_lockstep_capture_at_the_start_of_the_step(lockstep_sim):
    # c = 0: the first capture asks the simulator for time 0, where the reset left it.
    result = run_episode(lockstep_sim(), steps=10, start_obs_capture=0.0)
    assert result['timeouts'] == 0
    assert np.array_equal(result['obs'][1], result['obs'][0])  # the state the reset gave
    assert not np.array_equal(result['obs'][2], result['obs'][1])


def test_every_reset_that_rewinds_the_clock_observes_the_new_state(lockstep_sim):
    # reset_time: each reset sets the clock back to 0; the state must survive the clock jump.
    sim = lockstep_sim()
    env = gym.make('rtgym_ros/ros-v1', robot_config=ROBOT, namespace=sim.ns, ep_max_length=5,
                   disable_env_checker=True, **LOCKSTEP)
    try:
        for episode in range(4):
            obs, info = env.reset()
            assert 'missing' not in info and info['stale'] == [], (episode, info)
            assert np.allclose(obs['joints'], [3.0, 0.0]), (episode, obs)
            assert info['capture_time'] == 0.0  # now() may be past it: see run_episode
            for _ in range(5):
                *_, terminated, truncated, _ = env.step(act(0.0))
                if terminated or truncated:
                    break
    finally:
        env.close()


def test_a_lockstep_reset_returns_as_the_simulator_answers(lockstep_sim, monkeypatch):
    # Resets are most of a lockstep run while episodes are short: the answer ends the wait,
    # not the next poll of it (made 2 s here; 10 ms in the package). No rewind to wait for.
    monkeypatch.setattr(services, '_POLL', 2.0)
    sim = lockstep_sim('reset_time:=false')
    env = gym.make('rtgym_ros/ros-v1', robot_config=ROBOT, namespace=sim.ns, ep_max_length=5,
                   disable_env_checker=True, **LOCKSTEP)
    try:
        env.reset()  # the first also waits for discovery, polled
        took = []
        for _ in range(3):
            for _ in range(2):
                env.step(act(0.0))
            start = time.monotonic()
            obs, info = env.reset()
            took.append(time.monotonic() - start)
            assert 'missing' not in info and info['stale'] == [], info
            assert np.allclose(obs['joints'], [3.0, 0.0]), obs
        assert max(took) < 1.0, f'resets took {took} s: they waited for the 2 s poll'
    finally:
        env.close()


def test_a_reset_waits_for_every_joint_of_its_state_and_names_the_one_that_never_came(
        lockstep_sim, tmp_path):
    # A gripper's driver on the same JointState topic as the simulator: the simulator's reset
    # state alone is not the whole state.
    sim = lockstep_sim()
    config = yaml.safe_load(Path(ROBOT).read_text())
    joints = config['/**']['ros__parameters']['observations']['joints']
    joints['joint_names'] = ['pendulum_joint', 'gripper_joint']  # no one sends the gripper's
    del joints['low'], joints['high']
    path = tmp_path / 'with_gripper.yaml'
    path.write_text(yaml.safe_dump(config))
    env = gym.make('rtgym_ros/ros-v1', robot_config=str(path), namespace=sim.ns,
                   reset_timeout=2.0, disable_env_checker=True, **LOCKSTEP)
    try:
        deadline = time.monotonic() + 20.0
        while True:
            with pytest.raises(TimeoutError) as error:
                env.reset()
            if 'no message on' not in str(error.value) or time.monotonic() > deadline:
                break  # else the simulator was not discovered within the 2 s yet
        assert re.search(r'no complete data on .*/pendulum/joint_states within reset_timeout '
                         r'2\.0 s: messages came without joints\.gripper_joint ',
                         str(error.value)), error.value
    finally:
        env.close()


def test_a_topic_not_sent_at_each_step_target_is_waited_for_once_then_named_and_let_be(
        lockstep_sim, tmp_path, probe):
    # A gripper driver stamping its own, slower time: no data at the capture times.
    sim = lockstep_sim()
    gripper = probe.node.create_publisher(JointState, f'{sim.ns}/gripper/joint_states', 10)
    stamped = JointState(name=['gripper_joint'], position=[0.5])
    stamped.header.stamp.nanosec = 1_000_000  # 1 ms of sim time, for good
    timer = probe.node.create_timer(0.02, lambda: gripper.publish(stamped))
    log = RosoutLog(probe, sim.ns)
    config = yaml.safe_load(Path(ROBOT).read_text())
    observations = config['/**']['ros__parameters']['observations']
    observations['names'].append('gripper')
    observations['gripper'] = {'topic': 'gripper/joint_states',
                               'type': 'sensor_msgs/msg/JointState',
                               'joint_names': ['gripper_joint'], 'fields': ['position']}
    path = tmp_path / 'with_gripper.yaml'
    path.write_text(yaml.safe_dump(config))
    env = gym.make('rtgym_ros/ros-v1', robot_config=str(path), namespace=sim.ns,
                   reset_timeout=1.0, disable_env_checker=True, **LOCKSTEP)
    try:
        wait_until(lambda: gripper.get_subscription_count() > 0, 10.0,
                   'the env to subscribe to the gripper')  # a reset bounded by 1 s
        env.reset()
        took = []
        for _ in range(4):
            start = time.monotonic()
            *_, info = env.step(act(0.0))
            took.append(time.monotonic() - start)
        assert took[0] > 0.9 and max(took[1:]) < 0.5, took  # the first capture waited
        assert info['obs_ages']['gripper'] > 0.05, info  # captured as it is
        line = log.wait_for('lockstep: no data stamped at the capture time', 5.0)
        assert f'on {sim.ns}/gripper/joint_states within reset_timeout 1.0 s' in line, line
    finally:
        env.close()
        probe.node.destroy_timer(timer)
        probe.node.destroy_publisher(gripper)
        probe.node.destroy_subscription(log.sub)


def test_a_simulator_that_does_not_advance_is_an_error(lockstep_sim):
    sim = lockstep_sim()
    env = gym.make('rtgym_ros/ros-v1', robot_config=ROBOT, namespace=sim.ns,
                   clock_stall_timeout=0.5, disable_env_checker=True,
                   **dict(LOCKSTEP, step={'topic': 'nobody_listens'}))
    try:
        env.reset()
        start = time.monotonic()
        with pytest.raises(TimeoutError, match='/clock has not moved') as error:
            for _ in range(10):
                env.step(act(0.0))
        assert time.monotonic() - start < 5.0
        assert f'the last step request: {sim.ns}/nobody_listens asked for t = ' \
            in str(error.value), str(error.value)
    finally:
        env.close()


# -- services of any type, request fields from the config ---------------------------------


@pytest.fixture
def server(tmp_path):
    made = []

    def start(*args: str) -> tuple[str, Path]:
        namespace = f'/service_{next_name()}'
        log = tmp_path / f'{namespace.strip("/")}.jsonl'
        proc = subprocess.Popen([sys.executable, str(REPO / 'test' / 'support' /
                                                     'service_server.py'), namespace, str(log),
                                 *args], cwd=REPO, env=CHILD_ENV, stdout=subprocess.PIPE,
                                text=True, preexec_fn=die_with_parent)
        made.append(proc)
        assert proc.stdout.readline().strip() == 'READY'
        return namespace, log

    yield start
    for proc in made:
        proc.terminate()
        proc.wait(10.0)


def _reset_env(sim: SimProcess, namespace: str, **reset_changes) -> gym.Env:
    reset = {'service': f'{namespace}/change_state', 'type': 'lifecycle_msgs/srv/ChangeState',
             'request': {'transition': {'id': 3, 'label': 'activate'}}, **reset_changes}
    return gym.make('rtgym_ros/ros-v1', robot_config=ROBOT, namespace=sim.ns, reset=reset,
                    pause=None, reset_timeout=5.0, disable_env_checker=True)


def test_a_service_of_any_type_gets_its_nested_request_fields(tmp_path, server):
    namespace, log = server()
    sim = SimProcess(tmp_path)
    env = _reset_env(sim, namespace)
    try:
        env.reset()
        wait_until(lambda: log.exists() and log.read_text(), 5.0, 'the request in the log')
        assert log.read_text().splitlines()[0] == '{"id": 3, "label": "activate"}'
    finally:
        env.close()
        sim.stop()


def test_a_false_success_field_fails_the_reset_naming_the_service(tmp_path, server):
    namespace, _ = server('--fail')
    sim = SimProcess(tmp_path)
    env = _reset_env(sim, namespace, success='success')
    try:
        with pytest.raises(RuntimeError, match=r'change_state failed \(success is false\)'):
            env.reset()
    finally:
        env.close()
        sim.stop()
