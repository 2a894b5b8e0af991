"""
Recorded episodes: ``record`` on an env driving an emulated robot, read back with rosbags.

The bag must hold what the env received (the robot's JointState), what it published (each
command, as the robot got it) and one step record per reset and step, with the types and
hashes ``ros2 bag info`` lists. Needs rosbags (the ``record`` extra); the check with
Foxglove's reader (mcap-ros2-support) runs where that is installed.
"""

from emulated_robots import act, DEFAULT, f32, T
import pytest
import yaml

pytest.importorskip('rosbags', reason="recording needs rosbags: pip install 'rtgym_ros[record]'")

from rosbags.rosbag2 import Reader  # noqa: E402, I100
from rosbags.typesys import get_typestore, Stores  # noqa: E402, I100

ACTIONS = [0.25, -0.5, 0.75, -1.0, 0.5]  # exact in float32
EPISODES = 2


@pytest.fixture
def recorded(spawn, make_env, tmp_path):
    """Two episodes of len(ACTIONS) steps, recorded; return (robot, bag path, step infos)."""
    robot = spawn()
    bag = tmp_path / 'episodes'
    env = make_env(robot, record={'path': str(bag)}, reward={'constant': 0.5},
                   ep_max_length=len(ACTIONS))
    infos = []
    for episode in range(EPISODES):
        _, info = env.reset(seed=episode)
        infos.append(info)
        for value in ACTIONS:
            *_, info = env.step(act(value))
            infos.append(info)
    recorder = env.unwrapped.recorder
    env.close()
    assert recorder.dropped == {}
    return robot, bag, infos


def decoded(bag) -> dict[str, list[tuple[int, object]]]:
    """Each topic's (timestamp, message), decoded by rosbags with its standard definitions."""
    store = get_typestore(Stores.ROS2_KILTED)
    topics: dict[str, list] = {}
    with Reader(bag) as reader:
        for connection, timestamp, raw in reader.messages():
            topics.setdefault(connection.topic, []).append(
                (timestamp, store.deserialize_cdr(raw, connection.msgtype)))
    return topics


def test_a_recorded_episode_reads_back_with_rosbags(recorded):
    robot, bag, infos = recorded
    metadata = yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    assert metadata['storage_identifier'] == 'mcap' and metadata['version'] == 9
    assert metadata['relative_file_paths'] == ['episodes.mcap']
    # The QoS `ros2 bag play` offers: the command's as published; the robot's JointState
    # (read best-effort) reliable, which reliable and best-effort subscribers both match.
    offered = {entry['topic_metadata']['name']: [
        (qos['reliability'], qos['durability'])
        for qos in entry['topic_metadata']['offered_qos_profiles']]
        for entry in metadata['topics_with_message_count']}
    assert offered[f'{robot.ns}/command'] == [('reliable', 'volatile')]
    assert offered[f'{robot.ns}/joint_states'] == [('reliable', 'volatile')]
    with Reader(bag) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        counts = {c.topic: c.msgcount for c in reader.connections}
    [steps_topic] = [topic for topic, type_name in types.items() if topic.endswith('/steps')]
    assert steps_topic.startswith(f'{robot.ns}/')
    assert types == {f'{robot.ns}/command': 'std_msgs/msg/Float64MultiArray',
                     f'{robot.ns}/joint_states': 'sensor_msgs/msg/JointState',
                     steps_topic: 'diagnostic_msgs/msg/DiagnosticStatus'}
    assert counts[steps_topic] == EPISODES * (1 + len(ACTIONS))
    # The robot publishes at 200 Hz: 2 episodes of 5 time-steps of T and the resets.
    assert counts[f'{robot.ns}/joint_states'] >= EPISODES * len(ACTIONS) * T * 200 * 0.5

    topics = decoded(bag)
    # Each command as sent: what the robot received, in order (default, actions, safe stop).
    sent = [list(message.data) for _, message in topics[f'{robot.ns}/command']]
    robot.wait_commands(len(sent))
    assert sent == [command['data'] for command in robot.commands()]
    assert sent[0] == [DEFAULT] and sent[-1] == [DEFAULT]
    assert [[f32(value)] for value in ACTIONS[:-1]] == sent[1:len(ACTIONS)]
    assert all(list(message.name) == ['j0'] for _, message in topics[f'{robot.ns}/joint_states'])

    records = [(timestamp, {kv.key: kv.value for kv in status.values}, status)
               for timestamp, status in topics[steps_topic]]
    first_step = records[1][1]
    assert first_step['episode'] == '0' and first_step['step'] == '1'
    assert first_step['reward'] == '0.5' and first_step['terminated'] == 'false'
    assert first_step['action'] == repr(ACTIONS[0])
    assert float(first_step['obs_ages.joints']) == pytest.approx(infos[1]['obs_ages']['joints'])
    assert [r[1]['step'] for r in records] == [str(i) for i in range(len(ACTIONS) + 1)] * 2
    assert [r[1]['episode'] for r in records] == ['0'] * 6 + ['1'] * 6
    assert [r[2].message for r in records if r[1]['step'] == '5'] == ['truncated'] * 2
    assert records[0][2].message.startswith('reset')
    # Stamped with the capture time of the observation they describe.
    assert [timestamp for timestamp, _, _ in records] == [
        round(info['capture_time'] * 1e9) for info in infos]


def test_the_bag_opens_with_foxglove_reader(recorded):
    """mcap-ros2-support decodes with the ros2msg schemas in the file, as Foxglove does."""
    reader_module = pytest.importorskip(
        'mcap.reader', reason='mcap-ros2-support (Foxglove’s MCAP reader) is not installed')
    decoder = pytest.importorskip('mcap_ros2.decoder',
                                  reason='mcap-ros2-support is not installed')
    robot, bag, _ = recorded
    with open(bag / 'episodes.mcap', 'rb') as handle:
        reader = reader_module.make_reader(handle,
                                           decoder_factories=[decoder.DecoderFactory()])
        assert reader.get_header().profile == 'ros2'
        summary = reader.get_summary()
        assert {schema.encoding for schema in summary.schemas.values()} == {'ros2msg'}
        assert {channel.message_encoding for channel in summary.channels.values()} == {'cdr'}
        joint_states = [message for _, channel, _, message in reader.iter_decoded_messages()
                        if channel.topic == f'{robot.ns}/joint_states']
    assert joint_states and all(list(m.name) == ['j0'] for m in joint_states)


def test_a_command_that_could_not_be_published_is_not_in_the_bag(spawn, make_env, tmp_path):
    """The bag holds each action message as published: one whose publish() raised is not."""
    robot = spawn()
    bag = tmp_path / 'episodes'
    env = make_env(robot, record={'path': str(bag)})
    env.reset()
    env.step(act(0.5))
    env.step(act(0.25))
    robot.wait_commands(3)  # the default, 0.5 and 0.25
    inner = env.unwrapped
    publisher = inner.interface._publishers[0]
    inner._runtime.call(lambda: inner._runtime.node.destroy_publisher(publisher))
    inner._stop_robot()  # the publication fails (logged): nothing went out
    env.close()  # the safe action fails again
    sent = [list(message.data) for _, message in decoded(bag)[f'{robot.ns}/command']]
    assert sent == [command['data'] for command in robot.commands()] == [
        [DEFAULT], [f32(0.5)], [f32(0.25)]]
