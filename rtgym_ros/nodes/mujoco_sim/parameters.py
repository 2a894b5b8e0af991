"""
The ``mujoco_sim`` parameters: names, defaults, descriptions, checks, and which may change live.

A value out of range stops the node at start-up with a message naming the parameter; at run
time (``ros2 param set``) the change is refused with the same message. No ROS import here
beyond rcl_interfaces' messages, so ``--help`` prints the table without starting anything.
"""

import textwrap
from typing import Any, Dict, List, Optional, Tuple

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rtgym_ros.core.validate import check_choice, check_int, check_number

STEPPING = ('realtime', 'lockstep')

# Options that may change while the node runs (ros2 param set); the rest are read-only.
DYNAMIC = ('command_timeout', 'real_time_factor')

# name, default, description
PARAMETERS: Tuple[Tuple[str, Any, str], ...] = (
    ('model', 'inverted_pendulum',
     'MJCF file (a path, or a name ending in .xml), or the name of a model Gymnasium ships '
     '(inverted_pendulum, inverted_double_pendulum, reacher, half_cheetah, hopper, ...). The '
     "physics steps at the MJCF's timestep."),
    ('stepping', 'realtime',
     'realtime: the physics runs by itself, on the node clock or (publish_clock) its own; '
     'lockstep: owns /clock, starts paused at 0 and advances only on step_until.'),
    ('publish_clock', False,
     'realtime: own the clock, run in sim time from 0 and publish /clock (lockstep always '
     'does).'),
    ('real_time_factor', 1.0,
     'realtime with publish_clock: sim seconds per wall second; 0 runs as fast as possible.'),
    ('clock_rate', 0.0,
     'realtime with publish_clock: /clock messages per sim second; 0: every physics step, at '
     'most 1000 Hz.'),
    ('sensor_rate', 0.0,
     'JointState, sensors and odometry messages per sim second, <= the physics rate; 0: every '
     'physics step. Lockstep also publishes them at each target.'),
    ('controller', 'effort_controller',
     'Commands arrive on <controller>/commands (std_msgs/Float64MultiArray), one value per '
     'actuator in actuator order, in ctrl units, clipped to ctrlrange.'),
    ('command_timeout', 0.5,
     'Seconds (of the physics time base) without a command after which the actuators get 0; '
     '0 disables.'),
    ('reset_noise', -1.0,
     'Scale of uniform noise on qpos and qvel at reset; < 0: the reset of the Gymnasium v5 '
     'env of a shipped model (none for a file).'),
    ('seed', 0, 'Seed of the reset noise generator; < 0: unseeded.'),
    ('reset_time', True,
     'When the node owns the clock: reset_simulation also sets sim time back to 0 (as '
     'gazebo_ros); reset_world never does.'),
    ('joint_states_topic', 'joint_states',
     'sensor_msgs/JointState output: every named hinge and slide joint.'),
    ('sensors_topic', 'sensors',
     "std_msgs/Float64MultiArray output: the MJCF's sensors, in MJCF order (when it has any)."),
    ('odometry_topic', 'odom',
     'nav_msgs/Odometry output of the floating base (when the MJCF has a free joint).'),
    ('odometry_frame', 'odom',
     "Odometry's header.frame_id; child_frame_id is the floating body's name."),
    ('camera', '',
     'Name of an MJCF camera to render to sensor_msgs/Image (rgb8); empty: no images. Needs '
     'an OpenGL offscreen backend: MUJOCO_GL=egl on a machine without a display.'),
    ('image_topic', 'camera/image_raw', 'sensor_msgs/Image output topic.'),
    ('camera_rate', 10.0, 'Images per sim second, <= the physics rate (rendering is costly).'),
    ('image_width', 320, 'Image width, pixels.'),
    ('image_height', 240, 'Image height, pixels.'),
    ('timer_rate', 0.0,
     'realtime on the node clock: Hz of the physics thread, which integrates the elapsed time '
     'in timestep sub-steps; 0: min(physics rate, 250).'),
)

_NON_NEGATIVE = ('command_timeout', 'real_time_factor', 'clock_rate', 'sensor_rate',
                 'timer_rate')
_POSITIVE = ('camera_rate',)

# Options that take a double also take an integer ('-p real_time_factor:=5'), as users expect.
DOUBLES = frozenset(name for name, default, _ in PARAMETERS if isinstance(default, float))


def check_option(name: str, value: Any) -> Optional[str]:
    """Say what is wrong with one option value, or None when it is fine."""
    try:
        if name in _NON_NEGATIVE:
            check_number(value, key=name, minimum=0.0)
        elif name in _POSITIVE:
            check_number(value, key=name, above=0.0)
        elif name == 'reset_noise':
            check_number(value, key=name)
        elif name == 'stepping':
            check_choice(value, STEPPING, key=name)
        elif name in ('image_width', 'image_height'):
            check_int(value, key=name, minimum=1, maximum=8192)
        elif name == 'model' and not value:
            return 'model must be an MJCF file path or a model name, got an empty string'
    except ValueError as error:
        return str(error)
    return None


def descriptor(name: str, description: str) -> ParameterDescriptor:
    """Describe one parameter: read-only unless dynamic, doubles that also take integers."""
    return ParameterDescriptor(description=description, read_only=name not in DYNAMIC,
                               dynamic_typing=name in DOUBLES)


def declare_parameters(node: Any) -> Dict[str, Any]:
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


def check_rates(values: Dict[str, Any], physics_rate: float) -> Dict[str, float]:
    """
    Resolve the rates against the model's physics rate (0 means the default).

    :return: ``sensor_rate``, ``clock_rate``, ``timer_rate`` (and with a camera
        ``camera_rate``) in Hz.
    :raises ValueError: When a rate is above the physics rate, naming it.
    """
    rates = {
        'sensor_rate': values['sensor_rate'] or physics_rate,
        'clock_rate': values['clock_rate'] or min(physics_rate, 1000.0),
        'timer_rate': values['timer_rate'] or min(physics_rate, 250.0),
    }
    if values['camera']:
        rates['camera_rate'] = values['camera_rate']
    for name, rate in rates.items():
        # A hair of slack: 1 / timestep is rarely an exact double.
        if rate > physics_rate * (1.0 + 1e-9):
            raise ValueError(f'{name} must be <= the physics rate of the model '
                             f'({physics_rate:g} Hz, 1/timestep), got {rate:g}')
    return rates


def refuse_invalid(parameters: List[Any]) -> SetParametersResult:
    """Refuse a run-time change whose value fails its check, saying why (set callback)."""
    for parameter in parameters:
        if parameter.name in DYNAMIC:
            error = check_option(parameter.name, parameter.value)
            if error is not None:
                return SetParametersResult(successful=False, reason=error)
    return SetParametersResult(successful=True)


def type_name(default: Any) -> str:
    """Return the ROS parameter type of a default value, as ``ros2 param describe`` says it."""
    if isinstance(default, bool):
        return 'bool'
    if isinstance(default, int):
        return 'integer'
    if isinstance(default, float):
        return 'double'
    return 'string'


def help_text(program: str) -> str:
    """Return the ``--help`` text: usage and every parameter with type, default, description."""
    lines = [f'usage: {program} [--help] [--ros-args --params-file FILE -p NAME:=VALUE ...]',
             '',
             'A MuJoCo simulator behind ROS 2 topics and services (see docs/nodes/mujoco_sim.md).',
             '',
             'parameters (--ros-args -p NAME:=VALUE, or a params file):']
    for name, default, description in PARAMETERS:
        shown = repr(default) if isinstance(default, str) else str(default).lower() \
            if isinstance(default, bool) else str(default)
        lines.append(f'  {name} ({type_name(default)}, default {shown})')
        lines.extend(textwrap.wrap(description, width=88, initial_indent=' ' * 6,
                                   subsequent_indent=' ' * 6))
    return '\n'.join(lines)
