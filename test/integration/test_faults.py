"""
Agent-side faults with real processes: the robot always ends up with its safe action.

The sim reports the effort it applies in JointState.effort. Its own command timeout is set
long (30 s) unless the test is about it, so a zero effort proves the env sent the default.
"""

import os
import signal
import subprocess
import sys
import time

import pytest
from ros_probe import (CHILD_ENV, die_with_parent, Probe, read_terminal_until, Recorder, REPO,
                       SimProcess, start_on_a_terminal, wait_until)
from sensor_msgs.msg import JointState

TORQUE = 1.5


@pytest.fixture
def log_dir(tmp_path):
    return tmp_path


class Driven:
    """A sim, an agent process driving it with TORQUE, and the effort the sim applies."""

    def __init__(self, probe: Probe, log_dir, mode: str, command_timeout: float, *,
                 terminal: bool = False) -> None:
        self.sim = SimProcess(log_dir, 'initial_state:=[3.14159, 0.0]',
                              f'command_timeout:={command_timeout}')
        self.states = Recorder(probe, JointState, f'{self.sim.ns}/pendulum/joint_states')
        self.terminal: int | None = None
        """The master side of the agent's controlling terminal (``terminal``), else None."""
        command = [sys.executable, str(REPO / 'test' / 'support' / 'stepping_agent.py'),
                   self.sim.ns, str(TORQUE), mode]
        popen = {'cwd': REPO, 'env': dict(CHILD_ENV, PYTHONFAULTHANDLER='1'),
                 'stdin': subprocess.PIPE, 'text': True}
        if terminal:
            self.agent, self.terminal = start_on_a_terminal(command, **popen)
            read_terminal_until(self.terminal, 'STEPPING', timeout=60.0)
        else:
            self.agent = subprocess.Popen(command, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, preexec_fn=die_with_parent,
                                          **popen)
            assert self.agent.stdout.readline().strip() == 'STEPPING', self.agent_output()
        self.wait_effort(lambda effort: effort == pytest.approx(TORQUE), timeout=5.0,
                         what='the sim applying the agent torque')

    def hang_up(self) -> None:
        """Close the agent's terminal: the kernel sends SIGHUP to its session."""
        os.close(self.terminal)
        self.terminal = None

    def tell(self) -> float:
        """Tell the agent to raise or stall (its mode); return the wall time it was told."""
        told = time.monotonic()
        self.agent.stdin.write('now\n')
        self.agent.stdin.flush()
        return told

    def wait_effort(self, check, *, timeout: float, what: str, since: float = 0.0) -> float:
        start = time.monotonic()
        self.states.wait_for(lambda m: len(m.effort) and check(m.effort[0]), since=since,
                             timeout=timeout, what=what)
        return time.monotonic() - start

    def agent_output(self) -> str:
        if self.agent.poll() is None:
            return '(agent still running)'
        if self.agent.stdout is None:  # a terminal, read up to its hangup
            return '(on a terminal)'
        return self.agent.stdout.read() + self.agent.stderr.read()

    def stop(self) -> None:
        if self.agent.poll() is None:
            self.agent.kill()
        self.agent.wait(timeout=10)
        if self.terminal is not None:
            os.close(self.terminal)
        self.sim.stop()


@pytest.fixture
def driven(probe, log_dir):
    made = []

    def start(mode: str = 'run', *, command_timeout: float = 30.0,
              terminal: bool = False) -> Driven:
        made.append(Driven(probe, log_dir, mode, command_timeout, terminal=terminal))
        return made[-1]

    yield start
    for item in made:
        item.stop()


def test_sigint_sends_the_default_action(driven):
    robot = driven()
    since = time.monotonic()
    robot.agent.send_signal(signal.SIGINT)
    try:
        robot.wait_effort(lambda effort: effort == 0.0, since=since, timeout=5.0,
                          what='zero effort after SIGINT')
    except AssertionError as error:
        robot.agent.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
        robot.agent.wait(5.0)
        raise AssertionError(f'{error}\nagent:\n{robot.agent_output()}') from None
    robot.agent.wait(timeout=10)
    assert 'terminate called' not in robot.agent.stderr.read()


@pytest.mark.parametrize('signum, code', [(signal.SIGTERM, 143), (signal.SIGHUP, 129)],
                         ids=['sigterm', 'sighup'])
def test_a_stopping_signal_sends_the_default_action_and_exits_with_its_code(driven, signum,
                                                                            code):
    # Python's default for SIGTERM (docker stop, systemd, timeout) and SIGHUP (the script's
    # terminal closed) ends a process without atexit: the env turns the first one into
    # SystemExit(128 + signum) in the main thread.
    robot = driven()
    since = time.monotonic()
    robot.agent.send_signal(signum)
    robot.wait_effort(lambda effort: effort == 0.0, since=since, timeout=5.0,
                      what=f'zero effort after {signal.Signals(signum).name}')
    assert robot.agent.wait(timeout=10) == code, robot.agent_output()


def test_a_closed_terminal_sends_the_default_action(driven):
    # The script's terminal (or ssh session) goes away: the kernel hangs up its session, and
    # every write to the terminal fails from then on (EIO) while the env closes.
    robot = driven(terminal=True)
    since = time.monotonic()
    robot.hang_up()
    robot.wait_effort(lambda effort: effort == 0.0, since=since, timeout=5.0,
                      what='zero effort after the terminal closed')
    assert robot.agent.wait(timeout=10) == 129


def test_exception_in_training_loop_sends_the_default_action(driven):
    robot = driven('raise')
    since = robot.tell()
    robot.agent.wait(timeout=20)
    assert robot.agent.returncode == 1
    assert 'the training loop crashed' in robot.agent.stderr.read()
    robot.wait_effort(lambda effort: effort == 0.0, since=since, timeout=3.0,
                      what='zero effort after the crash')


def test_stalled_agent_is_stopped_by_the_watchdog(driven):
    robot = driven('stall')  # config/robots/pendulum_sim.yaml: watchdog_timeout 0.5
    since = robot.tell()
    waited = robot.wait_effort(lambda effort: effort == 0.0, since=since, timeout=5.0,
                               what='zero effort from the watchdog')
    assert waited < 3.0
    assert robot.agent.poll() is None  # the process is still alive: it is the watchdog


def test_sigkill_is_caught_by_the_robot_side_command_timeout(driven):
    robot = driven(command_timeout=0.5)
    since = time.monotonic()
    robot.agent.send_signal(signal.SIGKILL)
    robot.agent.wait(timeout=10)
    waited = robot.wait_effort(lambda effort: effort == 0.0, since=since, timeout=5.0,
                               what="zero effort from the sim's command timeout")
    assert 0.2 < waited < 3.0  # nobody sent a default: the robot timed the command out


@pytest.fixture
def make_env():
    envs = []

    def make(namespace: str, **overrides):
        import gymnasium as gym

        import rtgym_ros  # noqa: F401
        overrides.setdefault('reset_timeout', 20.0)
        config = str(REPO / 'config' / 'robots' / 'pendulum_sim.yaml')
        envs.append(gym.make('rtgym_ros/ros-v1', robot_config=config, namespace=namespace,
                             **overrides))
        return envs[-1]

    yield make
    for env in envs:
        env.close()


def test_robot_killed_and_restarted_is_flagged_then_recovered_on_reset(
        probe, log_dir, make_env):
    import numpy as np
    sim = SimProcess(log_dir, 'initial_state:=[3.14159, 0.0]')
    env = make_env(sim.ns)
    env.reset()
    zero = np.zeros(1, np.float32)
    for _ in range(5):
        _, _, _, _, info = env.step(zero)
    assert info['stale'] == []
    sim.stop(signal.SIGKILL)
    for _ in range(10):  # the env keeps its rhythm; the silent sensor is flagged
        _, _, _, _, info = env.step(zero)
    assert info['stale'] == ['joints'] and info['obs_ages']['joints'] > 0.05
    restarted = SimProcess(log_dir, 'initial_state:=[3.14159, 0.0]', namespace=sim.ns)
    try:
        obs, info = env.reset()  # waits (bounded) for the reset service and fresh messages
        assert info['stale'] == []
        for _ in range(5):
            obs, _, _, _, info = env.step(zero)
        assert info['stale'] == [] and info['obs_ages']['joints'] < 0.05
    finally:
        restarted.stop()


def test_reset_with_the_robot_gone_fails_within_its_bound(log_dir, make_env):
    import numpy as np
    sim = SimProcess(log_dir, 'initial_state:=[3.14159, 0.0]')
    # Without Gymnasium's passive checker: after a reset that raised (the retry below) it
    # fails the next step() on its own record of that reset (previous_data None).
    env = make_env(sim.ns, reset_timeout=2.0, disable_env_checker=True)

    def first_reset() -> bool:  # discovery of the reset service may take longer when loaded
        try:
            env.reset()
        except TimeoutError:
            return False
        return True
    try:
        wait_until(first_reset, 30.0, 'a first reset with the robot there')
        env.step(np.zeros(1, np.float32))
    finally:
        sim.stop(signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match='reset'):
        env.reset()
    assert time.monotonic() - start < 2.0 * 2 + 3.0  # service wait + message wait, bounded


BAD_ACTIONS = [
    ('nan', [float('nan')], 'replaced'), ('inf', [float('inf')], 'replaced'),
    ('-inf', [-float('inf')], 'replaced'), ('too big', [1e9], 'clipped'),
    ('too small', [-1e9], 'clipped'), ('int dtype', [1], 'ok'),
    ('float16', 'f16', 'ok'), ('2 values', [0.1, 0.2], 'error'), ('2-d', [[0.1]], 'error'),
    ('empty', [], 'error'), ('string', 'abc', 'error'), ('None', None, 'error'),
    ('object', [object()], 'error'),
]


def test_fuzzed_actions_never_reach_the_robot_as_garbage(probe, log_dir, make_env):
    import numpy as np
    from std_msgs.msg import Float64MultiArray
    sim = SimProcess(log_dir, 'initial_state:=[3.14159, 0.0]', 'command_timeout:=30.0')
    try:
        commands = Recorder(probe, Float64MultiArray, f'{sim.ns}/pendulum/effort_command')
        env = make_env(sim.ns)
        env.reset()
        # DDS discovery is not instant: step a marker action until the probe hears it both ways.
        wait_until(lambda: (env.step(np.array([0.5], np.float32))
                            and any(list(m.data) == [0.5] for _, m in commands.since(0.0))),
                   10.0, 'the probe to hear the env')
        for name, value, expected in BAD_ACTIONS:
            action = np.array([0.3], np.float16) if value == 'f16' else value
            if expected == 'error':
                with pytest.raises(ValueError):
                    env.step(action)
            elif expected == 'replaced':
                with pytest.warns(UserWarning, match='non-finite'):
                    env.step(action)
            else:
                env.step(action)
        env.close()
        wait_until(lambda: commands.since(0.0), 5.0, 'the commands')
        time.sleep(0.3)
        sent = [list(m.data) for _, m in commands.since(0.0)]
        assert sent and all(len(v) == 1 and np.isfinite(v[0]) and -2.0 <= v[0] <= 2.0
                            for v in sent), sent
        assert [2.0] in sent and [-2.0] in sent  # the clipped ones
    finally:
        sim.stop()
