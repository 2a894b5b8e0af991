"""
The agent node: run episodes of ``rtgym_ros/ros-v1`` on a robot config with a policy.

``agent --ros-args --params-file config/robots/pendulum_sim.yaml -p policy:=pendulum_swingup``. The
params file is the robot config; the agent's own parameters (``policy``, ``episodes``,
``seed``, ``timing_csv``, ``timing_plot``, ``progress``) may sit in the same file. Prints one
line per episode and a summary table; Ctrl-C or SIGTERM stops the robot (default action) and
exits cleanly. ``agent --help`` lists the parameters and starts nothing.
"""

import os
import signal
import sys
import time
from typing import Any

import numpy as np

from rtgym_ros.core.validate import check_bool, check_int, check_string
from rtgym_ros.nodes.command_line import (default_text, format_help, ParameterHelp, type_name,
                                          wants_help)
from rtgym_ros.nodes.episode_logs import action_labels, EpisodeRecord, write_csv, write_plot
from rtgym_ros.nodes.launch_logic import check_policy
from rtgym_ros.nodes.policies import make_policy
from rtgym_ros.nodes.signals import bounded_teardown, ignore_stop_signals, stop_signals
from rtgym_ros.robot.env import RosEnv
from rtgym_ros.robot.loader import refuse_name_parameters
from rtgym_ros.robot.spec import AGENT_DEFAULTS
from rtgym_ros.ros.parameters import ParametersUnreadable, read_node_parameters
from rtgym_ros.stop_signal import silence_a_hung_up_terminal

# The agent's own parameters; their defaults are AGENT_DEFAULTS.
DESCRIPTIONS = {
    'policy': 'zero (the default action), random (uniform in the action space), '
              "pendulum_swingup, cartpole_lqr, 'sb3:ALGO:PATH' (a saved Stable-Baselines3 "
              "model, pip install 'rtgym_ros[train]') or 'package.module:function' (a callable "
              'f(obs) -> action).',
    'episodes': 'Episodes to run.',
    'seed': 'Episode k resets with seed + k; also seeds the random policy.',
    'timing_csv': 'Write one row per step to this CSV file: timing, reward, time-out, each '
                  "slot's observation age and stale flag, the action; empty: no file.",
    'timing_plot': "Write a PNG of the returns per episode, each slot's observation age and "
                   "the capture timing (pip install 'rtgym_ros[plot]'); empty: no plot.",
    'progress': 'Print one line per episode.',
}


def help_text() -> str:
    """Return ``agent --help``: the agent's parameters, then where the robot config's are."""
    return format_help(
        usage=['agent --ros-args --params-file ROBOT_CONFIG [-p NAME:=VALUE ...] '
               '[-r __ns:=/NS]',
               'agent -h | --help'],
        summary='Run episodes of rtgym_ros/ros-v1 on a robot config with a policy, printing '
                'one line per episode and a summary. SIGINT or SIGTERM stops the robot with '
                'its default action and exits 0; exit 1: the run stopped on an error, or rcl '
                'could not be asked for the parameters; exit 2: '
                'invalid parameters, or a missing or invalid robot config.',
        parameters=[ParameterHelp(name, type_name(default), default_text(default),
                                  DESCRIPTIONS[name])
                    for name, default in AGENT_DEFAULTS.items()],
        epilog='Every other parameter is a key of the robot config (a ROS 2 params file): the '
               "env's keys such as time_step_duration and ep_max_length, use_sim_time, the "
               'robot keys, actions and observations, and record (-p record:=DIR writes the '
               'episodes to the new rosbag2 directory DIR, in MCAP; pip install '
               "'rtgym_ros[record]'); see docs/configuration.md and docs/nodes/agent.md in the "
               'rtgym_ros sources, and the shipped configs in share/rtgym_ros/config/robots/.')


def agent_options(parameters: dict[str, Any]) -> dict[str, Any]:
    """
    Take the agent's own parameters out of ``parameters``, checked, defaults applied.

    Checked as rcl types them (``-p episodes:=2.5`` is a double, ``-p policy:=1`` an integer),
    so that a mistake exits 2 before the robot moves, naming the key.
    """
    options = {key: parameters.pop(key, default) for key, default in AGENT_DEFAULTS.items()}
    for key in ('policy', 'timing_csv', 'timing_plot'):
        check_string(options[key], key=key)
    for key in ('timing_csv', 'timing_plot'):  # written after the run: say so before it
        if options[key]:
            _check_writable(options[key], key=key)
    check_policy(options['policy'])
    check_int(options['episodes'], key='episodes', minimum=1)
    check_int(options['seed'], key='seed', minimum=0)  # numpy refuses negative seeds
    check_bool(options['progress'], key='progress')
    return options


def _check_writable(path: str, *, key: str) -> None:
    """Refuse a file path whose directory is missing or not writable, naming ``key``."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f'{key} must be a file path, got the directory {path!r}')
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise ValueError(f'{key}: cannot write {path!r}: the directory {folder} is missing or '
                         'not writable')


def run_episode(env: Any, policy: Any, index: int, *, seed: int | None) -> EpisodeRecord:
    record = EpisodeRecord(index)
    timeouts_before = seen = env.unwrapped.timeouts
    if hasattr(policy, 'reset'):
        policy.reset()
    started = time.perf_counter()
    obs, _ = env.reset(seed=seed)
    done = False
    while not done:
        if _stopping:  # its KeyboardInterrupt was lost on the way (a finalizer swallows it)
            raise KeyboardInterrupt
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        done = terminated or truncated
        # A time-out counted since the last step is this one's: its time-step started late.
        timeouts = env.unwrapped.timeouts
        record.add_step(reward, info, action=env.unwrapped.act_buf[-1],
                        timed_out=info.get('timed_out', timeouts > seen))
        seen = timeouts
    record.wall_time = time.perf_counter() - started
    record.timeouts = env.unwrapped.timeouts - timeouts_before
    return record


def episode_line(record: EpisodeRecord, period: float) -> str:
    errors = record.spacing_errors(period) * 1e3
    p99 = np.percentile(errors, 99) if errors.size else np.nan
    return (f'episode {record.index:3d} | steps {len(record.rewards):5d} | '
            f'return {record.ret:10.2f} | step error p99 {p99:6.3f} ms | '
            f'time-outs {record.timeouts:3d} | stale {record.stale_steps:4d} | '
            f'{record.wall_time:6.1f} s')


def summary_table(records: list[EpisodeRecord], period: float) -> str:
    errors = np.concatenate([r.spacing_errors(period) for r in records]) * 1e3
    returns = np.array([r.ret for r in records])
    rows = [
        ('episodes', f'{len(records)}'),
        ('return mean / min / max', f'{returns.mean():.2f} / {returns.min():.2f} / '
                                    f'{returns.max():.2f}'),
        ('steps', f'{sum(len(r.rewards) for r in records)}'),
        ('capture spacing error p50 / p99 / max (ms)',
         f'{np.percentile(errors, 50):.3f} / {np.percentile(errors, 99):.3f} / '
         f'{errors.max():.3f}' if errors.size else '-'),
        ('time-outs', f'{sum(r.timeouts for r in records)}'),
        ('steps with stale observations', f'{sum(r.stale_steps for r in records)}'),
        ('max observation age (ms)',
         f'{np.nanmax(np.concatenate([r.obs_ages for r in records])) * 1e3:.1f}'),
    ]
    width = max(len(name) for name, _ in rows)
    return '\n'.join(f'{name:<{width}} | {value}' for name, value in rows)


def main(args: list[str] | None = None) -> int:
    args = sys.argv if args is None else args
    try:
        if wants_help(args, prog='agent'):
            print(help_text(), end='')
            return 0
    except ValueError as error:
        print(f'agent: {error}', file=sys.stderr)
        return 2
    _raise_on_stop_signals()
    try:
        given = read_node_parameters(args, default_node_name='agent', source='agent --ros-args')
        parameters = dict(given.parameters)
        options = agent_options(parameters)
        refuse_name_parameters(parameters, source='agent --ros-args')
    except ValueError as error:
        print(f'agent: invalid parameters: {error}', file=sys.stderr)
        return 2
    except ParametersUnreadable as error:
        print(f'agent: {error}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return _interrupted_before_the_robot_moved()
    if not parameters:
        print('agent: no robot config: give one with --ros-args --params-file ROBOT_CONFIG '
              '(see agent --help)', file=sys.stderr)
        return 2
    try:
        env = RosEnv(node_name=given.node_name, namespace=given.namespace, command_line=False,
                     **parameters)
    except KeyboardInterrupt:  # the env closed itself: nothing was sent to the robot
        return _interrupted_before_the_robot_moved()
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f'agent: invalid robot config: {error}', file=sys.stderr)
        return 2
    except ParametersUnreadable as error:  # robot_config: a params file read through rcl
        print(f'agent: {error}', file=sys.stderr)
        return 1
    records: list[EpisodeRecord] = []
    period = env.time_step_duration
    status = 0
    try:
        policy = make_policy(options['policy'], env, seed=options['seed'])
        print(f"agent: policy {options['policy']}, {options['episodes']} episode(s) at "
              f'{1 / period:g} Hz on {given.namespace.rstrip("/")}/{given.node_name}',
              flush=True)
        for index in range(options['episodes']):
            record = run_episode(env, policy, index, seed=options['seed'] + index)
            records.append(record)
            if options['progress']:
                print(episode_line(record, period), flush=True)
    except KeyboardInterrupt:
        print('agent: interrupted, stopping the robot', file=sys.stderr)
    except (TimeoutError, RuntimeError, ValueError) as error:
        print(f'agent: stopped, the robot got its default action: {error}', file=sys.stderr)
        status = 1
    finally:
        ignore_stop_signals()  # a second Ctrl-C must not cut the robot's stop short
        with bounded_teardown():  # the default action goes out first, then DDS is torn down
            env.close()
    if records:
        print('\n' + summary_table(records, period))
        if options['timing_csv']:
            write_csv(options['timing_csv'], records, period,
                      action_names=action_labels(env.robot.actions))
        if options['timing_plot']:
            write_plot(options['timing_plot'], records, period,
                       title=f"agent {given.full_name}: policy {options['policy']}, "
                             f'{len(records)} episode(s) at {1 / period:g} Hz',
                       max_ages={slot.name: slot.max_age for slot in env.robot.observations})
    return status


_stopping = False  # a stop signal came; the first one raised KeyboardInterrupt


def _raise_on_stop_signals() -> None:
    """
    End the run alike on SIGINT, SIGTERM and SIGHUP: robot stopped, clean exit.

    SIGTERM comes from ros2 launch or systemd, SIGHUP from a closed terminal (under ``nohup``
    it stays ignored).

    SIGINT too, as rclpy.init() does: a process started with SIGINT ignored (``agent ... &``
    in a non-interactive shell) would otherwise keep ignoring it. Only the first one raises:
    a second one (Ctrl-C under ``ros2 launch`` comes twice) could land in the teardown before
    it ignores them, and cut the robot's stop short. Should the first one's KeyboardInterrupt
    be lost on its way (a finalizer swallows it), the episode loop raises it again.
    """
    global _stopping
    _stopping = False

    def handler(signum: int, frame: Any) -> None:
        global _stopping
        if signum == signal.SIGHUP:
            silence_a_hung_up_terminal()  # the stop's messages must not fail on their way
        if not _stopping:
            _stopping = True
            raise KeyboardInterrupt

    for signum in stop_signals():
        signal.signal(signum, handler)


def _interrupted_before_the_robot_moved() -> int:
    print('agent: interrupted before the first episode; the robot was not moved',
          file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
