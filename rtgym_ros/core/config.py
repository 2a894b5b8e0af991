"""The env's configuration dictionary: rtgym 0.16's keys, ours, defaults and validation."""

from dataclasses import dataclass
from typing import Any, Callable
import warnings

import numpy as np

from rtgym_ros.core.interface import RealTimeGymInterface
from rtgym_ros.core.validate import (check_bool, check_choice, check_int, check_number,
                                     short_repr)

RTGYM_DEFAULTS: dict[str, Any] = {
    'interface': RealTimeGymInterface,  # replace by your own RealTimeGymInterface subclass
    'interface_args': (),
    'interface_kwargs': {},
    'time_step_duration': 0.05,  # nominal duration of the elastic time-step (s)
    'start_obs_capture': 0.05,  # observation captured this long after the step starts (s)
    'time_step_timeout_factor': 1.0,  # elasticity, in time-steps
    'ep_max_length': np.inf,  # episode truncated after this many steps
    'act_in_obs': True,  # append the action buffer to observations
    'act_buf_len': 1,  # length of the action buffer
    'reset_act_buf': True,  # refill the action buffer with the default action at reset
    'benchmark': False,  # collect timing statistics (env.benchmarks())
    'benchmark_polyak': 0.1,  # running-average factor of the 'polyak' benchmark
    'benchmark_type': 'polyak',  # 'polyak' (running averages) or 'trace' (every timestamp)
    'wait_on_done': False,  # call wait() when an episode ends
    'last_act_on_reset': False,  # reset() applies the last action instead of the default one
    'act_prepro_func': None,  # applied to the action before send_control
    'obs_prepro_func': None,  # applied to the observation (rtgym's order, see env.py)
}

ROS_DEFAULTS: dict[str, Any] = {
    'node_name': 'rtgym_env',  # name of the env's ROS node
    'namespace': '',  # node namespace: relative topics of the interface land under it
    'use_sim_time': False,  # follow /clock (Gazebo, our sim_robot) instead of wall time
    'clock_wait_timeout': 10.0,  # use_sim_time: how long the first reset() waits for /clock
    'domain_id': None,  # ROS domain; None takes ROS_DOMAIN_ID from the environment
    'timer_lead': 0.025,  # wall clock only: deadlines nearer than this are slept, as rtgym
    'timer_last_stretch': 0.0,  # wall clock only: >0 sleeps a deadline's last stretch apart
    'gil_switch_interval': 0.0002,  # sys.setswitchinterval while an env lives; None: leave it
    'gc_freeze': True,  # gc.freeze() at start and each reset: full collections stay short
    'timer_slack': 1e-6,  # s the kernel may end the executor thread's sleeps late; None: leave it
    'watchdog_timeout': None,  # wall s without a new action after a time-step end -> safe action
    'clock_stall_timeout': 5.0,  # wall s a step() waits on a stopped /clock or busy executor
    'on_clock_stall': 'warn',  # then: 'warn' (log once per stall) or 'error' (TimeoutError)
}

ACTION_BUFFER_KEY = 'action_buffer'
"""The key of the action buffer in the Dict observations of ``rtgym_ros/ros-v1``."""

DEFAULT_CONFIG_DICT: dict[str, Any] = {**RTGYM_DEFAULTS, **ROS_DEFAULTS}
"""Copy this, set ``'interface'``, and pass it as ``gym.make(..., config=cfg)``."""

BOOL_KEYS = tuple(key for key, value in DEFAULT_CONFIG_DICT.items() if isinstance(value, bool))
"""Keys that take true or false only ('false' or 0 would otherwise act as True or False)."""


@dataclass
class EnvConfig:
    """A validated, complete configuration (see :data:`DEFAULT_CONFIG_DICT`)."""

    interface: type
    interface_args: tuple
    interface_kwargs: dict
    time_step_duration: float
    start_obs_capture: float
    time_step_timeout_factor: float
    ep_max_length: float
    act_in_obs: bool
    act_buf_len: int
    reset_act_buf: bool
    benchmark: bool
    benchmark_polyak: float
    benchmark_type: str
    wait_on_done: bool
    last_act_on_reset: bool
    act_prepro_func: Callable | None
    obs_prepro_func: Callable | None
    node_name: str
    namespace: str
    use_sim_time: bool
    clock_wait_timeout: float
    domain_id: int | None
    timer_lead: float
    timer_last_stretch: float
    gil_switch_interval: float | None
    gc_freeze: bool
    timer_slack: float | None
    watchdog_timeout: float | None
    clock_stall_timeout: float
    on_clock_stall: str


def resolve_config(config: 'dict | EnvConfig | None') -> EnvConfig:
    """Fill missing keys with defaults and check every value; errors name the key."""
    if isinstance(config, EnvConfig):  # resolved already
        return config
    config = {} if config is None else config
    if not isinstance(config, dict):
        raise TypeError(f'config must be a dict, got {type(config).__name__}')
    unknown = sorted(set(config) - set(DEFAULT_CONFIG_DICT))
    if unknown:
        warnings.warn(f'config keys not used by rtgym_ros (typo?): {unknown}', stacklevel=3)
    values = {**DEFAULT_CONFIG_DICT, **config}

    interface = values['interface']
    if not isinstance(interface, type):
        raise TypeError(f"config['interface'] must be a class, got {short_repr(interface)}")
    if interface is RealTimeGymInterface:
        raise ValueError("config['interface'] must be your RealTimeGymInterface subclass, "
                         'got the abstract RealTimeGymInterface itself')
    for key in ('time_step_duration', 'start_obs_capture', 'time_step_timeout_factor',
                'timer_lead', 'timer_last_stretch', 'clock_wait_timeout'):
        check_number(values[key], key=f"config['{key}']", minimum=0.0)
    ep_max_length = check_number(values['ep_max_length'], key="config['ep_max_length']",
                                 minimum=1, allow_inf=True)
    if ep_max_length != np.inf and not ep_max_length.is_integer():  # a count of steps
        raise ValueError("config['ep_max_length'] must be an integer >= 1 or inf, "
                         f'got {short_repr(values["ep_max_length"])}')
    check_number(values['benchmark_polyak'], key="config['benchmark_polyak']", above=0.0,
                 maximum=1.0)
    act_buf_len = check_int(values['act_buf_len'], key="config['act_buf_len']", minimum=1)
    benchmark_type = str(values['benchmark_type']).lower()
    if benchmark_type not in ('polyak', 'trace'):
        raise ValueError("config['benchmark_type'] must be 'polyak' or 'trace', "
                         f"got {short_repr(values['benchmark_type'])}")
    for key in BOOL_KEYS:
        check_bool(values[key], key=f"config['{key}']")
    for key in ('act_prepro_func', 'obs_prepro_func'):
        if values[key] is not None and not callable(values[key]):
            raise TypeError(f"config['{key}'] must be callable or None, "
                            f'got {short_repr(values[key])}')
    domain_id = values['domain_id']
    if domain_id is not None:
        check_int(domain_id, key="config['domain_id']", minimum=0, maximum=232)
    if values['start_obs_capture'] > values['time_step_duration']:
        # rtgym accepts it silently; every time-step then ends late and most time out.
        capture, duration = values['start_obs_capture'], values['time_step_duration']
        warnings.warn(f"config['start_obs_capture'] ({capture} s) is after the end of the "
                      f'time-step (time_step_duration {duration} s): each step ends late and '
                      'time-steps time out; set start_obs_capture <= time_step_duration',
                      stacklevel=3)
    switch = values['gil_switch_interval']
    if switch is not None:  # CPython keeps it in µs: 1e300 would silently become 0
        check_number(values['gil_switch_interval'], key="config['gil_switch_interval']",
                     minimum=1e-6, maximum=1.0)
    # Strings here; ROS's rules for them are checked by the env before its node is made.
    if not isinstance(values['node_name'], str) or not values['node_name']:
        raise TypeError("config['node_name'] must be a non-empty string, "
                        f"got {short_repr(values['node_name'])}")
    if not isinstance(values['namespace'], str):
        raise TypeError("config['namespace'] must be a string, "
                        f"got {short_repr(values['namespace'])}")
    if not isinstance(values['interface_args'], (list, tuple)):
        raise TypeError("config['interface_args'] must be a tuple or list, "
                        f"got {short_repr(values['interface_args'])}")
    if not isinstance(values['interface_kwargs'], dict):
        raise TypeError("config['interface_kwargs'] must be a dict, "
                        f"got {short_repr(values['interface_kwargs'])}")
    slack = values['timer_slack']
    if slack is not None:
        check_number(slack, key="config['timer_slack']", minimum=1e-9, maximum=1.0)
    watchdog = values['watchdog_timeout']
    if watchdog is not None:
        check_number(values['watchdog_timeout'], key="config['watchdog_timeout']", minimum=0.0)

    return EnvConfig(
        interface=interface,
        interface_args=tuple(values['interface_args']),
        interface_kwargs=dict(values['interface_kwargs']),
        time_step_duration=float(values['time_step_duration']),
        start_obs_capture=float(values['start_obs_capture']),
        time_step_timeout_factor=float(values['time_step_timeout_factor']),
        ep_max_length=values['ep_max_length'],
        act_in_obs=bool(values['act_in_obs']),
        act_buf_len=int(act_buf_len),
        reset_act_buf=bool(values['reset_act_buf']),
        benchmark=bool(values['benchmark']),
        benchmark_polyak=float(values['benchmark_polyak']),
        benchmark_type=benchmark_type,
        wait_on_done=bool(values['wait_on_done']),
        last_act_on_reset=bool(values['last_act_on_reset']),
        act_prepro_func=values['act_prepro_func'],
        obs_prepro_func=values['obs_prepro_func'],
        node_name=values['node_name'],
        namespace=values['namespace'],
        use_sim_time=bool(values['use_sim_time']),
        clock_wait_timeout=float(values['clock_wait_timeout']),
        domain_id=None if domain_id is None else int(domain_id),
        timer_lead=float(values['timer_lead']),
        timer_last_stretch=float(values['timer_last_stretch']),
        gil_switch_interval=None if switch is None else float(switch),
        gc_freeze=bool(values['gc_freeze']),
        timer_slack=None if slack is None else float(slack),
        watchdog_timeout=float(watchdog) if watchdog else None,
        clock_stall_timeout=check_number(values['clock_stall_timeout'],
                                         key="config['clock_stall_timeout']", minimum=0.0),
        on_clock_stall=check_choice(values['on_clock_stall'], ('warn', 'error'),
                                    key="config['on_clock_stall']"),
    )
