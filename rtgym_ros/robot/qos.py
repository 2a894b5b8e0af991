"""QoS profiles from config: a preset name, or a preset with overrides."""

from typing import Any

from rclpy.qos import (DurabilityPolicy, HistoryPolicy, qos_profile_sensor_data,
                       qos_profile_system_default, QoSProfile, ReliabilityPolicy)

from rtgym_ros.core.validate import short_repr

PRESETS = ('sensor_data', 'reliable', 'best_effort', 'system_default')
MAX_DEPTH = 2 ** 31 - 1
"""The largest depth rclpy accepts: its binding of rmw_qos_profile_t takes a C int (rclpy 9)."""
_DURABILITY = {'volatile': DurabilityPolicy.VOLATILE,
               'transient_local': DurabilityPolicy.TRANSIENT_LOCAL}


def qos_from_config(value: Any, *, key: str, default: str) -> QoSProfile:
    """
    ``'reliable'`` or ``{preset: reliable, depth: 5, durability: transient_local}``.

    ``sensor_data`` (best effort, depth 5) suits sensor subscriptions: it matches reliable and
    best-effort publishers alike. ``reliable`` (depth 10) suits commands. ``transient_local``
    with a best-effort preset is refused: over best effort a late subscription gets no
    historical samples, so a latched message would never arrive.
    """
    options = {'preset': default} if value is None else value
    if isinstance(options, str):
        options = {'preset': options}
    if not isinstance(options, dict):
        raise ValueError(f'{key} must be a preset name or a mapping, got {short_repr(value)}')
    unknown = sorted(set(options) - {'preset', 'depth', 'durability'})
    if unknown:
        raise ValueError(f'{key} has unknown keys {unknown}; expected preset, depth, durability')
    preset = options.get('preset', default)
    if not isinstance(preset, str) or preset not in PRESETS:
        raise ValueError(f'{key}.preset must be one of {", ".join(PRESETS)}, '
                         f'got {short_repr(preset)}')
    profile = _preset(preset)
    if 'depth' in options:
        depth = options['depth']
        if (isinstance(depth, bool) or not isinstance(depth, int)
                or not 1 <= depth <= MAX_DEPTH):
            raise ValueError(f'{key}.depth must be an integer from 1 to {MAX_DEPTH}, '
                             f'got {short_repr(depth)}')
        profile.history = HistoryPolicy.KEEP_LAST
        profile.depth = depth
    if 'durability' in options:
        durability = options['durability']
        if not isinstance(durability, str) or durability not in _DURABILITY:
            raise ValueError(f'{key}.durability must be one of {", ".join(_DURABILITY)}, '
                             f'got {short_repr(durability)}')
        profile.durability = _DURABILITY[durability]
        if (profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
                and profile.reliability == ReliabilityPolicy.BEST_EFFORT):
            given = '' if 'preset' in options else ' (the default here)'
            raise ValueError(
                f'{key}: durability transient_local needs a reliable preset (over best effort a '
                f'latched message never reaches a late subscription), got preset {preset}'
                f'{given}, which is best effort; write '
                f'{{preset: reliable, durability: transient_local}}')
    return profile


def _preset(name: str) -> QoSProfile:
    if name == 'sensor_data':
        base = qos_profile_sensor_data
    elif name == 'system_default':
        base = qos_profile_system_default
    else:
        reliability = (ReliabilityPolicy.RELIABLE if name == 'reliable'
                       else ReliabilityPolicy.BEST_EFFORT)
        return QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST, reliability=reliability,
                          durability=DurabilityPolicy.VOLATILE)
    return QoSProfile(history=base.history, depth=base.depth, reliability=base.reliability,
                      durability=base.durability)
