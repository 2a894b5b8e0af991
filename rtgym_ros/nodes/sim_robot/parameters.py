"""
The ``sim_robot`` parameters: names, defaults, descriptions, checks, and which may change live.

A value out of range stops the node at start-up with a message naming the parameter; at run
time (``ros2 param set``) the change is refused with the same message.
"""

from typing import Any, Dict, List, Optional, Tuple

from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from rtgym_ros.core.validate import check_choice, check_number
from rtgym_ros.nodes.command_line import default_text, ParameterHelp, type_name
from rtgym_ros.sim import MODELS

# Options that may change while the node runs (ros2 param set); the rest are read-only.
DYNAMIC = ('command_timeout', 'command_latency', 'command_jitter', 'sensor_latency',
           'sensor_jitter', 'sensor_noise', 'sensor_dropout', 'real_time_factor')

# name, default (or type when there is no default), description
PARAMETERS: Tuple[Tuple[str, Any, str], ...] = (
    ('model', 'pendulum', f'Simulated robot, one of {sorted(MODELS)}.'),
    ('physics_rate', 1000.0, 'Physics steps per second of sim time (Hz).'),
    ('sensor_rate', 100.0, 'JointState messages per second of sim time (Hz), <= physics_rate.'),
    ('joint_states_topic', 'joint_states', 'sensor_msgs/JointState output topic.'),
    ('command_topic', 'effort_command',
     'std_msgs/Float64MultiArray input topic, one effort per actuated joint.'),
    ('reset_service', 'reset', 'std_srvs/Trigger service: new initial state, zero command.'),
    ('pause_service', 'pause', 'std_srvs/SetBool service: data=true pauses the physics.'),
    ('command_timeout', 0.5,
     'Seconds without a command after which the applied effort is zero; 0 disables.'),
    ('command_latency', 0.0, 'Seconds between a command arriving and it being applied.'),
    ('command_jitter', 0.0, 'Extra command delay, uniform in [0, command_jitter] seconds.'),
    ('sensor_latency', 0.0, 'Seconds between a measurement and its JointState being sent.'),
    ('sensor_jitter', 0.0, 'Extra sensor delay, uniform in [0, sensor_jitter] seconds.'),
    ('sensor_noise', 0.0, 'Std of Gaussian noise added to measured positions and velocities.'),
    ('sensor_dropout', 0.0, 'Probability that a JointState message is dropped.'),
    ('seed', 0, 'Seed of the initial-state, noise and delay generators; < 0: unseeded.'),
    ('initial_state', Parameter.Type.DOUBLE_ARRAY,
     'State after start and reset (pendulum: [theta, theta_dot]; cartpole: '
     '[x, x_dot, theta, theta_dot]); unset: random from the seeded generator.'),
    ('max_effort', 0.0,
     'Actuator limit (N m for the pendulum, N for the cart-pole); 0: the model default.'),
    ('publish_clock', False, 'Own the clock: run in sim time and publish /clock.'),
    ('stepping', 'realtime',
     'realtime, or lockstep: own /clock from 0, paused; advance only to the sim times asked '
     'on step_until (rosgraph_msgs/Clock), then publish JointState and /clock at that time.'),
    ('real_time_factor', 1.0,
     'With publish_clock: sim seconds per wall second; 0 runs as fast as possible.'),
    ('timer_rate', 0.0,
     'Without publish_clock: Hz of the physics timer, which integrates the elapsed time in '
     'physics_rate sub-steps; 0: tick when a JointState is due, at most at min(physics_rate, '
     '250) Hz, and at that rate while the node clock follows an external /clock or with '
     'ros_timer.'),
    ('ros_timer', False,
     'Without publish_clock: tick the physics on a ROS timer of the node clock instead of a '
     "thread (about twice the CPU of a thread at the same rate: it runs on rclpy's Python "
     'executor).'),
    ('clock_rate', 0.0,
     'With publish_clock: /clock messages per sim second; 0: min(physics_rate, 1000).'),
    ('reset_time', False,
     'With publish_clock: reset also sets sim time back to 0 (like /reset_simulation).'),
)

_NON_NEGATIVE = ('command_timeout', 'command_latency', 'command_jitter', 'sensor_latency',
                 'sensor_jitter', 'sensor_noise', 'real_time_factor', 'clock_rate',
                 'timer_rate', 'max_effort')
# Ranges of the doubles, in check_number's terms; every double must also be finite.
_BOUNDS: Dict[str, Dict[str, float]] = {
    **{name: {'minimum': 0.0} for name in _NON_NEGATIVE},
    'sensor_dropout': {'minimum': 0.0, 'maximum': 1.0},
}
_RATES = ('physics_rate', 'sensor_rate')

# Options that take a double also take an integer ('-p real_time_factor:=5'), as users expect.
DOUBLES = frozenset(name for name, default, _ in PARAMETERS if isinstance(default, float))


def check_option(name: str, value: Any) -> Optional[str]:
    """Say what is wrong with one option value, or None when it is fine."""
    try:
        if name in DOUBLES:
            check_number(value, key=name, **_BOUNDS.get(name, {}))
        elif name == 'model':
            check_choice(value, sorted(MODELS), key=name)
        elif name == 'stepping':
            check_choice(value, ('realtime', 'lockstep'), key=name)
    except ValueError as error:
        return str(error)
    if name in _RATES and value <= 0.0:  # check_number(above=0) would not say the unit
        return f'{name} must be a finite number > 0 (Hz), got {value!r}'
    return None


def help_rows() -> List[ParameterHelp]:
    """Return the table of ``sim_robot --help``: each parameter's type and range, default, use."""
    rows = []
    for name, default, description in PARAMETERS:
        if isinstance(default, Parameter.Type):
            kind, shown = default.name.lower().replace('_', ' '), 'unset'
        else:
            kind, shown = type_name(default), default_text(default)
        if name in _RATES:
            kind += ' > 0'
        elif name == 'sensor_dropout':
            kind += ' in [0, 1]'
        elif name in _NON_NEGATIVE:
            kind += ' >= 0'
        live = ' Changes at run time (ros2 param set).' if name in DYNAMIC else ''
        rows.append(ParameterHelp(name, kind, shown, description + live))
    rows.append(ParameterHelp(
        'use_sim_time', 'bool', 'false',
        "rclpy's: without publish_clock, follow someone else's /clock."))
    return rows


def descriptor(name: str, description: str) -> ParameterDescriptor:
    """Describe one parameter: read-only unless dynamic, doubles that also take integers."""
    result = ParameterDescriptor(description=description, read_only=name not in DYNAMIC,
                                 dynamic_typing=name in DOUBLES)
    if name == 'sensor_dropout':
        result.floating_point_range = [
            FloatingPointRange(from_value=0.0, to_value=1.0, step=0.0)]
    return result


def declare_parameters(node: Node) -> Dict[str, Any]:
    """
    Declare every parameter on ``node`` and return their checked values, doubles as float.

    :raises ValueError: When a value is out of range; the message names the parameter.
    """
    values = {}
    for name, default, description in PARAMETERS:
        parameter = node.declare_parameter(name, default, descriptor(name, description))
        error = check_option(name, parameter.value)
        if error is not None:
            raise ValueError(error)
        values[name] = float(parameter.value) if name in DOUBLES else parameter.value
    return values


def check_rates(values: Dict[str, Any]) -> Tuple[float, float]:
    """
    Check the rates against ``physics_rate``; return ``(timer_rate, clock_rate)``, 0 resolved.

    :raises ValueError: When a rate is above ``physics_rate``, naming it.
    """
    physics_rate = values['physics_rate']
    if values['sensor_rate'] > physics_rate:
        raise ValueError(
            f'sensor_rate must be <= physics_rate ({physics_rate} Hz), '
            f"got {values['sensor_rate']}")
    sim_time = bool(values['publish_clock']) or values['stepping'] == 'lockstep'
    clock_rate = values['clock_rate'] or min(physics_rate, 1000.0)
    if sim_time and clock_rate > physics_rate:
        raise ValueError(
            f'clock_rate must be <= physics_rate ({physics_rate} Hz), got {clock_rate}')
    # Ticking costs CPU at any rate, so a 1 kHz tick is not needed for 1 kHz physics: fixed
    # sub-steps keep the physics at physics_rate whatever timer_rate is. Left at 0, the thread
    # ticks when a message is due, and at this rate where it cannot tell when (sim time).
    timer_rate = values['timer_rate'] or min(physics_rate, 250.0)
    if not sim_time and timer_rate > physics_rate:
        raise ValueError(
            f'timer_rate must be <= physics_rate ({physics_rate} Hz), got {timer_rate}')
    return timer_rate, clock_rate


def refuse_invalid(parameters: List[Parameter]) -> SetParametersResult:
    """Refuse a run-time change whose value fails its check, saying why (set callback)."""
    for parameter in parameters:
        if parameter.name in DYNAMIC:
            error = check_option(parameter.name, parameter.value)
            if error is not None:
                return SetParametersResult(successful=False, reason=error)
    return SetParametersResult(successful=True)


def dynamic_changes(parameters: List[Parameter]) -> Dict[str, Any]:
    """Return the dynamic parameters among ``parameters`` by name, doubles as float."""
    return {p.name: float(p.value) if p.name in DOUBLES else p.value
            for p in parameters if p.name in DYNAMIC}
