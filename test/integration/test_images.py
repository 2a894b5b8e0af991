"""
Image slots of ``rtgym_ros/ros-v1`` over real DDS, taken serialized (default) or as messages.

A publisher on the probe's node (its own context) sends frames whose every byte is the frame's
number, with row padding, so an observation tells which frame it shows and whether it changed.
"""

import threading
import time

from emulated_robots import next_name, write_config
import gymnasium as gym
import numpy as np
import pytest
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message
from ros_probe import wait_until
import rtgym_ros  # noqa: F401
from rtgym_ros.robot.interface import IMAGE_TAKE_VARIABLE
from rtgym_ros.ros.runtime import RosRuntime
from sensor_msgs.msg import Image

T = 0.05
SHAPE = (6, 5, 3)
PAD = 3  # bytes after each row


class Camera:
    """Publish frame k (every pixel byte k % 256) every ``period`` s, stamped ``age`` s ago."""

    def __init__(self, probe, topic: str, *, period: float = 0.02) -> None:
        self._node = probe.node
        self._publisher = probe.node.create_publisher(
            Image, topic, QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        self.age = 0.0
        self.sent = 0
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        height, width, channels = SHAPE
        step = width * channels + PAD
        while not self._stop.is_set():
            message = Image(height=height, width=width, encoding='rgb8', step=step,
                            data=bytes([self.sent % 256]) * (step * height))
            message.header.frame_id = 'camera_optical'
            stamp = self._node.get_clock().now().nanoseconds * 1e-9 - self.age
            message.header.stamp.sec = int(stamp)
            message.header.stamp.nanosec = int((stamp - int(stamp)) * 1e9)
            self._publisher.publish(message)
            self.sent += 1
            time.sleep(self._period)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self._node.destroy_publisher(self._publisher)


@pytest.fixture(params=['serialized', 'message'])
def image_take(request, monkeypatch):
    monkeypatch.setenv(IMAGE_TAKE_VARIABLE, request.param)
    return request.param


@pytest.fixture
def camera_env(probe, tmp_path):
    made = []

    def make(**camera_options) -> tuple[gym.Env, Camera]:
        namespace = f'/images_{next_name()}'
        camera = {'topic': 'camera', 'type': 'sensor_msgs/msg/Image', 'shape': list(SHAPE),
                  'encoding': 'rgb8', 'qos': 'reliable', **camera_options}
        params = {'time_step_duration': T, 'start_obs_capture': T, 'reset_timeout': 10.0,
                  'actions': {'names': ['cmd'], 'cmd': {
                      'topic': 'command', 'type': 'std_msgs/msg/Float64MultiArray',
                      'field': 'data', 'low': [-1.0], 'high': [1.0]}},
                  'observations': {'names': ['camera'], 'camera': camera}}
        path = write_config(tmp_path / f'camera{len(made)}.yaml', params)
        publisher = Camera(probe, f'{namespace}/camera')
        try:
            env = gym.make('rtgym_ros/ros-v1', robot_config=str(path), namespace=namespace,
                           node_name=f'images_env_{len(made)}', disable_env_checker=True)
        except BaseException:
            publisher.close()
            raise
        made.append((env, publisher))
        return env, publisher

    yield make
    for env, publisher in made:
        env.close()
        publisher.close()


def _frame_number(image: np.ndarray) -> int:
    values = np.unique(image)
    assert values.size == 1, f'an observation mixes frames: {values.tolist()}'
    return int(values[0])


def test_observations_are_the_published_frames(camera_env, image_take):
    env, camera = camera_env()
    obs, _ = env.reset()
    seen = []
    for _ in range(20):
        obs, _, _, _, info = env.step(np.zeros(1, np.float32))
        image = obs['camera']
        assert image.shape == SHAPE and image.dtype == np.uint8 and not image.flags.writeable
        seen.append(_frame_number(image))
        assert info['stale'] == []
    assert seen == sorted(seen) and len(set(seen)) > 5, seen
    threads = {thread.name for thread in threading.enumerate()}
    assert ('rtgym_ros:images_env_0_frames' in threads) == (image_take == 'serialized'), threads


def test_kept_observations_never_change(camera_env, image_take):
    env, camera = camera_env()
    env.reset()
    kept = []
    for _ in range(30):  # frames arrive faster than the steps: buffers are in use meanwhile
        obs, *_ = env.step(np.zeros(1, np.float32))
        kept.append((obs['camera'], obs['camera'].copy()))
    for image, copy in kept:
        np.testing.assert_array_equal(image, copy)
    assert len({_frame_number(copy) for _, copy in kept}) > 5


def test_the_header_stamp_decides_staleness(camera_env, image_take):
    env, camera = camera_env(max_age=0.5, on_stale='flag')
    camera.age = 2.0
    env.reset()
    _, _, _, _, info = env.step(np.zeros(1, np.float32))
    assert info['stale'] == ['camera'] and info['obs_ages']['camera'] > 1.5, info
    camera.age = 0.0
    wait_until(lambda: env.step(np.zeros(1, np.float32))[-1]['stale'] == [], 5.0,
               'a fresh frame')


def test_an_unknown_image_take_is_refused(camera_env, monkeypatch):
    monkeypatch.setenv(IMAGE_TAKE_VARIABLE, 'zero_copy')
    with pytest.raises(ValueError, match=f"{IMAGE_TAKE_VARIABLE} must be one of .*'zero_copy'"):
        camera_env()


def test_a_frame_that_cannot_be_read_is_dropped_as_the_rmw_drops_it(camera_env, image_take):
    env, camera = camera_env()
    env.reset()
    corrupt = bytearray(serialize_message(
        Image(height=1, width=1, encoding='rgb8', step=3, data=b'abc')))
    data = corrupt.index(b'\x03\x00\x00\x00abc')
    corrupt[data:data + 4] = b'\x00\xff\xff\xff'  # data announces more bytes than follow
    for _ in range(10):
        camera._publisher.publish(bytes(corrupt))
        time.sleep(0.02)
    seen = [_frame_number(env.step(np.zeros(1, np.float32))[0]['camera']) for _ in range(20)]
    assert seen == sorted(seen) and len(set(seen)) > 5, seen


def test_a_failing_serialized_callback_stops_the_runtime_and_is_reported(probe):
    topic = f'/images_{next_name()}/camera'
    runtime = RosRuntime(node_name=f'images_failing_{next_name()}')
    reported = []
    runtime.on_failure = lambda: reported.append(runtime.failure)
    camera = None
    try:
        def fail(data: memoryview) -> None:
            raise RuntimeError(f'bad frame of {len(data)} bytes')
        runtime.io_node.create_serialized_subscription(
            Image, topic, fail, QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        camera = Camera(probe, topic)
        wait_until(lambda: reported, 10.0, 'the failure to be reported')
        assert isinstance(reported[0], RuntimeError) and 'bad frame' in str(reported[0])
        assert not runtime.alive()
    finally:
        if camera is not None:
            camera.close()
        runtime.close()
