"""
A JointState slot read by joint name, fed as ROS robots feed it.

Several publishers on one topic, each with some of the joints (an arm and a gripper); fields
left empty, which the message definition allows; stamps ahead of the clock; and the clock
going back (a simulator reset): data of the old time base goes, data of the new one stays.
"""

from pathlib import Path
import threading

from builtin_interfaces.msg import Time
from config_slots import slot_from_config
from nav_msgs.msg import Odometry
import numpy as np
import pytest
from rtgym_ros.robot.slots import Slot
from sensor_msgs.msg import JointState


def joints_slot(tmp_path: Path, fields: tuple[str, ...] = ('position',), *,
                now: float = 0.0) -> Slot:
    joints = {'topic': 'joint_states', 'type': 'sensor_msgs/msg/JointState',
              'joint_names': ['arm', 'gripper'], 'fields': list(fields)}
    return slot_from_config(tmp_path, 'joints', joints, now=now)


def state(stamp: float, names: list[str], positions: list[float], *,
          effort: list[float] | None = None) -> JointState:
    sec = int(stamp)
    message = JointState(name=names, position=positions, effort=effort or [])
    message.header.stamp = Time(sec=sec, nanosec=round((stamp - sec) * 1e9))
    return message


# -- stamps ahead of the clock ------------------------------------------------------------------


def test_one_joint_stamped_ahead_makes_the_slot_not_fresh(tmp_path):
    slot = joints_slot(tmp_path, now=100.0)
    slot.store(state(100.0, ['arm'], [1.0]))
    slot.store(state(3700.0, ['gripper'], [2.0]))  # its driver's machine is an hour ahead
    assert slot.from_the_future(100.0) and slot.is_stale(100.0)
    assert not slot.wait_newer_than(99.0, timeout=0.0)
    slot.store(state(100.05, ['gripper'], [2.5]))  # its clock set right
    assert not slot.from_the_future(100.05) and slot.wait_newer_than(99.0, timeout=0.0)


def test_a_message_of_other_joints_changes_nothing_and_is_not_counted(tmp_path):
    # A lockstep reset takes any message counted since its request as the reset state: one
    # of another publisher on /joint_states (a conveyor, a second arm) must not count.
    slot = joints_slot(tmp_path, now=100.0)
    slot.store(state(100.0, ['arm', 'gripper'], [1.0, 2.0]))
    before = (slot.count, slot.stamp, slot.message)
    slot.store(state(100.5, ['conveyor'], [9.0]))
    assert (slot.count, slot.stamp, slot.message) == before


def test_messages_that_name_none_of_the_joints_are_said_with_their_names(tmp_path):
    # A reset that times out says which joints came (``joint_1`` against ``joint1``).
    slot = joints_slot(tmp_path, now=100.0)
    assert slot.names_heard() is None  # nothing came
    slot.store(state(100.0, ['arm_joint', 'gripper_joint'], [1.0, 2.0]))
    assert slot.names_heard() == ('arm_joint', 'gripper_joint') and slot.message is None
    slot.store(state(100.1, ['gripper'], [2.0]))
    assert slot.names_heard() is None  # one of its joints came


def test_what_is_missing_is_read_whole_while_a_message_is_taken_in(tmp_path):
    # The first message of a second publisher takes the whole message kept so far apart,
    # joint by joint: a look in between must not find every joint unseen.
    slot = joints_slot(tmp_path, now=100.0)
    slot.store(state(100.0, ['arm', 'gripper'], [1.0, 2.0]))
    table = slot._joints
    absorbing, go_on = threading.Event(), threading.Event()
    absorb = table._absorb

    def slow_absorb(*args):
        absorbing.set()
        go_on.wait(5.0)
        return absorb(*args)
    table._absorb = slow_absorb
    taker = threading.Thread(target=slot.store, args=(state(100.1, ['gripper'], [2.5]),))
    taker.start()
    assert absorbing.wait(5.0)
    seen = []
    looker = threading.Thread(target=lambda: seen.append(slot.missing()))
    looker.start()
    looker.join(0.2)
    go_on.set()
    taker.join(5.0)
    looker.join(5.0)
    assert seen == [[]]


def test_a_message_of_our_joints_that_leaves_their_fields_empty_is_not_counted(tmp_path):
    slot = joints_slot(tmp_path, ('effort',), now=100.0)
    slot.store(state(100.0, ['arm', 'gripper'], [1.0, 2.0], effort=[0.1, 0.2]))
    before = (slot.count, slot.stamp, slot.message)
    slot.store(state(100.5, ['arm'], [1.5]))  # a position only: no effort of ours came
    assert (slot.count, slot.stamp, slot.message) == before
    assert slot.given_since(0) and not slot.given_since(slot.count)


def test_data_given_since_a_count_needs_every_joint_and_field_whoever_sends_them(tmp_path):
    # A lockstep reset waits for this: an arm and a gripper on one /joint_states topic.
    slot = joints_slot(tmp_path, ('position', 'effort'), now=100.0)
    slot.store(state(100.0, ['arm', 'gripper'], [1.0, 2.0], effort=[0.1, 0.2]))
    asked = slot.count
    assert not slot.given_since(asked) and slot.not_given_since(asked) == ['joints.arm',
                                                                           'joints.gripper']
    slot.store(state(100.0, ['arm'], [1.5], effort=[0.3]))
    assert not slot.given_since(asked) and slot.not_given_since(asked) == ['joints.gripper']
    slot.store(state(100.0, ['gripper'], [2.5]))  # its effort left empty
    assert not slot.given_since(asked)
    assert slot.not_given_since(asked) == ['joints.gripper.effort']
    slot.store(state(100.0, ['gripper'], [2.5], effort=[0.4]))
    assert slot.given_since(asked) and slot.not_given_since(asked) == []


def test_data_given_since_a_count_by_one_message_of_every_joint(tmp_path):
    slot = joints_slot(tmp_path, now=100.0)
    slot.store(state(100.0, ['arm'], [1.0]))
    asked = slot.count
    slot.store(state(100.0, ['gripper', 'arm'], [2.0, 1.5]))  # read as it is
    assert slot.not_given_since(asked) == [] and slot.given_since(asked)
    slot.store(state(100.0, ['arm'], [1.7]))  # from now on joint by joint: still given
    assert slot.given_since(asked) and not slot.given_since(slot.count - 1)


# -- fields left empty --------------------------------------------------------------------------


def test_a_field_left_empty_by_the_only_publisher_is_missing_not_an_error(tmp_path):
    slot = joints_slot(tmp_path, ('position', 'effort'), now=1.0)
    slot.store(state(1.0, ['arm', 'gripper'], [1.0, 2.0]))  # effort: [] (allowed)
    assert slot.missing() == ['joints.arm.effort', 'joints.gripper.effort']
    assert slot.stamp == -np.inf and slot.read().tolist() == [1.0, 2.0, 0.0, 0.0]
    slot.store(state(1.1, ['arm', 'gripper'], [1.5, 2.5], effort=[0.1, 0.2]))
    assert slot.missing() == [] and slot.stamp == pytest.approx(1.1)
    assert slot.read().tolist() == pytest.approx([1.5, 2.5, 0.1, 0.2])


def test_a_joint_whose_field_stops_coming_goes_stale_with_its_last_value(tmp_path):
    slot = joints_slot(tmp_path, ('position', 'effort'), now=1.0)
    slot.store(state(1.0, ['arm', 'gripper'], [1.0, 2.0], effort=[0.1, 0.2]))
    slot.store(state(2.0, ['arm'], [1.5], effort=[0.3]))
    slot.store(state(2.0, ['gripper'], [3.0]))  # its driver now sends positions only
    assert slot.stamp == pytest.approx(1.0)  # the gripper's effort is as old as it was
    assert slot.read().tolist() == pytest.approx([1.5, 3.0, 0.3, 0.2])


def test_a_malformed_field_is_not_given(tmp_path):
    slot = joints_slot(tmp_path, now=1.0)
    slot.store(state(1.0, ['arm', 'gripper'], [1.0, 2.0]))
    slot.store(state(2.0, ['arm'], [1.5]))
    slot.store(state(2.0, ['gripper', 'other'], [7.0]))  # one value for two names
    assert slot.stamp == pytest.approx(1.0) and slot.read().tolist() == [1.5, 2.0]


# -- the clock going back -----------------------------------------------------------------------


def test_old_time_base_data_goes(tmp_path):
    slot = joints_slot(tmp_path)
    slot.store(state(12.5, ['arm', 'gripper'], [1.0, 2.0]))
    slot.forget_after(0.0, jumped_from=12.5)  # a reset set the clock back from 12.5 s to 0
    assert slot.missing() == ['joints.arm', 'joints.gripper']
    assert slot.stamp == -np.inf


def test_new_time_base_data_sent_before_the_rewound_clock_stays(tmp_path):
    slot = joints_slot(tmp_path)
    slot.store(state(0.001, ['arm', 'gripper'], [1.0, 2.0]))  # arrived before the new /clock
    slot.forget_after(0.001, jumped_from=12.5)
    assert slot.missing() == []
    assert slot.read().tolist() == [1.0, 2.0]


@pytest.mark.parametrize('names', [['arm', 'gripper'], ['arm']])
def test_a_reset_state_stamped_zero_before_the_rewound_clock_stays(tmp_path, names):
    slot = joints_slot(tmp_path, now=12.3)
    if names == ['arm']:
        slot.store(state(0.0, ['gripper'], [2.0]))
    slot.store(state(0.0, names, [1.0] * len(names)))  # the reset state, before /clock's 0
    slot.forget_after(0.0, jumped_from=12.35)
    assert slot.missing() == [] and slot.stamp == 0.0
    slot.store(state(0.01, ['arm'], [1.5]))  # from now on joint by joint
    assert slot.read().tolist() == [1.5, 1.0 if names == ['arm', 'gripper'] else 2.0]


def test_a_zero_stamp_of_a_publisher_silent_long_before_a_reset_goes(tmp_path):
    slot = joints_slot(tmp_path, now=12.3)
    slot.store(state(0.0, ['arm', 'gripper'], [1.0, 2.0]))  # unset: stamped on arrival, 12.3
    slot.forget_after(0.0, jumped_from=15.0)  # silent for 2.7 s, then the clock went to 0
    assert slot.missing() == ['joints.arm', 'joints.gripper']


def test_a_zero_stamp_goes_when_the_clock_goes_back_elsewhere(tmp_path):
    slot = joints_slot(tmp_path, now=12.3)
    slot.store(state(0.0, ['arm', 'gripper'], [1.0, 2.0]))  # unset: stamped on arrival, 12.3
    slot.forget_after(5.0, jumped_from=12.3)
    assert slot.missing() == ['joints.arm', 'joints.gripper']


def test_merged_joints_go_when_any_is_of_the_old_time_base(tmp_path):
    slot = joints_slot(tmp_path)
    slot.store(state(12.5, ['gripper'], [2.0]))  # another publisher, not reset yet
    slot.store(state(0.001, ['arm'], [1.0]))
    slot.forget_after(0.001, jumped_from=12.5)
    assert slot.missing() == ['joints.arm', 'joints.gripper']


# -- waits bounded on a simulator's clock -------------------------------------------------------


def wait_in_thread(slot: Slot, ready, clock) -> tuple[threading.Thread, list]:
    result: list = []
    thread = threading.Thread(target=lambda: result.append(
        slot.wait_for(ready, timeout=0.01, clock=clock)))
    thread.start()
    return thread, result


@pytest.mark.parametrize('end', ['the clock moves on', 'data comes', 'the env closes'])
def test_a_wait_on_a_paused_simulator_clock_lasts_until(tmp_path, end):
    slot = joints_slot(tmp_path, now=5.0)
    sim_time = [5.0]
    thread, result = wait_in_thread(slot, lambda: slot.stamp >= 5.0, lambda: sim_time[0])
    thread.join(0.2)
    assert thread.is_alive(), 'a 0.01 s wait ended while the clock stood still'
    if end == 'the clock moves on':
        sim_time[0] = 5.02
    elif end == 'data comes':
        slot.store(state(5.0, ['arm', 'gripper'], [1.0, 2.0]))
    else:
        slot.abort()
    thread.join(5.0)
    assert result == [end == 'data comes']


@pytest.mark.parametrize('jumped_from, kept', [(12.35, True), (15.0, False)])
def test_a_zero_stamp_of_a_slot_read_by_field_stays_at_a_reset_only_if_it_just_came(
        tmp_path, jumped_from, kept):
    odometry = {'topic': 'odom', 'type': 'nav_msgs/msg/Odometry',
                'field': 'pose.pose.position.x'}
    slot = slot_from_config(tmp_path, 'odom', odometry, now=12.3)
    slot.store(Odometry())  # stamp unset: stamped on arrival
    slot.forget_after(0.0, jumped_from=jumped_from)
    assert (slot.missing() == [], slot.stamp) == ((True, 0.0) if kept else (False, -np.inf))


def test_a_field_with_another_number_of_values_than_of_names_is_said(tmp_path):
    # robot_state_publisher warns of such a message too; the slot takes what else it gives.
    said = []
    joints = {'topic': 'joint_states', 'type': 'sensor_msgs/msg/JointState',
              'joint_names': ['arm', 'gripper'], 'fields': ['position']}
    slot = slot_from_config(tmp_path, 'joints', joints, now=100.0,
                            warn=lambda kind, message: said.append(message))
    slot.store(state(100.0, ['arm'], [1.0]))
    slot.store(state(100.0, ['gripper'], [2.0, 3.0], effort=[1.0, 2.0, 3.0]))
    assert said == ['observations.joints: a JointState message with 1 names and 2 position '
                    'values: those fields are not taken (the message definition allows one '
                    'value per name, or none)']  # effort is not configured: not said
    assert slot.missing() == ['joints.gripper']
    slot.store(state(100.1, ['gripper'], [2.0]))
    assert len(said) == 1 and slot.missing() == []
