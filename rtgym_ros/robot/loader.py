"""
A robot described by configuration: validated into specs before any node exists.

Every mistake is reported at load with the offending key (``actions.effort.low must have 1
values, got 2``). The only code a config can name is a ``package.module:function`` callable for
reward, termination, reset, pause, unpause, ``obs_prepro_func`` and ``act_prepro_func``;
nothing is eval'd.
"""

import dataclasses
import math
from pathlib import Path
import sys
from typing import Any, Callable

import gymnasium.spaces as spaces
import numpy as np
from rclpy.exceptions import InvalidServiceNameException, InvalidTopicNameException
from rclpy.expand_topic_name import expand_topic_name
from rclpy.validate_topic_name import validate_topic_name
from rtgym_ros.core.config import ACTION_BUFFER_KEY, ROS_DEFAULTS, RTGYM_DEFAULTS
from rtgym_ros.core.validate import (check_bool, check_choice, check_int, check_number,
                                     check_string, check_vector, is_number, short_repr)
from rtgym_ros.msgconv.fields import has_header, JOINT_TRAJECTORY
from rtgym_ros.msgconv.readers import compile_reader, FieldReader
from rtgym_ros.msgconv.type_names import (interface_name, load_message_type,
                                          load_service_type)
from rtgym_ros.msgconv.writers import compile_writer
from rtgym_ros.record.config import record_spec
from rtgym_ros.robot.callables import load_callable
from rtgym_ros.robot.params_file import (COMMAND_LINE, command_line_parameters, has_ros_args,
                                         load_params_file)
from rtgym_ros.robot.qos import qos_from_config
from rtgym_ros.robot.services import compile_service, ServiceSpec, set_field
from rtgym_ros.robot.spec import (ACTION_POLICIES, ActionGroup, AGENT_DEFAULTS,
                                  BOUNDS_POLICIES, check_one_group_per_topic, LAYOUTS,
                                  ObservationSlotSpec, physics_steps, ROBOT_DEFAULTS,
                                  RobotOptions, RobotSpec, SignalSpec, STALE_POLICIES,
                                  StaleTruncation, STEPPING, StepSpec)
from rtgym_ros.robot.transforms import compile_transform
from rtgym_ros.ros.rcl_parameters import rcl_reason

# rtgym keys that name Python objects cannot come from YAML.
_CODE_KEYS = ('interface', 'interface_args', 'interface_kwargs')
# rtgym keys that name a function: 'package.module:function' in a file, or the function itself.
PREPRO_KEYS = ('act_prepro_func', 'obs_prepro_func')
ENV_KEYS = tuple(k for k in (*RTGYM_DEFAULTS, *ROS_DEFAULTS) if k not in _CODE_KEYS)
# The node's name and namespace: never parameters (refuse_name_parameters).
NAME_KEYS = ('node_name', 'namespace')
_ROBOT_KEYS = ('actions', 'observations', 'reward', 'termination', 'reset', 'pause',
               'unpause', 'step', 'record', *ROBOT_DEFAULTS)
# Every key a config may give: the env's, the robot's, and the agent's (which the env drops).
_CONFIG_KEYS = frozenset((*ENV_KEYS, *_ROBOT_KEYS, *AGENT_DEFAULTS))


def load_robot_config(path: str | Path | None = None, *, node_name: str | None = None,
                      command_line: bool = False,
                      **overrides: Any) -> tuple[dict[str, Any], RobotSpec]:
    """
    Read a params file as rcl reads it for the env's node, apply ``overrides``, check all.

    The sections that apply are those rcl gives the node the env will create: ``node_name``
    (else ``overrides['node_name']``, else ``rtgym_env``) in ``overrides['namespace']``; rcl
    reads the file in the env's ``domain_id``. With ``command_line`` (as the env reads it), the
    parameters the ROS arguments of ``sys.argv`` give that node come after the file's, with or
    without a file, less those the env does not know (for other nodes of the process: left out
    with a warning). ``overrides`` come last, as ``Node(parameter_overrides=...)`` wins over
    the command line.
    """
    params = {}
    if path is not None or (command_line and has_ros_args(getattr(sys, 'argv', []))):
        name, namespace = env_node_name(node_name, overrides)
        domain_id = overrides.get('domain_id')  # checked by the env; here only if usable
        if isinstance(domain_id, bool) or not isinstance(domain_id, int) \
                or not 0 <= domain_id <= 232:
            domain_id = None
        if path is None:
            params = command_line_parameters(node_name=name, namespace=namespace,
                                             domain_id=domain_id, known=_CONFIG_KEYS)
        else:
            params = load_params_file(path, node_name=name, namespace=namespace,
                                      domain_id=domain_id, command_line=command_line,
                                      known=_CONFIG_KEYS)
        refuse_name_parameters(params, source=COMMAND_LINE if path is None
                               else f'robot_config {path}')
    params.update(overrides)
    return split_and_check(params)


def env_node_name(node_name: str | None, overrides: dict[str, Any]) -> tuple[str, str]:
    """
    Return the name and namespace the env asks for its node, as ``load_robot_config`` takes them.

    :raises ValueError: either is not a string.
    """
    # As the env names its node: None is the default, anything else is taken as given.
    name = node_name if node_name is not None else \
        overrides.get('node_name', ROS_DEFAULTS['node_name'])
    namespace = overrides.get('namespace', ROS_DEFAULTS['namespace'])
    for key, value in (('node_name', name), ('namespace', namespace)):
        if not isinstance(value, str):
            raise ValueError(f'{key} must be a string, got {short_repr(value)}')
    return name, namespace


def refuse_name_parameters(params: dict[str, Any], *, source: str) -> None:
    """
    Refuse ``node_name`` and ``namespace`` among a node's parameters.

    rcl picked the parameters by the node's name and namespace: a parameter cannot rename the
    node they were picked for.
    """
    named = [key for key in NAME_KEYS if key in params]
    if named:
        found = ', '.join(f'{key}={short_repr(params[key])}' for key in named)
        raise ValueError(f'{source}: {" and ".join(named)} cannot be a parameter, got {found}: '
                         "rcl picks a node's parameters by the node's name and namespace, so "
                         'give them to gym.make (node_name=, namespace=) or on the command line '
                         '(-r __node:=NAME -r __ns:=/NS)')


def split_and_check(params: dict[str, Any]) -> tuple[dict[str, Any], RobotSpec]:
    """Separate env keys from the robot mapping and validate the latter."""
    params = {k: v for k, v in params.items() if k not in AGENT_DEFAULTS}
    unknown = sorted(set(params) - _CONFIG_KEYS)
    if unknown:
        raise ValueError(f'unknown config keys {unknown}; expected env keys '
                         f'{sorted(ENV_KEYS)} or robot keys {sorted(_ROBOT_KEYS)}')
    env_config = {k: v for k, v in params.items() if k in ENV_KEYS}
    for key in PREPRO_KEYS:
        value = env_config.get(key)
        if value is not None and not callable(value):
            env_config[key] = load_callable(value, key=key)
    env_config['watchdog_timeout'] = params.get('watchdog_timeout',
                                                ROBOT_DEFAULTS['watchdog_timeout'])
    # Between episodes a robot is stopped (and a simulator paused): wait() on done, so the
    # reset that follows restarts the clock instead of reporting a time-out.
    env_config.setdefault('wait_on_done', True)
    options = _options(params)
    observations = _groups(params, 'observations', _observation_slot)
    if params.get('truncate_on_stale') is not None:
        options = dataclasses.replace(options, truncate_on_stale=_stale_truncation(
            params['truncate_on_stale'], observations, key='truncate_on_stale'))
    actions = _groups(params, 'actions', _action_group)
    check_one_group_per_topic(actions, [group.topic for group in actions])
    spec = RobotSpec(
        actions=actions,
        observations=observations,
        reward=_signal(params.get('reward'), key='reward', default_type='std_msgs/msg/Float64',
                       constant=0.0),
        termination=_optional(params, 'termination', lambda value, key: _signal(
            value, key=key, default_type='std_msgs/msg/Bool', constant=False)),
        reset=_optional(params, 'reset', lambda value, key: _service(
            value, key=key, timeout=options.reset_timeout, data=True)),
        pause=_optional(params, 'pause', lambda value, key: _service(
            value, key=key, timeout=options.reset_timeout, data=True)),
        unpause=_optional(params, 'unpause', lambda value, key: _service(
            value, key=key, timeout=options.reset_timeout, data=False)),
        options=options,
    )
    if spec.pause and spec.unpause is None and spec.pause.data is not None:
        # A SetBool pause service is also the way back: data=False unpauses.
        spec.unpause = dataclasses.replace(spec.pause,
                                           request={**spec.pause.request, 'data': False})
    spec.step = _step(params, options, env_config)
    spec.record = record_spec(params.get('record'))
    if spec.step is not None:  # a simulator that does not advance when asked is an error
        env_config.setdefault('on_clock_stall', 'error')
    return env_config, spec


def _options(params: dict[str, Any]) -> RobotOptions:
    defaults = RobotOptions()
    timeout = params.get('newer_than_action_timeout')
    return RobotOptions(
        action_policy=check_choice(params.get('action_policy', defaults.action_policy),
                                   ACTION_POLICIES, key='action_policy'),
        observation_layout=check_choice(
            params.get('observation_layout', defaults.observation_layout), LAYOUTS,
            key='observation_layout'),
        newer_than_action=check_bool(params.get('newer_than_action', False),
                                     key='newer_than_action'),
        newer_than_action_timeout=None if timeout is None else check_number(
            timeout, key='newer_than_action_timeout', minimum=0.0),
        reset_timeout=check_number(params.get('reset_timeout', defaults.reset_timeout),
                                   key='reset_timeout', minimum=0.0),
        diagnostics_period=_diagnostics_period(
            params.get('diagnostics_period', defaults.diagnostics_period)),
        stamp_tolerance=check_number(params.get('stamp_tolerance', defaults.stamp_tolerance),
                                     key='stamp_tolerance', minimum=0.0),
        stepping=check_choice(params.get('stepping', defaults.stepping), STEPPING,
                              key='stepping'))


def _stale_truncation(value: Any, slots: list[ObservationSlotSpec], *,
                      key: str) -> StaleTruncation | None:
    """Check ``truncate_on_stale: {steps: M, slots: [...]}``; None when steps is 0."""
    if not isinstance(value, dict):
        raise ValueError(f'{key} must be a mapping with steps (and slots), '
                         f'got {short_repr(value)}')
    _check_keys(value, ('steps', 'slots'), key=key)
    steps = check_int(_required(value, 'steps', key=key), key=f'{key}.steps', minimum=0)
    by_name = {slot.name: slot for slot in slots}
    names = value.get('slots', list(by_name))
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f'{key}.slots must be a non-empty list of observation names, '
                         f'got {short_repr(names)}')
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise ValueError(f'{key}.slots names {short_repr(unknown)}, which are not in '
                         f'observations.names {short_repr(list(by_name))}')
    if steps == 0:
        return None
    ageless = [name for name in names if by_name[name].max_age is None]
    if ageless:
        raise ValueError(f'{key}: observations.{ageless[0]} has no max_age, so it is never '
                         f'stale and the episode would never end this way: give it a max_age, '
                         f'or name the slots to watch in {key}.slots')
    return StaleTruncation(steps=steps, slots=tuple(dict.fromkeys(names)))


def _groups(params: dict, key: str, build: Callable) -> list:
    section = params.get(key)
    if not isinstance(section, dict):
        raise ValueError(f'{key} must be a mapping with a names list, got {short_repr(section)}')
    names = section.get('names')
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f'{key}.names must be a non-empty list of names, got {short_repr(names)}')
    if len(set(names)) != len(names):
        raise ValueError(f'{key}.names has duplicates: {short_repr(names)}')
    if key == 'observations' and ACTION_BUFFER_KEY in names:
        raise ValueError(f"observations.names must not contain '{ACTION_BUFFER_KEY}', the key of "
                         'the action buffer in observations')
    extra = sorted(set(section) - {'names', *names})
    if extra:
        raise ValueError(f'{key} has entries {short_repr(extra)} that are not in {key}.names '
                         f'{short_repr(names)}')
    groups = []
    for name in names:
        if not isinstance(section.get(name), dict):
            raise ValueError(f'{key}.{name} must be a mapping (it is listed in {key}.names), '
                             f'got {short_repr(section.get(name))}')
        groups.append(build(name, section[name], key=f'{key}.{name}'))
    return groups


def _diagnostics_period(value: Any) -> float:
    """
    Return the period of ``/diagnostics``: 0 (none), or at least ``_DIAGNOSTICS_PERIOD_MIN``.

    Its timer fires on the executor thread, which runs the time-steps: a period of
    nanoseconds (a typo) would fire it in every turn.
    """
    period = check_number(value, key='diagnostics_period', minimum=0.0,
                          maximum=_TIMER_PERIOD_MAX)
    if 0.0 < period < _DIAGNOSTICS_PERIOD_MIN:
        raise ValueError(f'diagnostics_period must be 0 (no diagnostics) or at least '
                         f'{_DIAGNOSTICS_PERIOD_MIN:g} s (their timer fires on the thread '
                         f'that runs the time-steps), got {short_repr(value)}')
    return period


_FLOAT32_MAX = float(np.finfo(np.float32).max)
_DURATION_MAX = 2.0**31 - 1  # s: builtin_interfaces/Duration's sec is an int32
_TIMER_PERIOD_MAX = (2**63 - 1) * 1e-9  # s: an rclpy timer's period, in int64 nanoseconds
_DIAGNOSTICS_PERIOD_MIN = 0.01  # s: /diagnostics at 100 Hz at most (ROS's are about 1 Hz)
_ACTION_KEYS = ('topic', 'type', 'field', 'fields', 'joint_names', 'low', 'high', 'default',
                'qos', 'time_from_start', 'frame_id', 'stamp', 'max_delta', 'on_stop')


def _action_group(name: str, entry: dict, *, key: str) -> ActionGroup:
    _check_keys(entry, _ACTION_KEYS, key=key)
    msg_type = load_message_type(_required(entry, 'type', key=key), key=f'{key}.type')
    low = check_vector(_required(entry, 'low', key=key), key=f'{key}.low')
    high = check_vector(_required(entry, 'high', key=key), key=f'{key}.high')
    _check_bounds(low, high, key=key)
    writer = compile_writer(
        msg_type, _fields(entry, key=key), key=key, joint_names=entry.get('joint_names'),
        size=None if entry.get('joint_names') else len(low), frame_id=entry.get('frame_id'),
        time_from_start=check_number(entry.get('time_from_start', 0.0),
                                     key=f'{key}.time_from_start', minimum=0.0,
                                     maximum=_DURATION_MAX))
    default = check_vector(entry.get('default', np.zeros(writer.size)), key=f'{key}.default')
    for what, values in (('low', low), ('high', high), ('default', default)):
        if len(values) != writer.size:
            raise ValueError(f'{key}.{what} must have {writer.size} values, got {len(values)}')
        if not np.all(np.abs(values) <= _FLOAT32_MAX):  # NaN too
            raise ValueError(f'{key}.{what} must be finite as float32, the dtype of actions '
                             f'(|x| <= {_FLOAT32_MAX:.8g}), got {short_repr(values)}')
    if np.any(default < low) or np.any(default > high):
        raise ValueError(f'{key}.default must lie within low and high, got {short_repr(default)}')
    stamp = entry.get('stamp', 'now')
    check_choice(stamp, ('now', 'zero'), key=f'{key}.stamp')
    if 'stamp' in entry and not has_header(msg_type):
        raise ValueError(f'{key}.stamp: expected a type with a header to stamp, got '
                         f'{interface_name(msg_type)}, which has none: remove stamp')
    if interface_name(msg_type) == JOINT_TRAJECTORY and stamp == 'now' \
            and not entry.get('time_from_start'):
        raise ValueError(
            f'{key}: a {JOINT_TRAJECTORY} point of time_from_start 0 with stamp: now is due at '
            'its stamp, which has passed when a controller receives it '
            '(joint_trajectory_controller refuses a trajectory that ends in the past): give '
            'time_from_start > 0, or stamp: zero (start on receipt)')
    max_delta = None
    if entry.get('max_delta') is not None:
        max_delta = check_vector(entry['max_delta'], key=f'{key}.max_delta')
        if len(max_delta) != writer.size:
            raise ValueError(f'{key}.max_delta must have {writer.size} values, '
                             f'got {len(max_delta)}')
        if not np.all(max_delta > 0.0) or not np.all(np.isfinite(max_delta)):
            raise ValueError(f'{key}.max_delta must be finite numbers > 0, '
                             f'got {short_repr(max_delta)}')
    on_stop = entry.get('on_stop', 'default')
    check_choice(on_stop, ('default', 'hold'), key=f'{key}.on_stop')
    return ActionGroup(name=name, topic=_topic(entry, key=key), writer=writer, low=low,
                       high=high, default=default, stamped=stamp == 'now', max_delta=max_delta,
                       on_stop=on_stop,
                       qos=qos_from_config(entry.get('qos'), key=f'{key}.qos',
                                           default='reliable'))


_OBSERVATION_KEYS = ('topic', 'type', 'field', 'fields', 'joint_names', 'low', 'high', 'qos',
                     'max_age', 'on_stale', 'wait_timeout', 'nonfinite', 'shape', 'encoding',
                     'to_rgb', 'stamp', 'length', 'out_of_bounds', 'transform',
                     'stale_warn_steps')


def _observation_slot(name: str, entry: dict, *, key: str) -> ObservationSlotSpec:
    _check_keys(entry, _OBSERVATION_KEYS, key=key)
    type_name = _required(entry, 'type', key=key)
    msg_type = load_message_type(type_name, key=f'{key}.type')
    low = None if entry.get('low') is None else check_vector(entry['low'], key=f'{key}.low')
    high = None if entry.get('high') is None else check_vector(entry['high'], key=f'{key}.high')
    shape = entry.get('shape')
    # One value per element tells the size; one value alone is broadcast, and tells nothing.
    bounds_size = max((len(v) for v in (low, high) if v is not None), default=1)
    if shape is None and bounds_size > 1 and not entry.get('joint_names') \
            and 'length' not in entry:
        shape = [bounds_size]
    reader = compile_reader(
        msg_type, _fields(entry, key=key, image=type_name == 'sensor_msgs/msg/Image'),
        key=key, joint_names=entry.get('joint_names'), shape=shape,
        nonfinite=entry.get('nonfinite', 'keep'), length=entry.get('length'),
        encoding=entry.get('encoding'),
        to_rgb=check_bool(entry.get('to_rgb', False), key=f'{key}.to_rgb'))
    space = _observation_space(reader, low, high, key=key)
    transform = None
    if entry.get('transform') is not None:
        if reader.labels is None or len(reader.shape) != 1:
            raise ValueError(f'{key}.transform applies to a vector of numbers, got a slot of '
                             f'shape {list(reader.shape)} ({type_name})')
        transform = compile_transform(entry['transform'], size=reader.size, low=space.low,
                                      high=space.high, labels=reader.labels,
                                      key=f'{key}.transform')
        space = spaces.Box(transform.low, transform.high, shape=(transform.size,),
                           dtype=np.float32)
    max_age = entry.get('max_age')
    if max_age is not None:
        max_age = check_number(max_age, key=f'{key}.max_age', minimum=0.0)
    on_stale = entry.get('on_stale', 'warn')
    check_choice(on_stale, STALE_POLICIES, key=f'{key}.on_stale')
    stamp = entry.get('stamp', 'header')
    check_choice(stamp, ('header', 'receive'), key=f'{key}.stamp')
    wait_timeout = check_number(entry.get('wait_timeout', 0.1), key=f'{key}.wait_timeout',
                                minimum=0.0)
    return ObservationSlotSpec(
        name=name, topic=_topic(entry, key=key), reader=reader, space=space, max_age=max_age,
        on_stale=on_stale, wait_timeout=wait_timeout, use_header_stamp=stamp == 'header',
        out_of_bounds=check_choice(entry.get('out_of_bounds', 'flag'), BOUNDS_POLICIES,
                                   key=f'{key}.out_of_bounds'),
        transform=transform,
        stale_warn_steps=check_int(entry.get('stale_warn_steps', 10),
                                   key=f'{key}.stale_warn_steps', minimum=1),
        qos=qos_from_config(entry.get('qos'), key=f'{key}.qos', default='sensor_data'))


def _observation_space(reader: FieldReader, low: np.ndarray | None, high: np.ndarray | None,
                       *, key: str) -> spaces.Box:
    dtype = np.dtype(reader.dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        default_low, default_high = info.min, info.max
    else:
        default_low, default_high = -np.inf, np.inf
    bounds = []
    for what, values, fallback in (('low', low, default_low), ('high', high, default_high)):
        if values is None:
            bounds.append(np.full(reader.shape, fallback, dtype=dtype))
            continue
        if values.size not in (1, reader.size):
            raise ValueError(f'{key}.{what} must have {reader.size} values (or 1), '
                             f'got {values.size}')
        if np.issubdtype(dtype, np.integer) and not (
                np.all(values == np.round(values))
                and np.all((values >= default_low) & (values <= default_high))):
            raise ValueError(f'{key}.{what} must be integers of {dtype} '
                             f'({default_low}..{default_high}), the dtype of the slot, '
                             f'got {short_repr(values.tolist())}')
        values = values.reshape(reader.shape) if values.size > 1 else values  # row-major
        bounds.append(np.broadcast_to(values, reader.shape).astype(dtype))
    _check_bounds(bounds[0].ravel(), bounds[1].ravel(), key=key)
    return spaces.Box(bounds[0], bounds[1], shape=tuple(reader.shape), dtype=dtype)


def _signal(value: Any, *, key: str, default_type: str, constant: Any) -> SignalSpec:
    if value is None:
        return SignalSpec(constant=constant)
    if not isinstance(value, dict):
        raise ValueError(f'{key} must be a mapping with topic, function or constant, '
                         f'got {short_repr(value)}')
    _check_keys(value, ('topic', 'type', 'field', 'qos', 'function', 'constant', 'default'),
                key=key)
    sources = [s for s in ('topic', 'function', 'constant') if s in value]
    if 'default' in value and ('topic' not in value or isinstance(constant, bool)):
        raise ValueError(f'{key}.default applies to a reward topic only (the reward of a '
                         f'time-step without a message), got it for {key} with {sources}')
    if len(sources) != 1:
        raise ValueError(f'{key} needs exactly one of topic, function, constant; got {sources}')
    if 'constant' in value:
        if isinstance(constant, bool):  # termination: true or false, never 'false'
            return SignalSpec(constant=check_bool(value['constant'], key=f'{key}.constant'))
        return SignalSpec(constant=check_number(value['constant'], key=f'{key}.constant'))
    if 'function' in value:
        return SignalSpec(function=load_callable(value['function'], key=f'{key}.function'))
    msg_type = load_message_type(value.get('type', default_type), key=f'{key}.type')
    reader = compile_reader(msg_type, [check_string(value.get('field', 'data'),
                                                    key=f'{key}.field')], key=key)
    if reader.size != 1:
        raise ValueError(f'{key}.field must hold 1 value, got {reader.size}')
    default = value.get('default', constant)
    default = (check_bool(default, key=f'{key}.default') if isinstance(constant, bool)
               else check_number(default, key=f'{key}.default'))
    return SignalSpec(topic=_topic(value, key=key), reader=reader, constant=default,
                      qos=qos_from_config(value.get('qos'), key=f'{key}.qos',
                                          default='reliable'))


def _service(value: Any, *, key: str, timeout: float, data: bool | None,
             retry: bool = True) -> ServiceSpec:
    if not isinstance(value, dict):
        raise ValueError(f'{key} must be a mapping with service (+ type) or function, '
                         f'got {short_repr(value)}')
    _check_keys(value, ('service', 'type', 'data', 'request', 'success', 'retry', 'function',
                        'timeout'), key=key)
    if ('service' in value) == ('function' in value):
        raise ValueError(f'{key} needs exactly one of service, function')
    if 'function' in value:
        return ServiceSpec(function=load_callable(value['function'], key=f'{key}.function'),
                           timeout=check_number(value.get('timeout', timeout),
                                                key=f'{key}.timeout', minimum=0.0))
    _name(value['service'], key=f'{key}.service')
    return compile_service(value, key=key, timeout=timeout, load_type=load_service_type,
                           default_request=None if data is None else {'data': data},
                           retry=retry)


def _step(params: dict, options: RobotOptions, env_config: dict) -> StepSpec | None:
    """Lockstep's advance request; lockstep needs it, and sim time."""
    value = params.get('step')
    if options.stepping != 'lockstep':
        if value is not None:
            raise ValueError('step applies to stepping: lockstep, got it with stepping: '
                             f'{options.stepping}')
        return None
    if not env_config.get('use_sim_time', False):
        raise ValueError('stepping: lockstep needs use_sim_time: true (the simulator owns '
                         '/clock and the env advances it)')
    if not isinstance(value, dict):
        raise ValueError('stepping: lockstep needs step: {topic: step_until} (our simulators) '
                         f'or step: {{service: ..., type: ...}}, got step: {short_repr(value)}')
    if ('topic' in value) == ('service' in value):
        raise ValueError(f'step needs exactly one of topic, service; got {sorted(value)}')
    if 'topic' in value:
        _check_keys(value, ('topic',), key='step')
        return StepSpec(topic=_topic(value, key='step'))
    service_keys = {k: v for k, v in value.items() if k not in ('steps_field', 'step_size')}
    service = _service(service_keys, key='step', timeout=options.reset_timeout, data=None,
                       retry=False)
    steps_field = value.get('steps_field')
    step_size = None
    if steps_field is None and 'step_size' in value:
        raise ValueError('step.step_size applies with step.steps_field (the request field '
                         'that takes a number of simulator steps), got it without')
    if steps_field is not None:
        step_size = check_number(value.get('step_size'), key='step.step_size', above=0.0)
        # A time-step's worth of physics steps must fit the field (a uint8 takes 255); the
        # duration itself is checked with the env's keys.
        duration = env_config.get('time_step_duration', RTGYM_DEFAULTS['time_step_duration'])
        key = f'step.steps_field {steps_field!r}'
        steps = 1
        if is_number(duration) and math.isfinite(duration):
            steps = physics_steps(duration, step_size)
            key += (f' (a time-step of {duration:g} s is {steps} steps of step_size '
                    f'{step_size:g} s)')
        set_field(service.service_type.Request(), str(steps_field), steps, key=key)
    return StepSpec(service=service, steps_field=steps_field, step_size=step_size)


def _optional(params: dict, key: str, build: Callable) -> Any:
    return None if params.get(key) is None else build(params[key], key)


def _check_keys(entry: dict, allowed: tuple, *, key: str) -> None:
    unknown = sorted(set(entry) - set(allowed))
    if unknown:
        raise ValueError(f'{key} has unknown keys {unknown}; allowed: {", ".join(allowed)}')


def _required(entry: dict, name: str, *, key: str) -> Any:
    if entry.get(name) is None:
        raise ValueError(f'{key}.{name} is required')
    return entry[name]


def _fields(entry: dict, *, key: str, image: bool = False) -> list[str]:
    if 'field' in entry and 'fields' in entry:
        raise ValueError(f'{key}: give field or fields, not both')
    fields = entry.get('fields', [entry['field']] if 'field' in entry else None)
    if fields is None:
        if image:
            return ['data']
        raise ValueError(f'{key}.fields is required (a list of field paths)')
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) for f in fields):
        raise ValueError(f'{key}.fields must be a non-empty list of field paths, '
                         f'got {short_repr(fields)}')
    return fields


def _topic(entry: dict, *, key: str) -> str:
    return _name(_required(entry, 'topic', key=key), key=f'{key}.topic')


def _name(value: Any, *, key: str) -> str:
    """Check a ROS name (relative names resolve under the env's namespace)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f'{key} must be a topic or service name, got {short_repr(value)}')
    try:
        validate_topic_name(value, is_service=key.endswith('.service'))
        # Substitutions ({node}, {ns}) are rcl's to expand; one it does not know fails here,
        # not when the node that uses the name is made.
        expand_topic_name(value, 'node', '/')
    except (InvalidServiceNameException, InvalidTopicNameException, ValueError) as error:
        reason = rcl_reason(str(error).splitlines()[0])  # without rcl's source location
        raise ValueError(f'{key} must be a valid ROS name, got {short_repr(value)}: '
                         f'{reason}') from None
    return value


def _check_bounds(low: np.ndarray, high: np.ndarray, *, key: str) -> None:
    if len(low) != len(high):
        raise ValueError(f'{key}.low and {key}.high must have the same length, '
                         f'got {len(low)} and {len(high)}')
    for what, values, empty in (('low', low, np.inf), ('high', high, -np.inf)):
        bad = np.flatnonzero(np.isnan(values) | (values == empty))
        if bad.size:  # a NaN bound, or one that leaves no value (gymnasium's Box takes it)
            raise ValueError(f'{key}.{what} must be a number, and not {empty:+}, got '
                             f'{short_repr(values.tolist())} (index {bad.tolist()})')
    bad = np.flatnonzero(low > high)
    if bad.size:
        raise ValueError(f'{key}.low must be <= {key}.high, got low > high at index '
                         f'{bad.tolist()}')
