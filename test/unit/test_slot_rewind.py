"""A slot after the clock went back: data of the old time base goes, data of the new one stays."""

from pathlib import Path

from builtin_interfaces.msg import Time
import numpy as np
from rtgym_ros.robot.loader import load_robot_config
from rtgym_ros.robot.slots import Slot
from sensor_msgs.msg import JointState
import yaml

JOINTS = {'topic': 'joint_states', 'type': 'sensor_msgs/msg/JointState',
          'joint_names': ['arm', 'gripper'], 'fields': ['position']}


def joints_slot(tmp_path: Path) -> Slot:
    params = {'time_step_duration': 0.1,
              'actions': {'names': ['effort'], 'effort': {
                  'topic': 'effort', 'type': 'std_msgs/msg/Float64MultiArray', 'field': 'data',
                  'low': [-1.0], 'high': [1.0]}},
              'observations': {'names': ['joints'], 'joints': JOINTS}}
    path = tmp_path / 'robot.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': params}}))
    [spec] = load_robot_config(path)[1].observations
    return Slot(spec, now=lambda: 0.0)


def state(stamp: float, names: list[str], positions: list[float]) -> JointState:
    sec = int(stamp)
    message = JointState(name=names, position=positions)
    message.header.stamp = Time(sec=sec, nanosec=round((stamp - sec) * 1e9))
    return message


def test_old_time_base_data_goes(tmp_path):
    slot = joints_slot(tmp_path)
    slot.store(state(12.5, ['arm', 'gripper'], [1.0, 2.0]))
    slot.forget_after(0.0)  # a reset set the clock back from 12.5 s to 0
    assert slot.missing() == ['joints.arm', 'joints.gripper']
    assert slot.stamp == -np.inf


def test_new_time_base_data_sent_before_the_rewound_clock_stays(tmp_path):
    slot = joints_slot(tmp_path)
    slot.store(state(0.001, ['arm', 'gripper'], [1.0, 2.0]))  # arrived before the new /clock
    slot.forget_after(0.001)
    assert slot.missing() == []
    assert slot.read().tolist() == [1.0, 2.0]


def test_merged_joints_go_when_any_is_of_the_old_time_base(tmp_path):
    slot = joints_slot(tmp_path)
    slot.store(state(12.5, ['gripper'], [2.0]))  # another publisher, not reset yet
    slot.store(state(0.001, ['arm'], [1.0]))
    slot.forget_after(0.001)
    assert slot.missing() == ['joints.arm', 'joints.gripper']
