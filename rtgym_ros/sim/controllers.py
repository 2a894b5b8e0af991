"""
Built-in policies for the shipped simulated robots: baselines, demos and end-to-end checks.

Every controller is called as ``action = controller(obs)`` with the env's Dict observation
and returns a float32 action inside the actuator limits; ``reset()`` starts a new episode.
The env is real-time with rtgym's elastic time-step: the observation returned by ``step(a_k)``
was captured while ``a_(k-1)`` was applied, and ``a_k`` is already running while the agent
computes the next action, which is applied one time-step later. The controllers therefore
predict the state one time-step ahead with the sim's own physics, through the action that is
being applied (``obs['action_buffer'][-1]`` when the env puts the buffer in the observation,
the controller's own previous output otherwise), and act on the prediction.

Observation layouts (``joints`` is a JointState with ``fields: [position, velocity]``):

* pendulum, ``joint_names: [pendulum_joint]``: ``obs['joints'] = [theta, theta_dot]``;
* cart-pole, ``joint_names: [cart_joint, pole_joint]``:
  ``obs['joints'] = [x, theta, x_dot, theta_dot]``.

:func:`inverted_pendulum_lqr` is a plain function for ``mujoco_sim``'s inverted pendulum (the
agent's ``policy: rtgym_ros.sim.controllers:inverted_pendulum_lqr``).
"""

from collections import deque
import math
from typing import Any, Callable, Sequence

import numpy as np

from rtgym_ros.core.config import ACTION_BUFFER_KEY
from rtgym_ros.core.validate import check_number, check_vector
from rtgym_ros.sim.cartpole import CartPole
from rtgym_ros.sim.lqr import discrete_lqr, discretize
from rtgym_ros.sim.pendulum import Pendulum, wrap_angle


class _Predictive:
    """The one-step-ahead machinery the controllers share: delay bookkeeping and prediction."""

    def __init__(self, model: Any, *, time_step: float, action_delay: int, observation: str,
                 substep: float = 0.005) -> None:
        self.time_step = check_number(time_step, key='time_step', above=0.0)
        if isinstance(action_delay, bool) or not isinstance(action_delay, int) \
                or action_delay < 0:
            raise ValueError(f'action_delay must be an integer >= 0, got {action_delay!r}')
        self.action_delay = action_delay
        self.observation = observation
        self._model = model
        self._substeps = max(1, int(math.ceil(self.time_step / substep)))
        self._rng = np.random.default_rng(0)  # reset(state=...) draws nothing
        self._sent: deque = deque([0.0] * action_delay, maxlen=max(action_delay, 1))

    def reset(self) -> None:
        """Forget the actions sent: the env refills its buffer with the default action."""
        self._sent = deque([0.0] * self.action_delay, maxlen=max(self.action_delay, 1))

    def _joints(self, obs: dict[str, np.ndarray], size: int) -> np.ndarray:
        if self.observation not in obs:
            raise ValueError(f"observation must have the key '{self.observation}', "
                             f'got {sorted(obs)}')
        values = np.asarray(obs[self.observation], dtype=np.float64).reshape(-1)
        if values.shape != (size,):
            raise ValueError(f"obs['{self.observation}'] must have {size} values, "
                             f'got {values.size}')
        if not np.all(np.isfinite(values)):
            raise ValueError(f"obs['{self.observation}'] must be finite, got {values.tolist()}")
        return values

    def _pending(self, obs: dict[str, np.ndarray]) -> list[float]:
        """Return the actions applied from the capture to the new action, oldest first."""
        if self.action_delay == 0:
            return []
        buffer = obs.get(ACTION_BUFFER_KEY)
        if buffer is not None:
            rows = np.asarray(buffer, dtype=np.float64)
            rows = rows.reshape(len(rows), -1)  # (act_buf_len, action_dim)
            if rows.shape[0] >= self.action_delay:
                return rows[-self.action_delay:, 0].tolist()
        return list(self._sent)

    def _predict(self, state: Sequence[float], pending: list[float]) -> np.ndarray:
        if not pending:
            return np.asarray(state, dtype=np.float64)
        self._model.reset(self._rng, state=state)
        step = self.time_step / self._substeps
        for action in pending:
            command = np.array([action])
            for _ in range(self._substeps):
                self._model.step(step, command)
        return self._model.state

    def _emit(self, value: float, limit: float) -> np.ndarray:
        value = min(max(value, -limit), limit) if math.isfinite(value) else 0.0
        if self.action_delay:
            self._sent.append(value)
        return np.array([value], dtype=np.float32)


class PendulumSwingUp(_Predictive):
    """
    Energy-pumping swing-up of the torque-limited pendulum, caught and held by an LQR.

    With the torque at the pivot, ``dE/dt = u theta_dot`` (minus friction), so the pump is
    ``u = max_effort * sat(energy_gain * (E_up - E)) * sign(theta_dot)``: full torque along the
    motion while energy is missing, proportional near the target, braking above it. (The
    ``cos(theta)`` factor of Astrom and Furuta's law belongs to a pendulum driven by its cart.)
    Near upright a discrete LQR on the zero-order-hold model at ``time_step`` takes over; its
    weights default to those of :func:`rtgym_ros.sim.tasks.pendulum_reward`, so it is locally the
    optimal policy for that reward. Entering and leaving the LQR use different angles
    (hysteresis), so the switch cannot chatter.
    """

    def __init__(self, *, max_effort: float = 2.0, time_step: float = 0.02, mass: float = 1.0,
                 length: float = 1.0, gravity: float = 9.81, damping: float = 0.01,
                 energy_gain: float = 1.0, energy_margin: float = 0.5,
                 direction_deadband: float = 0.01, q: Sequence[float] = (1.0, 0.1),
                 r: float = 0.001, catch_angle: float = 0.5, catch_energy: float = 2.0,
                 release_angle: float = 1.0, action_delay: int = 1,
                 observation: str = 'joints') -> None:
        """
        Build the controller and its LQR gain; physical constants must match the robot.

        :param max_effort: Torque limit, N m; the pump saturates at it.
        :param time_step: Control time-step, s (the env's ``time_step_duration``).
        :param mass: Pendulum mass, kg.
        :param length: Rod length, m.
        :param gravity: Gravitational acceleration, m/s^2.
        :param damping: Pivot friction, N m s/rad (for the prediction and the LQR model).
        :param energy_gain: 1/J; the pump is proportional within ``1/energy_gain`` J of target.
        :param energy_margin: J above upright's the pump aims at, so the pendulum arrives
            moving instead of creeping up the separatrix.
        :param direction_deadband: rad/s; slower than this the pump keeps its last direction,
            so a pendulum at rest at the bottom gets a kick instead of sign noise.
        :param q: LQR state weights for ``[theta, theta_dot]``.
        :param r: LQR torque weight.
        :param catch_angle: The LQR takes over within this angle of upright, rad ...
        :param catch_energy: ... and this many J of the upright energy.
        :param release_angle: The LQR hands back to the pump beyond this angle, rad.
        :param action_delay: Time-steps between capture and application of an action; 0
            turns the prediction off.
        :param observation: Key of the JointState ``[theta, theta_dot]`` observation.
        """
        model = Pendulum(mass=mass, length=length, gravity=gravity, damping=damping,
                         max_torque=max_effort)
        super().__init__(model, time_step=time_step, action_delay=action_delay,
                         observation=observation)
        self.max_effort = model.max_torque
        self.energy_gain = check_number(energy_gain, key='energy_gain', above=0.0)
        self.energy_margin = check_number(energy_margin, key='energy_margin', minimum=0.0)
        self.direction_deadband = check_number(direction_deadband, key='direction_deadband',
                                               minimum=0.0)
        self.catch_angle = check_number(catch_angle, key='catch_angle', above=0.0)
        self.catch_energy = check_number(catch_energy, key='catch_energy', above=0.0)
        self.release_angle = check_number(release_angle, key='release_angle', above=0.0)
        if self.release_angle <= self.catch_angle:
            raise ValueError(f'release_angle must be > catch_angle ({self.catch_angle}) for '
                             f'hysteresis, got {self.release_angle}')
        self._inertia = model.mass * model.length ** 2
        self._mgl = model.mass * model.gravity * model.length
        a = np.array([[0.0, 1.0], [model.gravity / model.length, -model.damping / self._inertia]])
        b = np.array([[0.0], [1.0 / self._inertia]])
        ad, bd = discretize(a, b, self.time_step)
        weights = check_vector(q, key='q', size=2, finite=True, minimum=0.0)
        self.gain, _ = discrete_lqr(ad, bd, np.diag(weights),
                                    np.array([[check_number(r, key='r', above=0.0)]]))
        self.balancing = False
        self._direction = 1.0

    def reset(self) -> None:
        """Start in swing-up mode with no action pending."""
        super().reset()
        self.balancing = False
        self._direction = 1.0

    def energy(self, theta: float, theta_dot: float) -> float:
        """Kinetic plus potential energy, J; ``m g l`` upright at rest."""
        return 0.5 * self._inertia * theta_dot ** 2 + self._mgl * math.cos(theta)

    def pump(self, theta: float, theta_dot: float) -> float:
        """Return the energy law's torque alone, which drives the energy toward upright's."""
        missing = self._mgl + self.energy_margin - self.energy(theta, theta_dot)
        scale = min(max(self.energy_gain * missing, -1.0), 1.0)
        if abs(theta_dot) > self.direction_deadband:
            self._direction = 1.0 if theta_dot > 0.0 else -1.0
        return self.max_effort * scale * self._direction

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Return the torque for the next time-step, float32 of shape (1,)."""
        theta, theta_dot = self._predict(self._joints(obs, 2), self._pending(obs))
        theta = wrap_angle(theta)
        if self.balancing:
            self.balancing = abs(theta) < self.release_angle
        else:
            self.balancing = (abs(theta) < self.catch_angle and abs(
                self.energy(theta, theta_dot) - self._mgl) < self.catch_energy)
        if self.balancing:
            torque = -float(self.gain[0, 0] * theta + self.gain[0, 1] * theta_dot)
        else:
            torque = self.pump(theta, theta_dot)
        return self._emit(torque, self.max_effort)


class CartPoleLQR(_Predictive):
    """
    Balances the cart-pole upright near the centre of the track with a discrete LQR.

    The model is the sim's, linearised at upright and discretised with a zero-order hold at
    ``time_step``; the state the gain sees is ``[x, x_dot, theta, theta_dot]`` predicted one
    time-step ahead. The obs is JointState ``[x, theta, x_dot, theta_dot]``.
    """

    def __init__(self, *, max_effort: float = 10.0, time_step: float = 0.02,
                 cart_mass: float = 1.0, pole_mass: float = 0.1,
                 pole_half_length: float = 0.5, gravity: float = 9.81,
                 cart_damping: float = 0.0, pole_damping: float = 0.0,
                 q: Sequence[float] = (1.0, 1.0, 10.0, 1.0), r: float = 0.1,
                 action_delay: int = 1, observation: str = 'joints') -> None:
        """
        Build the controller and its LQR gain; physical constants must match the robot.

        :param max_effort: Force limit on the cart, N.
        :param time_step: Control time-step, s (the env's ``time_step_duration``).
        :param cart_mass: Cart mass, kg.
        :param pole_mass: Pole mass, kg.
        :param pole_half_length: Hinge to the pole's centre of mass, m.
        :param gravity: Gravitational acceleration, m/s^2.
        :param cart_damping: Cart friction, N s/m.
        :param pole_damping: Hinge friction, N m s/rad.
        :param q: LQR state weights for ``[x, x_dot, theta, theta_dot]``.
        :param r: LQR force weight.
        :param action_delay: Time-steps between capture and application of an action; 0
            turns the prediction off.
        :param observation: Key of the JointState ``[x, theta, x_dot, theta_dot]`` observation.
        """
        model = CartPole(cart_mass=cart_mass, pole_mass=pole_mass,
                         pole_half_length=pole_half_length, gravity=gravity,
                         max_force=max_effort, cart_damping=cart_damping,
                         pole_damping=pole_damping)
        super().__init__(model, time_step=time_step, action_delay=action_delay,
                         observation=observation)
        self.max_effort = model.max_force
        self._track_limit = model.track_limit
        # Lagrange's equations at theta = 0: [[M, ml], [ml, I]] [x'', theta''] = rhs.
        mass = model.cart_mass + model.pole_mass
        ml = model.pole_mass * model.pole_half_length
        inertia = 4.0 / 3.0 * model.pole_mass * model.pole_half_length ** 2
        inverse = np.linalg.inv(np.array([[mass, ml], [ml, inertia]]))
        # rhs = [F - c x', ml g theta - d theta'] = S [x, x', theta, theta'] + [F, 0]
        rhs = np.array([[0.0, -model.cart_damping, 0.0, 0.0],
                        [0.0, 0.0, ml * model.gravity, -model.pole_damping]])
        accelerations = inverse @ rhs
        a = np.array([[0.0, 1.0, 0.0, 0.0], accelerations[0],
                      [0.0, 0.0, 0.0, 1.0], accelerations[1]])
        b = np.array([[0.0], [inverse[0, 0]], [0.0], [inverse[1, 0]]])
        ad, bd = discretize(a, b, self.time_step)
        weights = check_vector(q, key='q', size=4, finite=True, minimum=0.0)
        self.gain, _ = discrete_lqr(ad, bd, np.diag(weights),
                                    np.array([[check_number(r, key='r', above=0.0)]]))

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Return the force for the next time-step, float32 of shape (1,)."""
        x, theta, x_dot, theta_dot = self._joints(obs, 4)
        # float32 observations and sensor noise may put the cart a hair beyond its end stop.
        x = min(max(x, -self._track_limit), self._track_limit)
        state = self._predict([x, x_dot, wrap_angle(theta), theta_dot], self._pending(obs))
        state[2] = wrap_angle(state[2])
        return self._emit(-float(self.gain[0] @ state), self.max_effort)


# Discrete LQR gain for Gymnasium's inverted_pendulum.xml in mujoco_sim at a 0.04 s time-step
# (two physics steps, as InvertedPendulum-v5), on the state [x, theta, x_dot, theta_dot,
# action being applied]: the one-step action delay of rtgym's elastic time-step is part of the
# model. Linearised at rest by finite differences of mj_step; Q = diag(1, 1, 0.1, 0.1, 0),
# R = 1 (test_mujoco_model.py recomputes it).
INVERTED_PENDULUM_GAIN = np.array([-0.74128026, -7.23654681, -0.90289891, -1.19454672,
                                   0.56969982])
INVERTED_PENDULUM_MAX_CTRL = 3.0


def inverted_pendulum_lqr(obs: dict[str, np.ndarray]) -> np.ndarray:
    """
    Balance the MuJoCo inverted pendulum: an agent policy, ``f(obs) -> action``.

    For ``config/robots/mujoco_inverted_pendulum.yaml``: ``obs['joints']`` is ``[x, theta,
    x_dot, theta_dot]`` and ``obs['action_buffer'][-1]`` the action being applied (0 when the
    buffer is not in the observation). Returns the cart's ctrl, float32 of shape (1,).
    """
    joints = np.asarray(obs['joints'], dtype=np.float64).reshape(-1)
    if joints.shape != (4,):
        raise ValueError(f"obs['joints'] must have 4 values, got {joints.size}")
    buffer = obs.get(ACTION_BUFFER_KEY)
    pending = float(np.asarray(buffer, dtype=np.float64).reshape(-1)[-1]) \
        if buffer is not None else 0.0
    value = -float(INVERTED_PENDULUM_GAIN @ np.append(joints, pending))
    value = min(max(value, -INVERTED_PENDULUM_MAX_CTRL), INVERTED_PENDULUM_MAX_CTRL) \
        if math.isfinite(value) else 0.0
    return np.array([value], dtype=np.float32)


CONTROLLERS: dict[str, Callable[..., Any]] = {
    'pendulum_swingup': PendulumSwingUp,
    'cartpole_lqr': CartPoleLQR,
}


def make_controller(name: str, **options: Any) -> PendulumSwingUp | CartPoleLQR:
    """
    Build a controller by name, e.g. from a command line or a config file.

    :param name: One of :data:`CONTROLLERS`.
    :param options: The controller's keyword options.
    """
    if name not in CONTROLLERS:
        raise ValueError(f'controller must be one of {sorted(CONTROLLERS)}, got {name!r}')
    return CONTROLLERS[name](**options)
