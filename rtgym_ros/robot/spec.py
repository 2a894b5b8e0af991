"""
The typed description of a robot that the loader builds and the interface wires to ROS.

Everything here is checked already: an interface or env reading a spec never validates again.
"""

from dataclasses import dataclass, field
import math
from typing import Any, Callable

import gymnasium.spaces as spaces
import numpy as np
from rclpy.qos import QoSProfile

from rtgym_ros.msgconv.fields import JOINT_STATE, JOINT_TRAJECTORY
from rtgym_ros.msgconv.readers import FieldReader
from rtgym_ros.msgconv.type_names import interface_name
from rtgym_ros.msgconv.writers import FieldWriter
from rtgym_ros.record.config import RecordSpec
from rtgym_ros.robot.services import ServiceSpec
from rtgym_ros.robot.transforms import SlotTransform

STALE_POLICIES = ('warn', 'flag', 'wait', 'error')
STEPPING = ('realtime', 'lockstep')
BOUNDS_POLICIES = ('flag', 'clip', 'error')
ACTION_POLICIES = ('clip', 'reject')
LAYOUTS = ('dict', 'tuple')

# Read by the agent node (rtgym_ros.nodes.agent) from the same file; the env ignores them.
AGENT_DEFAULTS: dict[str, Any] = {
    'policy': 'zero', 'episodes': 3, 'seed': 0, 'timing_csv': '', 'timing_plot': '',
    'progress': True,
}


@dataclass(frozen=True)
class StaleTruncation:
    """``truncate_on_stale``: end the episode when the robot is gone (its slots stay stale)."""

    steps: int
    """Consecutive captures every watched slot must be stale for."""
    slots: tuple[str, ...]
    """The watched slots (all slots unless the config names some)."""


@dataclass(frozen=True)
class RobotOptions:
    """The robot-level keys of a config (besides the env's rtgym and ROS keys)."""

    action_policy: str = 'clip'
    """Out-of-bounds actions: 'clip' to the bounds or 'reject' (ValueError)."""
    observation_layout: str = 'dict'
    """'dict' (a flat gymnasium Dict) or 'tuple' (rtgym's Tuple)."""
    newer_than_action: bool = False
    """Wait (bounded) at capture for messages stamped after the action was sent."""
    newer_than_action_timeout: float | None = None
    """Bound of that wait, shared by all slots; None: one time-step."""
    reset_timeout: float = 5.0
    """Bound on reset's service calls and on its wait for first messages."""
    diagnostics_period: float = 1.0
    """/diagnostics publishing period (s); 0 disables."""
    stepping: str = 'realtime'
    """'realtime' (the clock runs by itself) or 'lockstep' (the env advances a paused sim)."""
    stamp_tolerance: float = 0.1
    """Seconds a header stamp may be ahead of the node's clock (skew) and still count."""
    truncate_on_stale: StaleTruncation | None = None
    """End the episode (truncated) when the watched slots stay stale; None: never."""


ROBOT_DEFAULTS: dict[str, Any] = {
    'watchdog_timeout': 1.0,  # a robot must not keep its last command when the agent stalls
    **{name: getattr(RobotOptions(), name) for name in RobotOptions.__dataclass_fields__},
}


@dataclass
class ActionGroup:
    """One action topic: its slice of the action vector and its safe value."""

    name: str
    topic: str
    writer: FieldWriter
    low: np.ndarray
    high: np.ndarray
    default: np.ndarray
    qos: QoSProfile
    stamped: bool = True
    """False: header.stamp stays zero ('execute on receipt' for trajectory controllers)."""
    max_delta: np.ndarray | None = None
    """Largest change per time-step of each value (a rate limit for position commands)."""
    on_stop: str = 'default'
    """What the group gets when the robot must stop: 'default', or 'hold' its last values."""

    @property
    def size(self) -> int:
        return self.writer.size


@dataclass
class ObservationSlotSpec:
    """One sensor topic and how its newest message becomes part of the observation."""

    name: str
    topic: str
    reader: FieldReader
    space: spaces.Box
    max_age: float | None
    on_stale: str
    wait_timeout: float
    use_header_stamp: bool
    qos: QoSProfile
    out_of_bounds: str = 'flag'
    """Values outside ``space`` (NaN included): 'flag' in info, 'clip' into it, 'error'."""
    transform: SlotTransform | None = None
    """Applied to the values read, at capture; ``space`` is its output's."""
    stale_warn_steps: int = 10
    """Under on_stale 'flag': log (rate-limited) once the slot is stale this many captures."""

    @property
    def labels(self) -> tuple[str, ...] | None:
        """Return what each value of the observation is (None for images)."""
        return self.transform.labels if self.transform is not None else self.reader.labels


@dataclass
class SignalSpec:
    """
    Reward or termination: from a topic's field, a function, or a constant.

    From a topic, a message counts for the time-step it arrives in; ``constant`` is the value
    of a time-step in which none arrived (flagged in ``info``).
    """

    constant: Any = None
    topic: str | None = None
    reader: FieldReader | None = None
    function: Callable | None = None
    qos: QoSProfile | None = None


@dataclass
class StepSpec:
    """Lockstep: how the env asks the simulator to advance (topic, or a service request)."""

    topic: str | None = None
    """Our simulators' ``step_until`` (rosgraph_msgs/msg/Clock): the target sim time."""
    service: ServiceSpec | None = None
    """Any service (gz ``ControlWorld``): its request gets ``steps_field`` set per advance."""
    steps_field: str | None = None
    """Request field set to ``ceil(duration / step_size)`` (gz: world_control.multi_step)."""
    step_size: float | None = None
    """The simulator's physics step (s), for ``steps_field``."""


def physics_steps(duration: float, step_size: float) -> int:
    """
    Count the simulator steps that cover ``duration``.

    At least one; a float's rounding (0.07 / 0.01 = 7.000000000000001) asks for no step more.
    """
    return max(1, math.ceil(duration / step_size - 1e-6))


@dataclass
class RobotSpec:
    """Everything the ROS interface needs, checked."""

    actions: list[ActionGroup]
    observations: list[ObservationSlotSpec]
    reward: SignalSpec
    termination: SignalSpec | None
    reset: ServiceSpec | None
    pause: ServiceSpec | None
    unpause: ServiceSpec | None
    options: RobotOptions = field(default_factory=lambda: RobotOptions())
    step: StepSpec | None = None
    """Lockstep only: the advance request."""
    record: RecordSpec | None = None
    """Where to record the episodes (a rosbag2 in MCAP); None: not recorded."""

    @property
    def action_low(self) -> np.ndarray:
        return np.concatenate([group.low for group in self.actions])

    @property
    def action_high(self) -> np.ndarray:
        return np.concatenate([group.high for group in self.actions])

    @property
    def default_action(self) -> np.ndarray:
        return np.concatenate([group.default for group in self.actions])

    @property
    def max_delta(self) -> np.ndarray | None:
        """Per-value rate limits (inf where a group has none); None when no group has one."""
        if all(group.max_delta is None for group in self.actions):
            return None
        return np.concatenate([np.full(group.writer.size, np.inf) if group.max_delta is None
                               else group.max_delta for group in self.actions])


def check_one_group_per_topic(groups: list[ActionGroup], topics: list[str]) -> None:
    """
    Refuse two action groups on one topic (``topics``: each group's, as given or resolved).

    Each group publishes a message of its own with the other group's fields left zero:
    a robot would get ``linear.x = v, angular.z = 0``, then ``linear.x = 0, angular.z = w``.
    Not for messages that name their joints (JointState, JointTrajectory): a consumer
    merges those by name.
    """
    seen: dict[str, str] = {}
    for group, topic in zip(groups, topics):
        if interface_name(group.writer.msg_type) in (JOINT_STATE, JOINT_TRAJECTORY):
            continue
        other = seen.setdefault(topic, group.name)
        if other != group.name:
            raise ValueError(
                f'actions.{other} and actions.{group.name} publish on the same topic '
                f'{topic}: each would send a message of its own, the other '
                "group's fields left zero; give one group all the fields of that topic")
