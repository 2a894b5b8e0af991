"""
A MuJoCo model for the ``mujoco_sim`` node, without ROS: load, reset as Gymnasium v5, step, read.

``model`` is a path to an MJCF file or the name of one that Gymnasium ships
(``gymnasium/envs/mujoco/assets``: ``inverted_pendulum``, ``reacher``, ``half_cheetah``, ...).
The physics steps at the MJCF's own ``timestep``. A reset draws the initial state as the
Gymnasium v5 env of that name does, in the same order from the same kind of generator, so a
reset with ``np.random.default_rng(seed)`` gives the state of ``env.reset(seed=seed)``; a
file gets ``qpos0`` and zero velocity, or uniform noise of a given scale.

MuJoCo is imported when a model is built, not when this module is: ``pip install
'rtgym_ros[mujoco]'`` adds it.
"""

from dataclasses import dataclass
import importlib.util
import os
from pathlib import Path
import types
from typing import Any, Callable

import numpy as np
from rtgym_ros.core.validate import check_number

INSTALL_HINT = "pip install 'rtgym_ros[mujoco]'"
GL_HINT = ('set MUJOCO_GL=egl (EGL: a GPU, or Mesa without a display) or MUJOCO_GL=osmesa '
           '(software) before the node starts')


def import_mujoco() -> types.ModuleType:
    """
    Import MuJoCo, or say how to install it.

    :raises ImportError: When the ``mujoco`` package is not installed; names the extra.
    """
    try:
        import mujoco
    except ImportError as error:
        raise ImportError(f'mujoco_sim needs MuJoCo, which is not installed ({error}): '
                          f'{INSTALL_HINT}') from error
    return mujoco


def gymnasium_assets() -> Path | None:
    """Return the folder of the MJCF files Gymnasium ships (without importing Gymnasium)."""
    spec = importlib.util.find_spec('gymnasium')
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / 'envs' / 'mujoco' / 'assets'
    return folder if folder.is_dir() else None


def shipped_models() -> tuple[str, ...]:
    """Return the names of the MJCF models Gymnasium ships, sorted (``pusher_v5`` as pusher)."""
    folder = gymnasium_assets()
    if folder is None:
        return ()
    return tuple(sorted({path.stem.removesuffix('_v5') for path in folder.glob('*.xml')}))


def is_file_name(model: str) -> bool:
    """Say whether ``model`` names a file (a path separator, or ``.xml``), not a model name."""
    return os.sep in model or '/' in model or model.endswith('.xml')


def resolve_model(model: str) -> tuple[str, Path]:
    """
    Return ``(name, path)`` of a model given as a file path or as a name Gymnasium ships.

    A value with a path separator or ending in ``.xml`` is a file; anything else a name. A
    shipped name takes the MJCF its v5 env loads (``walker2d_v5.xml`` over ``walker2d.xml``).

    :raises ValueError: When the file does not exist, or the name is not one Gymnasium ships.
    """
    if not isinstance(model, str) or not model:
        raise ValueError(f'model must be a path to an MJCF file or a model name, got {model!r}')
    if is_file_name(model):
        path = Path(model).expanduser()
        if not path.is_file():
            raise ValueError(f'model: no MJCF file at {str(path)!r}'
                             + (' (a directory)' if path.is_dir() else ''))
        return path.stem, path
    names = shipped_models()
    if model not in names:
        where = (f'one of the models Gymnasium ships: {", ".join(names)}' if names else
                 'a model Gymnasium ships, but gymnasium/envs/mujoco/assets was not found')
        raise ValueError(f'model must be a path to an MJCF file (.xml) or {where}; '
                         f'got {model!r}')
    folder = gymnasium_assets()
    v5 = folder / f'{model}_v5.xml'
    return model, v5 if v5.is_file() else folder / f'{model}.xml'


@dataclass(frozen=True)
class ResetRule:
    """
    How a reset draws the initial state: noise around ``qpos0`` and zero velocity.

    ``qpos`` gets uniform noise in ``[-qpos_scale, qpos_scale]``; ``qvel`` uniform noise in
    ``[-qvel_scale, qvel_scale]``, or Gaussian of that std when ``qvel_normal``. ``task`` names a
    Gymnasium env whose reset also places a goal (``reacher``, ``pusher``).
    """

    qpos_scale: float = 0.0
    qvel_scale: float = 0.0
    qvel_normal: bool = False
    task: str = ''


def _uniform(scale: float) -> ResetRule:
    return ResetRule(scale, scale)


def _uniform_normal(scale: float) -> ResetRule:
    return ResetRule(scale, scale, qvel_normal=True)


# The reset of each Gymnasium v5 MuJoCo env, with its default reset_noise_scale.
GYMNASIUM_RESETS: dict[str, ResetRule] = {
    'ant': _uniform_normal(0.1),
    'half_cheetah': _uniform_normal(0.1),
    'hopper': _uniform(5e-3),
    'humanoid': _uniform(1e-2),
    'humanoidstandup': _uniform(1e-2),
    'inverted_double_pendulum': _uniform_normal(0.1),
    'inverted_pendulum': _uniform(0.01),
    'pusher': ResetRule(0.0, 0.005, task='pusher'),
    'reacher': ResetRule(0.1, 0.005, task='reacher'),
    'swimmer': _uniform(0.1),
    'walker2d': _uniform(5e-3),
}


def reset_rule(name: str, *, shipped: bool, reset_noise: float | None) -> ResetRule:
    """
    Return the reset of a model: Gymnasium's for a shipped name, else none, unless overridden.

    :param reset_noise: ``None``: the default; a scale >= 0: uniform noise of that scale on
        qpos and qvel, whatever the model.
    """
    if reset_noise is not None:
        scale = check_number(reset_noise, key='reset_noise', minimum=0.0)
        return _uniform(scale)
    if shipped and name in GYMNASIUM_RESETS:
        return GYMNASIUM_RESETS[name]
    return ResetRule()


class MujocoModel:
    """
    One MuJoCo model and its data, with the names the node publishes under.

    Joints in ``joint_names`` are the named hinge and slide joints (one value each, in model
    order); a free joint is the floating base (:meth:`odometry`); ball joints are left out.
    Commands are ``ctrl``: one value per actuator, in actuator order.
    """

    def __init__(self, model: str, *, reset_noise: float | None = None,
                 on_warning: Callable[[str], None] | None = None) -> None:
        """
        Load the MJCF and index its joints, actuators, sensors, cameras and floating base.

        :param model: A path to an MJCF file, or a name from :func:`shipped_models`.
        :param reset_noise: See :func:`reset_rule`.
        :param on_warning: Where MuJoCo's warnings go (compiler, unstable simulation), instead
            of stderr and a ``MUJOCO_LOG.TXT`` in the working directory. MuJoCo has one such
            hook per process: this sets it for the whole process.
        :raises ValueError: Unknown name, missing file or an MJCF MuJoCo cannot load.
        :raises ImportError: MuJoCo is not installed.
        """
        name, path = resolve_model(model)
        self.shipped = not is_file_name(model)
        self.reset_rule = reset_rule(name, shipped=self.shipped, reset_noise=reset_noise)
        mj = self.mj = import_mujoco()
        if on_warning is not None:
            mj.set_mju_user_warning(on_warning)
        try:
            self.model = mj.MjModel.from_xml_path(str(path))
        except Exception as error:  # noqa: B902 - MuJoCo raises ValueError, but say it all
            message = ' '.join(str(error).split())
            raise ValueError(f'model: MuJoCo cannot load {str(path)!r}: {message}') from None
        self.data = mj.MjData(self.model)
        self.name = name
        self.path = path
        m = self.model
        self.timestep = float(m.opt.timestep)
        if not self.timestep > 0.0:
            raise ValueError(f'model: {path.name} has timestep {self.timestep}, must be > 0')
        self.timestep_ns = int(round(self.timestep * 1e9))

        hinge_slide = (int(mj.mjtJoint.mjJNT_HINGE), int(mj.mjtJoint.mjJNT_SLIDE))
        free_type = int(mj.mjtJoint.mjJNT_FREE)
        joints = [j for j in range(m.njnt)
                  if int(m.jnt_type[j]) in hinge_slide and m.joint(j).name]
        self.joint_names = tuple(m.joint(j).name for j in joints)
        self._qpos_index = np.array([m.jnt_qposadr[j] for j in joints], dtype=np.intp)
        self._dof_index = np.array([m.jnt_dofadr[j] for j in joints], dtype=np.intp)
        self.skipped_joints = tuple(
            m.joint(j).name or f'#{j}' for j in range(m.njnt)
            if j not in joints and int(m.jnt_type[j]) != free_type)

        self.nu = int(m.nu)
        self.actuator_names = tuple(m.actuator(i).name or f'actuator{i}' for i in range(m.nu))
        limited = np.array([bool(m.actuator_ctrllimited[i]) for i in range(m.nu)], dtype=bool)
        ranges = np.array(m.actuator_ctrlrange, dtype=np.float64).reshape(m.nu, 2)
        self.ctrl_low = np.where(limited, ranges[:, 0], -np.inf)
        self.ctrl_high = np.where(limited, ranges[:, 1], np.inf)

        self.sensor_names = tuple(m.sensor(i).name or f'sensor{i}' for i in range(m.nsensor))
        self.sensor_dims = tuple(int(m.sensor_dim[i]) for i in range(m.nsensor))
        self.camera_names = tuple(m.cam(i).name for i in range(m.ncam) if m.cam(i).name)

        free = [j for j in range(m.njnt) if int(m.jnt_type[j]) == free_type]
        self.free_body: str | None = None
        if free:
            j = free[0]
            body = int(m.jnt_bodyid[j])
            self.free_body = m.body(body).name or f'body{body}'
            self._free_qpos = int(m.jnt_qposadr[j])
            self._free_dof = int(m.jnt_dofadr[j])
        self._rotation = np.zeros(9)
        mj.mj_forward(self.model, self.data)
        self._derived_current = True

    # ------------------------------------------------------------------ state

    @property
    def time(self) -> float:
        """Return MuJoCo's simulation time, seconds."""
        return float(self.data.time)

    def reset(self, rng: np.random.Generator) -> None:
        """
        Reset the data and draw the initial state (Gymnasium v5's ``reset_model``).

        :param rng: The generator to draw from; ``np.random.default_rng(seed)`` is what
            Gymnasium's ``reset(seed=seed)`` seeds.
        """
        mj, m, d = self.mj, self.model, self.data
        rule = self.reset_rule
        mj.mj_resetData(m, d)
        qpos = d.qpos.copy()
        qvel = d.qvel.copy()
        if rule.task == 'pusher':
            qvel = self._pusher_reset(rng, qpos, qvel)
        else:
            if rule.qpos_scale > 0.0 or rule.task:
                qpos = qpos + rng.uniform(low=-rule.qpos_scale, high=rule.qpos_scale, size=m.nq)
            if rule.task == 'reacher':
                while True:
                    goal = rng.uniform(low=-0.2, high=0.2, size=2)
                    if np.linalg.norm(goal) < 0.2:
                        break
                qpos[-2:] = goal
            if rule.qvel_normal:
                qvel = qvel + rng.standard_normal(m.nv) * rule.qvel_scale
            elif rule.qvel_scale > 0.0:
                qvel = qvel + rng.uniform(low=-rule.qvel_scale, high=rule.qvel_scale, size=m.nv)
            if rule.task == 'reacher':
                qvel[-2:] = 0.0
        d.qpos[:] = qpos
        d.qvel[:] = qvel
        mj.mj_forward(m, d)
        self._derived_current = True

    def _pusher_reset(self, rng: np.random.Generator, qpos: np.ndarray,
                      qvel: np.ndarray) -> np.ndarray:
        """Place the cylinder away from the goal at the origin (Pusher-v5); return qvel."""
        goal = np.zeros(2)
        while True:
            cylinder = np.concatenate([rng.uniform(low=-0.3, high=0.0, size=1),
                                       rng.uniform(low=-0.2, high=0.2, size=1)])
            if np.linalg.norm(cylinder - goal) > 0.17:
                break
        qpos[-4:-2] = cylinder
        qpos[-2:] = goal
        qvel = qvel + rng.uniform(low=-0.005, high=0.005, size=self.model.nv)
        qvel[-4:] = 0.0
        return qvel

    def step(self, ctrl: np.ndarray) -> None:
        """Apply ``ctrl`` (one value per actuator) and advance one physics step."""
        self.data.ctrl[:] = ctrl
        self.mj.mj_step(self.model, self.data)
        self._derived_current = False

    def refresh(self) -> None:
        """
        Compute the sensors and forces of the current state (once per step, when asked).

        ``mj_step`` computes them before it integrates, so after it they describe the state
        one step back (RK4: nearly the current one). ``mj_forward`` on the current state does
        not change the trajectory: the solver's warm start is saved by the integrator only.
        """
        if not self._derived_current:
            self.mj.mj_forward(self.model, self.data)
            self._derived_current = True

    def clip(self, ctrl: np.ndarray) -> np.ndarray:
        """Return ``ctrl`` clipped to the actuators' ``ctrlrange`` (where limited)."""
        return np.clip(ctrl, self.ctrl_low, self.ctrl_high)

    # ------------------------------------------------------------------ readings

    def position(self) -> np.ndarray:
        """Return the positions of ``joint_names`` (rad or m)."""
        return self.data.qpos[self._qpos_index]

    def velocity(self) -> np.ndarray:
        """Return the velocities of ``joint_names`` (rad/s or m/s)."""
        return self.data.qvel[self._dof_index]

    def effort(self) -> np.ndarray:
        """Return the actuator force on each of ``joint_names`` (N m or N; ctrl times gear)."""
        self.refresh()
        return self.data.qfrc_actuator[self._dof_index]

    def sensordata(self) -> np.ndarray:
        """Return every sensor's values now, in MJCF order (``sensor_names``, ``sensor_dims``)."""
        self.refresh()
        return self.data.sensordata.copy()

    def odometry(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """
        Return the floating base's pose and twist as nav_msgs/Odometry has them.

        :return: ``(position, quaternion xyzw, linear velocity, angular velocity)``: the pose in
            the world frame, the twist in the body frame (MuJoCo's free-joint ``qvel`` has the
            linear part in the world frame, the angular part in the body frame).
        """
        if self.free_body is None:
            raise ValueError(f'{self.name} has no free joint: no floating base')
        qpos = self.data.qpos[self._free_qpos:self._free_qpos + 7]
        qvel = self.data.qvel[self._free_dof:self._free_dof + 6]
        w, x, y, z = qpos[3:7]
        self.mj.mju_quat2Mat(self._rotation, qpos[3:7])
        linear = self._rotation.reshape(3, 3).T @ qvel[:3]
        return qpos[:3].copy(), np.array([x, y, z, w]), linear, qvel[3:6].copy()

    def snapshot(self) -> Any:
        """Return a copy of the data, positions computed (for rendering on another thread)."""
        self.refresh()
        data = self.mj.MjData(self.model)
        self.mj.mj_copyData(data, self.model, self.data)
        return data


class CameraRenderer:
    """Render one MJCF camera to RGB images with ``mujoco.Renderer`` (one thread only)."""

    def __init__(self, model: MujocoModel, camera: str, *, width: int, height: int) -> None:
        """
        Make the OpenGL context on the calling thread, which is then the only one to render.

        :raises ValueError: No such camera, or a size that is not positive.
        :raises RuntimeError: No OpenGL offscreen backend; the message names ``MUJOCO_GL``.
        """
        if camera not in model.camera_names:
            listed = ', '.join(model.camera_names) or 'none: the MJCF has no named camera'
            raise ValueError(f'camera must be a camera of {model.name} ({listed}), '
                             f'got {camera!r}')
        if width <= 0 or height <= 0:
            raise ValueError(f'image size must be > 0, got {width}x{height}')
        mj = model.mj
        visual = model.model.vis.global_
        # As Gymnasium does: only grow the offscreen buffer, never shrink it below the MJCF's.
        visual.offwidth = max(visual.offwidth, width)
        visual.offheight = max(visual.offheight, height)
        self.camera = camera
        self.width = width
        self.height = height
        try:
            self._renderer = mj.Renderer(model.model, height, width)
        except Exception as error:  # noqa: B902 - any backend failure means the same to users
            backend = os.environ.get('MUJOCO_GL', '')
            message = ' '.join(str(error).split())
            raise RuntimeError(
                f'camera images need an OpenGL offscreen backend, and none works here with '
                f'MUJOCO_GL={backend!r}: {message}. {GL_HINT}.') from None

    def render(self, data: Any) -> np.ndarray:
        """Return the camera's view of ``data``: uint8, ``(height, width, 3)``, RGB."""
        self._renderer.update_scene(data, camera=self.camera)
        return self._renderer.render()

    def close(self) -> None:
        """Free the OpenGL context; harmless to call twice."""
        renderer, self._renderer = getattr(self, '_renderer', None), None
        if renderer is not None:
            renderer.close()
