"""The MuJoCo model of mujoco_sim, no ROS: names, errors, Gymnasium's resets, readings, camera."""

import os
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

from rtgym_ros.sim.mujoco_model import (CameraRenderer, GYMNASIUM_RESETS, MujocoModel,
                                        resolve_model, shipped_models)

mujoco = pytest.importorskip(
    'mujoco', reason='mujoco is not installed: pip install "rtgym_ros[mujoco]"')

REPO = Path(__file__).resolve().parents[2]
FLOATING_ARM = REPO / 'test' / 'support' / 'mjcf' / 'floating_arm.xml'


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path, monkeypatch):
    """Run in a folder of the test's own: MuJoCo writes MUJOCO_LOG.TXT into the working one."""
    monkeypatch.chdir(tmp_path)


def gymnasium_env(env_id: str):
    """Gymnasium's own env, the reference (its MuJoCo envs need imageio too)."""
    pytest.importorskip('imageio', reason="Gymnasium's MuJoCo envs need imageio")
    import gymnasium
    return gymnasium.make(env_id).unwrapped


# ------------------------------------------------------------------ names and errors

def test_the_models_gymnasium_ships_are_listed():
    names = shipped_models()
    assert {'inverted_pendulum', 'inverted_double_pendulum', 'reacher', 'half_cheetah',
            'hopper', 'walker2d', 'pusher'} <= set(names)
    assert not any(name.endswith('_v5') for name in names)
    assert set(GYMNASIUM_RESETS) <= set(names)


def test_a_name_takes_the_mjcf_its_v5_env_loads():
    assert resolve_model('walker2d')[1].name == 'walker2d_v5.xml'
    name, path = resolve_model('inverted_pendulum')
    assert (name, path.name) == ('inverted_pendulum', 'inverted_pendulum.xml')
    assert path.is_file()


def test_an_unknown_name_is_refused_with_the_names_listed():
    with pytest.raises(ValueError) as error:
        MujocoModel('inverted_pendulm')
    message = str(error.value)
    assert "got 'inverted_pendulm'" in message
    for name in ('inverted_pendulum', 'inverted_double_pendulum', 'reacher', 'half_cheetah',
                 'hopper'):
        assert name in message


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"model: no MJCF file at '.*nowhere\.xml'"):
        MujocoModel(str(tmp_path / 'nowhere.xml'))
    with pytest.raises(ValueError, match=r'\(a directory\)'):
        MujocoModel(str(tmp_path) + '/')


def test_a_malformed_mjcf_is_refused_naming_the_file(tmp_path):
    path = tmp_path / 'broken.xml'
    path.write_text('<mujoco><worldbody><body><geom type="sphere"/></worldbody></mujoco>')
    with pytest.raises(ValueError, match=r"model: MuJoCo cannot load '.*broken\.xml': .+"):
        MujocoModel(str(path))
    path.write_text('<mujoco><worldbody><joint name="j" type="hinge"/></worldbody></mujoco>')
    with pytest.raises(ValueError, match='MuJoCo cannot load'):
        MujocoModel(str(path))


def test_without_mujoco_the_module_imports_and_the_error_names_the_extra():
    code = """
import sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('mujoco', 'rclpy'):
            raise ImportError(f'{name} is blocked in this test')
sys.meta_path.insert(0, Blocked())
import rtgym_ros.sim.mujoco_model as m
import rtgym_ros.sim.mujoco_tasks
try:
    m.MujocoModel('inverted_pendulum')
except ImportError as error:
    print(error)
else:
    raise SystemExit('no ImportError')
"""
    result = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert 'mujoco_sim needs MuJoCo' in result.stdout
    assert "pip install 'rtgym_ros[mujoco]'" in result.stdout


# ------------------------------------------------------------------ Gymnasium's resets

@pytest.mark.parametrize('name,env_id', [('inverted_pendulum', 'InvertedPendulum-v5'),
                                         ('reacher', 'Reacher-v5'),
                                         ('half_cheetah', 'HalfCheetah-v5'),
                                         ('pusher', 'Pusher-v5')])
def test_reset_and_steps_are_gymnasiums_bit_for_bit(name, env_id):
    env = gymnasium_env(env_id)
    model = MujocoModel(name)
    rng = np.random.default_rng(7)
    env.reset(seed=7)
    for episode in range(3):
        if episode:
            env.reset()
        model.reset(rng)
        assert np.array_equal(model.data.qpos, env.data.qpos), episode
        assert np.array_equal(model.data.qvel, env.data.qvel), episode
    env.action_space.seed(1)
    for _ in range(25):
        action = env.action_space.sample()
        env.do_simulation(action, env.frame_skip)
        for _ in range(env.frame_skip):
            model.step(action)
            model.sensordata()  # a forward pass between steps changes nothing
    assert np.array_equal(model.data.qpos, env.data.qpos)
    assert np.array_equal(model.data.qvel, env.data.qvel)
    env.close()


def test_the_reacher_target_is_placed_in_the_disc_and_still():
    model = MujocoModel('reacher')
    rng = np.random.default_rng(0)
    for _ in range(50):
        model.reset(rng)
        target = model.position()[2:]
        assert np.linalg.norm(target) < 0.2
        assert np.all(model.velocity()[2:] == 0.0)
        assert np.all(np.abs(model.velocity()[:2]) <= 0.005)


def test_reset_noise_overrides_the_default_reset():
    still = MujocoModel('inverted_pendulum', reset_noise=0.0)
    still.reset(np.random.default_rng(0))
    assert np.all(still.data.qpos == still.model.qpos0) and np.all(still.data.qvel == 0.0)
    noisy = MujocoModel('inverted_pendulum', reset_noise=0.5)
    rng = np.random.default_rng(0)
    states = []
    for _ in range(20):
        noisy.reset(rng)
        states.append(np.concatenate([noisy.data.qpos, noisy.data.qvel]))
    states = np.array(states)
    assert np.all(np.abs(states) <= 0.5) and np.max(np.abs(states)) > 0.3
    default = MujocoModel('inverted_pendulum')
    default.reset(np.random.default_rng(0))
    assert np.max(np.abs(default.data.qpos)) <= 0.01
    with pytest.raises(ValueError, match='reset_noise must be a finite number >= 0'):
        MujocoModel('inverted_pendulum', reset_noise=-0.1)


def test_a_file_resets_to_qpos0_unless_noise_is_asked_for():
    model = MujocoModel(str(FLOATING_ARM))
    model.reset(np.random.default_rng(0))
    assert np.array_equal(model.data.qpos, model.model.qpos0)
    assert not model.data.qvel.any()


# ------------------------------------------------------------------ readings

def test_inverted_pendulum_names_limits_and_effort():
    model = MujocoModel('inverted_pendulum')
    assert model.joint_names == ('slider', 'hinge')
    assert model.actuator_names == ('slide',)
    assert model.timestep == 0.02 and model.timestep_ns == 20_000_000
    assert model.ctrl_low.tolist() == [-3.0] and model.ctrl_high.tolist() == [3.0]
    assert model.clip(np.array([7.0])).tolist() == [3.0]
    assert model.sensor_names == () and model.free_body is None
    model.reset(np.random.default_rng(0))
    model.step(np.array([0.5]))
    assert model.effort().tolist() == [50.0, 0.0]  # ctrl 0.5 times gear 100, on the slider
    assert model.velocity()[0] > 0.0
    assert model.time == pytest.approx(0.02)


def test_floating_base_sensors_and_joints():
    model = MujocoModel(str(FLOATING_ARM))
    assert model.joint_names == ('elbow',)
    assert model.skipped_joints == ('wrist',)
    assert model.free_body == 'base'
    assert model.sensor_names == ('elbow_angle', 'imu_acc', 'base_quat')
    assert model.sensor_dims == (1, 3, 4)
    assert model.camera_names == ('overview',)
    assert model.ctrl_low.tolist() == [-1.0]
    model.reset(np.random.default_rng(0))
    # Spin and push the base, then compare with MuJoCo's own body-frame velocity.
    model.data.qvel[:6] = [0.3, -0.2, 0.5, 1.0, -2.0, 0.7]
    for _ in range(40):
        model.step(np.array([0.4]))
    position, quaternion, linear, angular = model.odometry()
    mj = model.mj
    data = model.sensordata()  # computed for the state now, not the one a step back
    mj.mj_forward(model.model, model.data)  # xpos, xquat of the state now, for comparison
    assert np.array_equal(data, model.data.sensordata)
    body = model.model.body('base').id
    assert np.allclose(position, model.data.xpos[body])
    w, x, y, z = model.data.xquat[body]
    assert np.allclose(quaternion, [x, y, z, w])
    velocity = np.zeros(6)
    mj.mj_objectVelocity(model.model, model.data, mj.mjtObj.mjOBJ_XBODY, body, velocity, 1)
    assert np.allclose(angular, velocity[:3], atol=1e-9)
    assert np.allclose(linear, velocity[3:], atol=1e-9)
    assert np.linalg.norm(linear) > 0.1
    assert data.shape == (8,)
    assert data[0] == pytest.approx(model.position()[0])
    assert np.allclose(data[4:], model.data.xquat[body])


def test_a_model_without_a_free_joint_has_no_odometry():
    with pytest.raises(ValueError, match='no floating base'):
        MujocoModel('inverted_pendulum').odometry()


# ------------------------------------------------------------------ camera

def test_an_unknown_camera_is_refused_with_the_cameras_listed():
    model = MujocoModel(str(FLOATING_ARM))
    with pytest.raises(ValueError, match=r'camera must be a camera of floating_arm '
                                         r"\(overview\), got 'top'"):
        CameraRenderer(model, 'top', width=32, height=24)
    with pytest.raises(ValueError, match=r'\(none: the MJCF has no named camera\)'):
        CameraRenderer(MujocoModel('inverted_pendulum'), 'x', width=32, height=24)


_RENDER = f"""
import sys
from rtgym_ros.sim.mujoco_model import CameraRenderer, MujocoModel
model = MujocoModel({str(FLOATING_ARM)!r})
try:
    renderer = CameraRenderer(model, 'overview', width=64, height=48)
except RuntimeError as error:
    print('ERROR', error)
    sys.exit(0)
image = renderer.render(model.data)
renderer.close()
print('IMAGE', image.shape, image.dtype, float(image.mean()))
"""


def _render_with(backend: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ('DISPLAY', 'WAYLAND_DISPLAY')}
    env['MUJOCO_GL'] = backend
    result = subprocess.run([sys.executable, '-c', _RENDER], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_no_offscreen_backend_is_an_error_naming_mujoco_gl():
    output = _render_with('glfw')  # glfw needs a display, and there is none
    assert output.startswith('ERROR camera images need an OpenGL offscreen backend'), output
    assert "MUJOCO_GL='glfw'" in output and 'MUJOCO_GL=egl' in output


def test_egl_renders_the_camera():
    output = _render_with('egl')
    if output.startswith('ERROR'):
        pytest.skip(f'no EGL here: {output.strip()}')
    assert output.startswith('IMAGE (48, 64, 3) uint8'), output
    assert float(output.split()[-1]) > 10.0  # not a black image: the floor and the base


def test_warnings_go_where_asked_not_to_a_log_file(tmp_path):
    path = tmp_path / 'deprecated.xml'
    path.write_text('<mujoco><compiler settotalmass="2"/><worldbody><body>'
                    '<joint type="hinge"/><geom size=".1"/></body></worldbody></mujoco>')
    warnings: list = []
    try:
        MujocoModel(str(path), on_warning=warnings.append)
    finally:
        mujoco.set_mju_user_warning(None)
    assert any('settotalmass' in message for message in warnings), warnings
    assert not (tmp_path / 'MUJOCO_LOG.TXT').exists()
