"""The env with real rclpy: rtgym's behaviour, timing, threads, errors, benchmarks."""

import sys
import threading
import time
import warnings

from dummy_interfaces import CountingInterface
import gymnasium as gym
import numpy as np
import pytest
from ros_probe import wait_until
import rtgym  # noqa: F401  (registers real-time-gym-ts-v1, the reference)

import rtgym_ros
from rtgym_ros import DEFAULT_CONFIG_DICT
from rtgym_ros.core import timer_slack

T = 0.02


@pytest.fixture
def make_env():
    envs = []

    def make(env_id='rtgym_ros/real-time-gym-v1', **overrides):
        config = dict(DEFAULT_CONFIG_DICT, interface=CountingInterface,
                      time_step_duration=T, start_obs_capture=T, ep_max_length=1000)
        config.update(overrides)
        if env_id != 'rtgym_ros/real-time-gym-v1':
            config = {k: v for k, v in config.items() if k in rtgym.DEFAULT_CONFIG_DICT
                      or k in ('act_prepro_func', 'obs_prepro_func')}
        env = gym.make(env_id, config=config, disable_env_checker=True)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def as_lists(obs):
    return [np.asarray(part).tolist() for part in obs]


def scripted_run(env):
    """Run a fixed sequence of calls: episodes, resets, wait() and set_default_action."""
    record = []
    actions = [np.full(2, 0.1 * (i % 10) - 0.45, dtype=np.float32) for i in range(40)]
    obs, info = env.reset()
    record.append(('reset', as_lists(obs)))
    step = 0
    for episode in range(3):
        for _ in range(9):
            obs, rew, terminated, truncated, info = env.step(actions[step])
            step += 1
            record.append(('step', as_lists(obs), rew, terminated, truncated))
            if terminated or truncated:
                break
        if episode == 1:
            env.unwrapped.wait()
            env.unwrapped.set_default_action(np.full(2, 0.5, dtype=np.float32))
        obs, info = env.reset()
        record.append(('reset', as_lists(obs)))
    return record


CONFIGS = {
    'defaults': {},
    'long_buffer': {'act_buf_len': 3},
    'no_act_in_obs': {'act_in_obs': False},
    'keep_buffer': {'act_buf_len': 3, 'reset_act_buf': False},
    'keep_buffer_last_act': {'act_buf_len': 3, 'reset_act_buf': False,
                             'last_act_on_reset': True},
    'short_episodes': {'ep_max_length': 4, 'act_buf_len': 2},
    'terminations': {'interface_kwargs': {'terminate_every': 5}, 'ep_max_length': 4},
    'wait_on_done': {'wait_on_done': True, 'ep_max_length': 5},
    'prepro': {'act_prepro_func': lambda a: a * 2,
               'obs_prepro_func': lambda o: [np.asarray(x) + 1 for x in o]},
    # The next step starts at t_end with the offered action and captures at once: step()
    # must still return the capture of the step it waited for.
    'capture_at_start': {'start_obs_capture': 0.0},
}


@pytest.mark.parametrize('name', sorted(CONFIGS))
def test_same_results_as_rtgym(make_env, name):
    """Same interface, same calls: rtgym 0.16 ts-v1 and ours return the same transitions."""
    ours = scripted_run(make_env(**CONFIGS[name]))
    reference = scripted_run(make_env('real-time-gym-ts-v1', **CONFIGS[name]))
    assert ours == reference


def test_same_sent_controls_as_rtgym(make_env):
    ours = make_env(act_buf_len=2, ep_max_length=5)
    reference = make_env('real-time-gym-ts-v1', act_buf_len=2, ep_max_length=5)
    scripted_run(ours)
    scripted_run(reference)
    ours.close()
    reference.close()
    ours_sent = ours.unwrapped.interface.sent[:-1]  # ours adds the safe action on close
    assert [a.tolist() for a in ours_sent] == \
        [np.asarray(a).tolist() for a in _rtgym_interface(reference).sent]
    assert ours.unwrapped.interface.sent[-1].tolist() == [0.5, 0.5]  # set_default_action


def _rtgym_interface(env):
    return env.unwrapped._RealTimeEnvTS__interface


def test_observation_shows_previous_action_applied(make_env):
    """The obs returned by step(a_k) was captured while a_(k-1) was being applied."""
    env = make_env()
    env.reset()
    actions = [np.array([0.1 * i, -0.1 * i], dtype=np.float32) for i in range(1, 8)]
    seen = [env.step(action)[0][1] for action in actions]
    np.testing.assert_allclose(seen[0], [0.0, 0.0])
    for previous, observed in zip(actions, seen[1:]):
        np.testing.assert_allclose(observed, previous)


def test_action_buffer_contents(make_env):
    env = make_env(act_buf_len=3)
    obs, _ = env.reset()
    assert len(obs) == 2 + 3
    for part in obs[2:]:
        np.testing.assert_array_equal(part, [0.0, 0.0])
    a1, a2 = np.array([0.1, 0.2], np.float32), np.array([0.3, 0.4], np.float32)
    env.step(a1)
    obs = env.step(a2)[0]
    np.testing.assert_array_equal(obs[2], [0.0, 0.0])
    np.testing.assert_array_equal(obs[3], a1)
    np.testing.assert_array_equal(obs[4], a2)
    assert env.observation_space.contains(obs)


def test_a_caller_that_reuses_its_action_array_changes_no_buffered_action(make_env):
    env = make_env(act_buf_len=2)
    env.reset()
    action = np.array([0.1, 0.2], np.float32)
    env.step(action)
    action[:] = [0.3, 0.4]  # the caller writes its next action into the same array
    obs = env.step(action)[0]
    action[:] = 0.0
    assert obs[2].tolist() == pytest.approx([0.1, 0.2])  # the buffer: the step before
    assert obs[3].tolist() == pytest.approx([0.3, 0.4])


def test_an_action_handed_over_late_is_sent_as_given_though_the_caller_reuses_its_array(
        make_env):
    # step() called after t_end returns before the executor thread sent the action.
    env = make_env()
    env.reset()
    action = np.zeros(2, np.float32)
    given = []
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # the late steps time out
        for i in range(1, 16):
            time.sleep(1.3 * T)
            action[:] = 0.01 * i
            given.append(action.tolist())
            env.step(action)
            action[:] = -0.5  # at once: while the executor thread may not have sent it yet
        env.unwrapped.stop()
    sent = [control.tolist() for control in env.unwrapped.interface.sent[1:]]
    assert sent == given


def test_truncation_then_step_raises(make_env):
    env = make_env(ep_max_length=3)
    env.reset()
    flags = [env.step(np.zeros(2, np.float32))[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]
    with pytest.raises(RuntimeError, match='Call reset'):
        env.unwrapped.step(np.zeros(2, np.float32))


def test_termination_wins_over_truncation(make_env):
    env = make_env(ep_max_length=2, interface_kwargs={'terminate_every': 2})
    env.reset()
    env.step(np.zeros(2, np.float32))
    _, _, terminated, truncated, _ = env.step(np.zeros(2, np.float32))
    assert (terminated, truncated) == (True, False)
    assert isinstance(terminated, bool) and isinstance(truncated, bool)


def test_capture_spacing_follows_the_time_step(make_env):
    env = make_env(time_step_duration=0.02, start_obs_capture=0.01)
    env.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        for _ in range(40):
            env.step(np.zeros(2, np.float32))
            time.sleep(0.005)  # an agent that computes for a quarter step
    spacing = np.diff(env.unwrapped.interface.capture_times[5:])
    assert np.median(spacing) == pytest.approx(0.02, abs=0.002)
    assert not [w for w in caught if 'timed out' in str(w.message)]


def test_time_out_warnings_leave_no_record_behind(make_env):
    # Python's default filter remembers each warning text it showed; each time-out's text is
    # new (it holds the elapsed time), so that record would grow for as long as the env runs.
    import rtgym_ros.env as env_module
    env = make_env()
    env.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('default')
        for _ in range(3):
            env.step(np.zeros(2, np.float32))
            time.sleep(3 * T)
        env.step(np.zeros(2, np.float32))
        # Each late step's warning comes from the executor thread, after its step() returned.
        wait_until(lambda: len([w for w in caught if 'timed out' in str(w.message)]) >= 3,
                   5.0, 'three time-out warnings')
        registry = getattr(env_module, '__warningregistry__', {})
        remembered = [key for key in registry if 'timed out' in str(key)]
    assert remembered == []


def test_time_out_warns_and_wait_does_not(make_env):
    env = make_env()
    env.reset()
    env.step(np.zeros(2, np.float32))
    with pytest.warns(UserWarning, match='timed out'):
        time.sleep(4 * T)
        env.step(np.zeros(2, np.float32))
        env.step(np.zeros(2, np.float32))  # the warning comes when that step starts
        time.sleep(T)
    env.unwrapped.wait()
    time.sleep(4 * T)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        env.reset()
        env.step(np.zeros(2, np.float32))
        time.sleep(T / 2)
    assert not [w for w in caught if 'timed out' in str(w.message)]
    assert not env.unwrapped.is_waiting


def test_every_interface_call_runs_on_the_executor_thread(make_env):
    env = make_env(ep_max_length=3)
    env.reset()
    for _ in range(3):
        env.step(np.zeros(2, np.float32))
    env.unwrapped.wait()
    assert env.render() == 'rendered'
    interface = env.unwrapped.interface
    assert interface.threads == {'rtgym_ros:rtgym_env'}
    assert threading.current_thread().name not in interface.threads


class SlackRecordingInterface(CountingInterface):
    """Records the timer slack of the thread that captures: the one that sleeps the deadlines."""

    def get_obs_rew_terminated_info(self):
        self.capture_slack = timer_slack.of_this_thread()
        return super().get_obs_rew_terminated_info()


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='timer slack is Linux only')
@pytest.mark.parametrize('slack', [1e-6, 2e-5, None])
def test_the_thread_that_sleeps_the_deadlines_has_the_configured_timer_slack(make_env, slack):
    ours = timer_slack.of_this_thread()
    env = make_env(interface=SlackRecordingInterface, timer_slack=slack)
    env.reset()
    env.step(np.zeros(2, np.float32))
    expected = ours if slack is None else slack  # None: what the thread inherited from ours
    assert env.unwrapped.interface.capture_slack == pytest.approx(expected)
    assert timer_slack.of_this_thread() == ours  # the user's thread keeps its own


def voluntary_switches(native_id: int) -> int:
    """How often the thread ``native_id`` of this process blocked and was woken (Linux)."""
    with open(f'/proc/self/task/{native_id}/status') as status:
        for line in status:
            if line.startswith('voluntary_ctxt_switches:'):
                return int(line.split()[1])
    raise AssertionError('no voluntary_ctxt_switches line')


class WakeCountingInterface(CountingInterface):
    """Records the voluntary context switches of the thread that sleeps to the deadlines."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.switches = []

    def get_obs_rew_terminated_info(self):
        self.switches.append(voluntary_switches(threading.get_native_id()))
        return super().get_obs_rew_terminated_info()


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='reads /proc/self/task')
def test_the_last_stretch_is_one_more_sleep_per_deadline_unless_it_is_zero(make_env):
    per_step = {}
    for stretch in (0.005, 0.0):  # T = 20 ms: two sleeps per deadline, then one
        env = make_env(interface=WakeCountingInterface, timer_last_stretch=stretch)
        env.reset()
        for _ in range(25):
            env.step(np.zeros(2, np.float32))
        switches = np.diff(env.unwrapped.interface.switches[5:])
        per_step[stretch] = float(np.median(switches))
        env.close()
    assert per_step == {0.005: 2.0, 0.0: 1.0}, per_step


def test_an_action_given_in_time_starts_its_step_at_t_end_without_a_hand_over(make_env):
    # step(a) offers a before it waits: the executor thread starts the next step with it right
    # after the capture at t_end, on the same wake-up, instead of being handed it afterwards.
    env = make_env(ep_max_length=100, time_step_duration=0.05, start_obs_capture=0.05)
    runner = env.unwrapped._runner
    hand_overs = []
    hand_over = runner.hand_over
    runner.hand_over = lambda *args: (hand_overs.append(1), hand_over(*args))
    env.reset()  # a hand-over: nothing to offer before the first step
    actions = [np.full(2, index / 100, dtype=np.float32) for index in range(20)]
    for action in actions:
        env.step(action)  # called again at once: offered a whole time-step before t_end
    env.unwrapped.wait()
    assert [a.tolist() for a in env.unwrapped.interface.sent[-20:]] == \
        [a.tolist() for a in actions]
    # Not none: the executor's loop takes a turn about once a second (its timers), and a
    # loaded machine can hold this thread past t_end; those steps are handed over.
    assert len(hand_overs) <= 1 + 10, f'{len(hand_overs)} hand-overs for 20 steps'


class TimerInterface(CountingInterface):
    """Makes a 0.1 s timer on the env's main node; its callbacks join the recorded calls."""

    def bind_node(self, node, io_node=None):
        self.timer = node.create_timer(0.1, lambda: self._record('timer'))


def test_the_main_nodes_timers_run_inside_back_to_back_steps_not_before_an_action(make_env):
    # T = 10 ms is slept on the executor thread, step after step: the node's timers get the
    # thread while a step waits for its capture, after its action was sent.
    env = make_env(interface=TimerInterface, time_step_duration=0.01, start_obs_capture=0.01,
                   ep_max_length=10**6)
    env.reset()
    for _ in range(100):
        env.step(np.zeros(2, np.float32))
        time.sleep(0.005)
    env.unwrapped.wait()
    calls = [c for c in env.unwrapped.interface.calls if c in ('send_control', 'get_obs', 'timer')]
    steps = [calls[index - 1:index + 2] for index, call in enumerate(calls) if call == 'timer']
    assert len(steps) >= 3, f'the timer fired {len(steps)} times in 1 s of 0.1 s periods'
    inside = sum(step == ['send_control', 'timer', 'get_obs'] for step in steps)
    # A late agent hands its action over through the loop, whose timers may then run first.
    assert inside >= len(steps) / 2, steps


def test_setters_change_the_schedule(make_env):
    env = make_env(time_step_duration=0.01, start_obs_capture=0.01)
    base = env.unwrapped
    env.reset()
    for _ in range(5):
        env.step(np.zeros(2, np.float32))
    base.set_time_step_duration(0.05, time_step_timeout_factor=2.0)
    base.set_start_obs_capture(0.05)
    base.set_ep_max_length(12)
    assert base.time_step_timeout == pytest.approx(0.1)
    count = len(base.interface.capture_times)
    flags = [env.step(np.zeros(2, np.float32))[3] for _ in range(7)]
    spacing = np.diff(base.interface.capture_times[count:])
    assert np.median(spacing) == pytest.approx(0.05, abs=0.005)
    assert flags == [False] * 6 + [True]  # 5 + 7 steps reach the new limit of 12


def test_polyak_benchmarks(make_env):
    env = make_env(benchmark=True, benchmark_polyak=0.5)
    env.reset()
    for _ in range(20):
        env.step(np.zeros(2, np.float32))
    stats = env.unwrapped.benchmarks()
    assert set(stats) == {'time_step_duration', 'step_duration', 'join_duration',
                          'inference_duration', 'send_control_duration', 'get_obs_duration'}
    average, deviation = stats['time_step_duration']
    assert 0.5 * T < average < 2.5 * T  # loose: a loaded 2-core machine stretches steps
    assert deviation >= 0.0
    assert all(average is not None for average, _ in stats.values())


def test_trace_benchmarks(make_env):
    env = make_env(benchmark=True, benchmark_type='trace')
    env.reset()
    for _ in range(10):
        env.step(np.zeros(2, np.float32))
    trace = env.unwrapped.benchmarks()
    assert len(trace['clock']['start_step']) == 11  # the reset counts as a step
    assert np.median(trace['deltas']['time_step_duration'][2:]) == pytest.approx(T, abs=0.005)
    assert len(trace['clock']['start_get_obs']) >= 10


def test_benchmarks_disabled_is_an_error(make_env):
    env = make_env()
    with pytest.raises(AssertionError, match='benchmark=True'):
        env.unwrapped.benchmarks()


def test_interface_error_surfaces_in_step_and_robot_gets_default(make_env):
    env = make_env(interface_kwargs={'fail_on_capture': 3})
    env.reset()
    action = np.array([0.7, 0.7], np.float32)
    env.step(action)
    env.step(action)
    with pytest.raises(RuntimeError, match='sensor exploded'):
        env.step(action)
    assert env.unwrapped.interface.sent[-1].tolist() == [0.0, 0.0]
    env.reset()  # the env recovers on the next episode
    env.step(action)


class _Uncopyable(list):
    """An action of which the env cannot take its own copy."""

    def __deepcopy__(self, memo):
        raise TypeError('this action cannot be copied')


def test_an_action_the_env_cannot_copy_raises_in_step_and_the_robot_gets_default(make_env):
    env = make_env()
    env.reset()
    env.step(np.array([0.7, 0.7], np.float32))
    with pytest.raises(TypeError, match='this action cannot be copied'):
        env.step(_Uncopyable([0.5, 0.5]))  # offered in time: sent at t_end, then not copied
    sent = env.unwrapped.interface.sent
    # Posted to the executor thread (this interface sends nothing from another thread).
    wait_until(lambda: sent[-1].tolist() == [0.0, 0.0], 2.0,
               lambda: f'the last action sent is {sent[-1].tolist()}, not the default')
    time.sleep(5 * T)  # and nothing follows it
    assert sent[-1].tolist() == [0.0, 0.0]


def test_the_action_of_a_step_that_raised_is_never_sent(make_env):
    # step() offered its action before its wait found the time-step failed: the next
    # episode's first time-step must not take that offer at its end (here the agent is late).
    env = make_env(interface_kwargs={'fail_on_capture': 3})
    env.reset()
    env.step(np.array([0.1, 0.1], np.float32))
    env.step(np.array([0.2, 0.2], np.float32))
    with pytest.raises(RuntimeError, match='sensor exploded'):
        env.step(np.array([0.7, 0.7], np.float32))
    env.reset()
    time.sleep(5 * T)
    env.close()
    sent = [[round(float(x), 3) for x in action] for action in env.unwrapped.interface.sent]
    assert sent[:2] == [[0.0, 0.0], [0.1, 0.1]] and [0.7, 0.7] not in sent


def test_close_is_idempotent_and_sends_default(make_env):
    env = make_env()
    env.reset()
    env.step(np.array([0.5, 0.5], np.float32))
    env.close()
    env.close()
    assert env.unwrapped.interface.sent[-1].tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match='closed'):
        env.unwrapped.step(np.zeros(2, np.float32))


@pytest.mark.parametrize('mid_step', [False, True])
def test_rtgym_methods_after_close_say_the_env_is_closed(make_env, mid_step):
    env = make_env(ep_max_length=2)
    env.reset()
    for _ in range(1 if mid_step else 2):  # closed in the episode, or after it ended
        env.step(np.zeros(2, np.float32))
    env.close()
    inner = env.unwrapped
    calls = {'stop': (), 'wait': (), 'set_default_action': (np.zeros(2, np.float32),),
             'set_time_step_duration': (0.05,), 'set_start_obs_capture': (0.01,),
             'set_ep_max_length': (5,)}
    for name, args in calls.items():
        with pytest.raises(RuntimeError, match='^the env is closed$'):
            getattr(inner, name)(*args)


def test_several_envs_in_one_process_then_no_leaked_threads(make_env):
    before = {t.name for t in threading.enumerate()}
    envs = [make_env(node_name=f'env_{i}') for i in range(3)]
    for env in envs:
        env.reset()
    for _ in range(5):
        for env in envs:
            env.step(np.zeros(2, np.float32))
    for env in envs:
        env.close()
    leftover = {t.name for t in threading.enumerate()} - before
    assert not [name for name in leftover if name.startswith('rtgym_ros')]


class _Interrupted(KeyboardInterrupt):
    """A Ctrl-C that comes while the env is being made, after its node started."""


def test_a_make_interrupted_after_the_node_started_leaves_no_thread(monkeypatch):
    before = {t.name for t in threading.enumerate()}

    def interrupted(*args, **kwargs):
        raise _Interrupted

    import rtgym_ros.env as env_module
    monkeypatch.setattr(env_module, 'StallMonitor', interrupted)
    with pytest.raises(_Interrupted):
        rtgym_ros.RealTimeEnv(dict(DEFAULT_CONFIG_DICT, interface=CountingInterface,
                                   node_name='interrupted_env'))
    leftover = {t.name for t in threading.enumerate()} - before
    assert not [name for name in leftover if name.startswith('rtgym_ros')], leftover
    monkeypatch.undo()
    env = rtgym_ros.RealTimeEnv(dict(DEFAULT_CONFIG_DICT, interface=CountingInterface,
                                     node_name='interrupted_env'))
    try:
        assert env.unwrapped._runtime.node.get_name() == 'interrupted_env'  # freed
    finally:
        env.close()


def test_bad_config_fails_with_the_key():
    with pytest.raises(ValueError, match='act_buf_len'):
        rtgym_ros.RealTimeEnv(dict(DEFAULT_CONFIG_DICT, interface=CountingInterface,
                                   act_buf_len=0))
    with pytest.raises(ValueError, match='benchmark_type'):
        rtgym_ros.RealTimeEnv(dict(DEFAULT_CONFIG_DICT, interface=CountingInterface,
                                   benchmark_type='fancy'))
    with pytest.raises(ValueError, match='interface'):
        rtgym_ros.RealTimeEnv(dict(DEFAULT_CONFIG_DICT))


def test_an_action_buffer_past_memory_fails_with_the_key_and_leaves_no_thread():
    # Unchecked, the observation space's Tuple alone would take 8 bytes a buffered action.
    before = {thread.name for thread in threading.enumerate()}
    with pytest.raises(ValueError, match=r"config\['act_buf_len'\]: 1000000000000 buffered "
                                         r'actions take .* GB, more than the .* GB of memory'):
        rtgym_ros.RealTimeEnv(dict(DEFAULT_CONFIG_DICT, interface=CountingInterface,
                                   act_buf_len=10**12))
    leftover = {thread.name for thread in threading.enumerate()} - before
    assert not [name for name in leftover if name.startswith('rtgym_ros')], leftover


def test_missing_keys_take_defaults_and_unknown_keys_warn(make_env):
    env = gym.make('rtgym_ros/real-time-gym-v1', config={'interface': CountingInterface},
                   disable_env_checker=True)
    try:
        assert env.unwrapped.time_step_duration == DEFAULT_CONFIG_DICT['time_step_duration']
        assert env.unwrapped.act_buf_len == 1
    finally:
        env.close()
    with pytest.warns(UserWarning, match='time_step_duraton'):
        env = gym.make('rtgym_ros/real-time-gym-v1', disable_env_checker=True,
                       config={'interface': CountingInterface, 'time_step_duraton': 0.1})
    env.close()


def test_watchdog_sends_default_when_the_agent_stalls(make_env):
    env = make_env(watchdog_timeout=0.1)
    env.reset()
    action = np.array([0.7, 0.7], np.float32)
    for _ in range(5):
        env.step(action)
        time.sleep(T / 2)  # in time: no stall
    assert env.unwrapped.stalls == 0
    time.sleep(0.4)  # the agent stalls
    interface = env.unwrapped.interface
    assert env.unwrapped.stalls == 1
    assert interface.sent[-1].tolist() == [0.0, 0.0]
    with pytest.warns(UserWarning, match='timed out'):
        env.step(action)
        env.step(action)
        time.sleep(T)
    assert interface.sent[-1].tolist() == pytest.approx([0.7, 0.7])


def test_no_watchdog_by_default_like_rtgym(make_env):
    env = make_env()
    env.reset()
    env.step(np.array([0.7, 0.7], np.float32))
    time.sleep(0.3)
    assert env.unwrapped.interface.sent[-1].tolist() == pytest.approx([0.7, 0.7])


def test_wait_disarms_the_watchdog(make_env):
    env = make_env(watchdog_timeout=0.1, ep_max_length=3, wait_on_done=True)
    env.reset()
    for _ in range(3):
        env.step(np.array([0.7, 0.7], np.float32))
    time.sleep(0.4)  # between episodes (after wait()), e.g. a training update
    assert env.unwrapped.stalls == 0
    assert env.unwrapped.interface.calls[-1] == 'wait'


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='reads /proc/self/task')
def test_a_paused_env_wakes_its_executor_thread_only_for_its_timers(make_env):
    # Paused between episodes (a training update), the executor thread serves the log flush
    # (1 Hz): each wake-up of an idle executor costs ~0.2 ms of CPU for nothing.
    env = make_env()
    env.reset()
    env.step(np.zeros(2, np.float32))
    env.unwrapped.wait()
    executor_thread = env.unwrapped._runtime.executor_thread
    time.sleep(0.5)
    before = voluntary_switches(executor_thread.native_id)
    time.sleep(3.0)
    woken = voluntary_switches(executor_thread.native_id) - before
    assert woken <= 12, f'{woken} wake-ups in 3 s while paused'


def test_set_default_action_keeps_its_own_copy(make_env):
    env = make_env()
    default = np.full(2, 0.5, np.float32)
    env.unwrapped.set_default_action(default)
    default[:] = 1.0  # the caller reuses its array: the robot's safe action stays
    assert env.unwrapped.safe_action().tolist() == [0.5, 0.5]


@pytest.mark.parametrize('bad', [[np.nan, 0.0], [5.0, 0.0], [0.0], np.zeros(3), 'stop', None])
def test_set_default_action_refuses_what_could_not_stop_the_robot(make_env, bad):
    # The default action is sent unchecked on close, errors and stalls.
    env = make_env()
    with pytest.raises(ValueError, match=r'set_default_action: expected an action of Box'):
        env.unwrapped.set_default_action(bad)
    env.unwrapped.set_default_action(np.full(2, 0.5))  # float64 of the right values
    assert env.unwrapped.default_action.dtype == np.float32
    assert env.unwrapped.safe_action().tolist() == [0.5, 0.5]
