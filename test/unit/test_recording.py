"""
Recorded episodes without DDS: the ``record`` key, message definitions, the bag writer.

The writer is checked with rosbags itself, reading back what it wrote; recording from an env
on a robot is in test/integration/test_recorded_episodes.py. Needs rosbags (the ``record`` extra).
"""

import json
import os
from pathlib import Path
import subprocess
import sys
import threading

from diagnostic_msgs.msg import DiagnosticStatus
from emulated_robots import robot_params, write_config
import gymnasium as gym
import numpy as np
import pytest
import rtgym_ros  # noqa: F401
from rtgym_ros.record.config import record_spec
from sensor_msgs.msg import JointState, LaserScan
from std_msgs.msg import Float64MultiArray
import yaml

pytest.importorskip('rosbags', reason="recording needs rosbags: pip install 'rtgym_ros[record]'")

from rosbags.rosbag2 import Reader  # noqa: E402, I100
from rtgym_ros.record.bag_writer import BagWriter  # noqa: E402, I100
from rtgym_ros.record.message_types import describe, msg_file, typestore  # noqa: E402, I100
from rtgym_ros.record.recorder import flatten, step_status, text  # noqa: E402, I100


# -- the record key -----------------------------------------------------------------------------


def test_record_key_takes_a_directory_or_a_mapping(tmp_path):
    assert record_spec(None) is None and record_spec('') is None
    spec = record_spec(str(tmp_path / 'run'))
    assert spec.path == tmp_path / 'run' and spec.queue_size == 1000
    spec = record_spec({'path': str(tmp_path / 'run_{time}'), 'queue_size': 10})
    assert spec.path.parent == tmp_path and spec.path.name.startswith('run_20')
    assert '{time}' not in str(spec.path) and spec.queue_size == 10


@pytest.mark.parametrize('value, message', [
    (['a'], 'record must be a bag directory or a mapping'),
    ({'path': 'x', 'topics': []}, "record has unknown keys ['topics']"),
    ({'queue_size': 5}, 'record.path must name the bag directory'),
    ({'path': 'x', 'queue_size': 0}, 'record.queue_size must be an integer >= 1'),
    ({'path': 'x', 'queue_size': 1.5}, 'record.queue_size must be an integer'),
    ('run.mcap', "give 'run', and the MCAP file is run/run.mcap"),
])
def test_record_key_errors_name_the_key(value, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as error:
        record_spec(value)
    assert message in str(error.value)


def test_an_existing_bag_is_never_overwritten(tmp_path):
    (tmp_path / 'run').mkdir()
    with pytest.raises(ValueError, match='exists: a bag is never overwritten'):
        record_spec(str(tmp_path / 'run'))


def test_record_without_rosbags_says_how_to_install_it(tmp_path, monkeypatch):
    import importlib.util
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec',
                        lambda name, *args: None if name == 'rosbags' else find_spec(name, *args))
    with pytest.raises(ValueError, match=r"pip install 'rtgym_ros\[record\]'"):
        record_spec(str(tmp_path / 'run'))


# -- message definitions ------------------------------------------------------------------------


@pytest.mark.parametrize('msg_type', [JointState, LaserScan, Float64MultiArray, DiagnosticStatus])
def test_definitions_and_hashes_are_the_installed_ones(msg_type):
    name, msgdef, rihs01 = describe(msg_type)
    path = msg_file(name)
    assert path is not None, f'{name}.msg is installed with its package'
    # rosidl writes each type's hash beside its .msg: ours must be that one (ros2 bag checks).
    hashes = json.loads(path.with_suffix('.json').read_text())['type_hashes']
    assert rihs01 == next(h['hash_string'] for h in hashes if h['type_name'] == name)


def test_a_definition_carries_the_types_it_uses():
    _, msgdef, _ = describe(JointState)
    assert msgdef.startswith('std_msgs/Header header\n')
    assert 'MSG: std_msgs/Header' in msgdef and 'MSG: builtin_interfaces/Time' in msgdef


# -- the bag writer -----------------------------------------------------------------------------


def read_bag(path: Path) -> dict[str, list]:
    """Return each topic's messages, decoded by rosbags, in time order."""
    messages: dict[str, list] = {}
    with Reader(path) as reader:
        for connection, _, raw in reader.messages():
            messages.setdefault(connection.topic, []).append(
                typestore().deserialize_cdr(raw, connection.msgtype))
    return messages


def test_bag_writer_writes_a_rosbag2_with_mcap_storage(tmp_path):
    bag = BagWriter(tmp_path / 'run')
    data = bag.add_topic('/cmd', Float64MultiArray)
    joints = bag.add_topic('/joint_states', JointState)
    assert bag.add_topic('/cmd', Float64MultiArray) == data  # declared once
    for i in range(5):
        assert bag.write(data, 1_000 + i, Float64MultiArray(data=[float(i)]))
    assert bag.write_later(joints, 2_000, lambda: JointState(name=['j0'], position=[0.5]))
    assert bag.close() and bag.close()  # idempotent
    assert not bag.write(data, 3_000, Float64MultiArray())  # after close: dropped, counted
    assert bag.dropped == {'/cmd': 1} and bag.failed == 0

    assert sorted(p.name for p in (tmp_path / 'run').iterdir()) == ['metadata.yaml', 'run.mcap']
    messages = read_bag(tmp_path / 'run')
    assert [list(m.data) for m in messages['/cmd']] == [[float(i)] for i in range(5)]
    assert list(messages['/joint_states'][0].position) == [0.5]


def test_topics_carry_the_qos_a_player_offers(tmp_path):
    """rosbag2's metadata: what ``ros2 bag play`` offers (its default without: volatile)."""
    from rclpy.qos import DurabilityPolicy, qos_profile_sensor_data, QoSProfile
    from rtgym_ros.record.recorder import replay_qos
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    bag = BagWriter(tmp_path / 'run')
    bag.add_topic('/scan', LaserScan, qos=replay_qos(qos_profile_sensor_data))
    bag.add_topic('/map_ready', JointState, qos=replay_qos(latched))
    bag.add_topic('/cmd', Float64MultiArray, qos=QoSProfile(depth=10))
    bag.add_topic('/steps', DiagnosticStatus)
    assert bag.close()
    metadata = yaml.safe_load((tmp_path / 'run' / 'metadata.yaml').read_text())
    offered = {entry['topic_metadata']['name']: [
        (qos['reliability'], qos['durability'], qos['depth'])
        for qos in entry['topic_metadata']['offered_qos_profiles']]
        for entry in metadata['rosbag2_bagfile_information']['topics_with_message_count']}
    assert offered == {'/scan': [('reliable', 'volatile', 5)],
                       '/map_ready': [('reliable', 'transient_local', 1)],
                       '/cmd': [('reliable', 'volatile', 10)], '/steps': []}


def test_a_message_is_stored_as_the_wire_carries_it(tmp_path):
    """serialize_message pads JointState to its size estimate (60 bytes): the bag has 52."""
    bag = BagWriter(tmp_path / 'run')
    bag.write(bag.add_topic('/joint_states', JointState), 1,
              JointState(name=['j0'], position=[0.5]))
    assert bag.close()
    with Reader(tmp_path / 'run') as reader:
        [(_, _, raw)] = list(reader.messages())
    assert len(raw) == 52


def test_a_full_queue_drops_and_counts_and_never_blocks(tmp_path):
    bag = BagWriter(tmp_path / 'run', queue_size=2)
    topic = bag.add_topic('/cmd', Float64MultiArray)
    release = threading.Event()
    assert bag.write_later(topic, 1, lambda: release.wait(10.0) and Float64MultiArray())
    # The writer thread is busy building the first message: two fit in the queue, then drops.
    results = []
    for i in range(10):
        results.append(bag.write(topic, 2 + i, Float64MultiArray(data=[float(i)])))
        if i == 0:
            threading.Event().wait(0.2)  # let the thread take the first item
    release.set()
    assert bag.close()
    assert results.count(True) == 2 and bag.dropped == {'/cmd': 8}
    with Reader(tmp_path / 'run') as reader:
        assert reader.message_count == 3
    metadata = yaml.safe_load((tmp_path / 'run' / 'metadata.yaml').read_text())
    assert metadata['rosbag2_bagfile_information']['custom_data'] == {
        'rtgym_ros.dropped': '{"/cmd": 8}'}


def test_a_message_that_cannot_be_written_is_counted_and_the_rest_are_written(tmp_path):
    bag = BagWriter(tmp_path / 'run')
    topic = bag.add_topic('/cmd', Float64MultiArray)
    bag.write_later(topic, 1, lambda: 1 / 0)
    bag.write(topic, 2, Float64MultiArray(data=[1.0]))
    assert bag.close()
    assert bag.failed == 1 and isinstance(bag.error, ZeroDivisionError)
    assert [list(m.data) for m in read_bag(tmp_path / 'run')['/cmd']] == [[1.0]]


KILLED_WRITER = """
import os, sys, time
from std_msgs.msg import Float64MultiArray
from rtgym_ros.record.bag_writer import BagWriter
bag = BagWriter(sys.argv[1])
topic = bag.add_topic('/cmd', Float64MultiArray)
for i in range(300):
    bag.write(topic, 1_000 + i, Float64MultiArray(data=[float(i)]))
time.sleep(1.5)  # the writer's FLUSH_PERIOD (1 s), and some
os._exit(0)  # killed: no close(), no atexit
"""


def test_a_killed_process_leaves_what_was_written_in_the_mcap_file(tmp_path):
    """The messages written over a second before the kill are in the file, for reindex."""
    stream_reader = pytest.importorskip('mcap.stream_reader', reason='mcap is not installed')
    records = pytest.importorskip('mcap.records', reason='mcap is not installed')
    exceptions = pytest.importorskip('mcap.exceptions', reason='mcap is not installed')
    subprocess.run([sys.executable, '-c', KILLED_WRITER, str(tmp_path / 'run')], check=True,
                   timeout=60, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert not (tmp_path / 'run' / 'metadata.yaml').exists()
    data = []
    with open(tmp_path / 'run' / 'run.mcap', 'rb') as handle:
        try:
            for record in stream_reader.StreamReader(handle).records:
                if isinstance(record, records.Message):
                    data.append(record.log_time)
        except exceptions.EndOfFile:
            pass  # no footer: the process never closed the bag
    assert data == [1_000 + i for i in range(300)]


# -- step records -------------------------------------------------------------------------------


def test_step_records_are_key_value_pairs_of_the_step_and_its_info():
    info = {'obs_ages': {'joints': 0.004, 'scan': 0.07}, 'stale': ['scan'],
            'capture_time': 12.5, 'newer_than_action': {'joints': True}}
    status = step_status(name='rtgym_ros step', hardware_id='/r1/rtgym_env', event='step',
                         values=[('episode', 0), ('step', 3), ('reward', -0.25),
                                 ('terminated', False), ('action', np.array([0.5, -1.0]))],
                         info=info, timed_out=True)
    assert status.level == DiagnosticStatus.WARN
    assert status.message == 'step: timed out, stale'
    assert {kv.key: kv.value for kv in status.values} == {
        'episode': '0', 'step': '3', 'reward': '-0.25', 'terminated': 'false',
        'action': '0.5,-1.0', 'obs_ages.joints': '0.004', 'obs_ages.scan': '0.07',
        'stale': 'scan', 'capture_time': '12.5', 'newer_than_action.joints': 'true'}
    ok = step_status(name='n', hardware_id='h', event='reset', values=[],
                     info={'stale': []}, timed_out=False)
    assert ok.level == DiagnosticStatus.OK and ok.message == 'reset'


def test_values_are_written_as_text_a_reader_parses():
    assert [text(v) for v in (True, np.bool_(False), 3, np.int64(-2), 0.1, np.float32(0.5),
                              float('inf'), 'a', [], ['a', 'b'], (1, 2.5))] == [
        'true', 'false', '3', '-2', '0.1', '0.5', 'inf', 'a', '', 'a,b', '1,2.5']
    assert flatten({'a': {'b': {'c': 1}}, 'd': 2}) == [('a.b.c', 1), ('d', 2)]


def test_an_env_that_cannot_be_made_leaves_no_bag_behind(tmp_path):
    """A config error found after the bag was opened: the same path works once it is fixed."""
    bag = tmp_path / 'episodes'
    config = write_config(tmp_path / 'robot.yaml', robot_params(
        obs_prepro_func='prepro_functions:fails', record={'path': str(bag)}))
    with pytest.raises(ValueError, match='obs_prepro_func failed'):
        gym.make('rtgym_ros/ros-v1', robot_config=str(config), namespace='/no_bag')
    assert not bag.exists()
    assert not [t for t in threading.enumerate() if t.name.startswith('rtgym_ros bag')]
