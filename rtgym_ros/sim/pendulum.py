"""A torque-limited pendulum for swing-up, shaped like Gymnasium's Pendulum-v1."""

import math
from typing import Optional, Sequence

import numpy as np
from rtgym_ros.core.validate import check_number, check_vector


def wrap_angle(angle: float) -> float:
    """Wrap an angle to [-pi, pi), the convention of Gymnasium's angle_normalize."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


class Pendulum:
    """
    A point mass on a massless rod, driven by a limited torque at the pivot.

    The angle is 0 upright and grows counter-clockwise, so gravity pushes the mass away from 0
    and a torque smaller than ``m g l`` cannot lift it directly: the agent has to swing it up.
    The state is ``[theta, theta_dot]``, as in Gymnasium's Pendulum-v1. The scalar arithmetic
    is deliberate: a step costs a few microseconds, which lets the node run at kHz in Python.
    """

    joint_names = ('pendulum_joint',)
    state_names = ('theta', 'theta_dot')

    def __init__(self, *, mass: float = 1.0, length: float = 1.0, gravity: float = 9.81,
                 damping: float = 0.01, max_torque: float = 2.0) -> None:
        """
        Build the pendulum; every physical constant is validated here.

        :param mass: Point mass at the end of the rod, kg.
        :param length: Rod length, m.
        :param gravity: Gravitational acceleration, m/s^2 (>= 0).
        :param damping: Viscous friction at the pivot, N m s/rad (>= 0).
        :param max_torque: Torque limit, N m; commands are clipped to +-max_torque.
        """
        for name, value in (('mass', mass), ('length', length), ('max_torque', max_torque)):
            check_number(value, key=f'Pendulum {name}', above=0.0)
        for name, value in (('gravity', gravity), ('damping', damping)):
            check_number(value, key=f'Pendulum {name}', minimum=0.0)
        self.mass = float(mass)
        self.length = float(length)
        self.gravity = float(gravity)
        self.damping = float(damping)
        self.max_torque = float(max_torque)
        self._inertia = self.mass * self.length ** 2
        self._g_over_l = self.gravity / self.length
        self.command_low = np.array([-self.max_torque])
        self.command_high = np.array([self.max_torque])
        self._theta = math.pi
        self._omega = 0.0
        self._torque = 0.0

    @property
    def command_size(self) -> int:
        """Return the number of actuated joints, i.e. values per command."""
        return 1

    @property
    def state(self) -> np.ndarray:
        """Return a copy of ``[theta, theta_dot]``."""
        return np.array([self._theta, self._omega])

    def position(self) -> np.ndarray:
        """Joint positions, rad, one per joint name."""
        return np.array([self._theta])

    def velocity(self) -> np.ndarray:
        """Joint velocities, rad/s, one per joint name."""
        return np.array([self._omega])

    def effort(self) -> np.ndarray:
        """Return the torque applied during the last step, N m (after clipping)."""
        return np.array([self._torque])

    def energy(self) -> float:
        """Return kinetic plus potential energy, J; conserved without damping and torque."""
        return (0.5 * self._inertia * self._omega ** 2
                + self.mass * self.gravity * self.length * math.cos(self._theta))

    def reset(self, rng: np.random.Generator, *,
              state: Optional[Sequence[float]] = None) -> np.ndarray:
        """
        Start a new episode; the applied torque goes to zero.

        :param rng: Draws theta in [-pi, pi) and theta_dot in [-1, 1) like Pendulum-v1.
        :param state: Use this ``[theta, theta_dot]`` instead of a random one.
        :return: The new state.
        """
        if state is None:
            theta, omega = rng.uniform([-math.pi, -1.0], [math.pi, 1.0]).tolist()
        else:
            theta, omega = check_state(state, self.state_names, 'Pendulum')
        self._theta = wrap_angle(theta)
        self._omega = omega
        self._torque = 0.0
        return self.state

    def step(self, dt: float, command: np.ndarray) -> np.ndarray:
        """
        Advance by ``dt`` seconds with one classic RK4 step, the torque held constant.

        :param dt: Step length, s (> 0); keep it at or below a few ms for accuracy.
        :param command: One torque value; clipped to the torque limit.
        :return: The new state.
        """
        if not dt > 0.0:
            raise ValueError(f'Pendulum step dt must be > 0, got {dt!r}')
        self.advance(dt, self.checked_command(command))
        return self.state

    def checked_command(self, command: np.ndarray) -> list:
        """Return ``command`` clipped to the torque limit, as :meth:`advance` takes it."""
        return check_command(command, self.command_low, self.command_high, 'Pendulum')

    def advance(self, dt: float, command: list) -> None:
        """
        :meth:`step` without its checks: ``dt`` > 0, ``command`` from :meth:`checked_command`.

        For a simulator's physics loop, which checks a command once when it arrives, not at
        each of the sub-steps it applies to.
        """
        torque = command[0]
        self._torque = torque
        th, om = self._theta, self._omega
        k1t, k1o = om, self._accel(th, om, torque)
        k2t = om + 0.5 * dt * k1o
        k2o = self._accel(th + 0.5 * dt * k1t, k2t, torque)
        k3t = om + 0.5 * dt * k2o
        k3o = self._accel(th + 0.5 * dt * k2t, k3t, torque)
        k4t = om + dt * k3o
        k4o = self._accel(th + dt * k3t, k4t, torque)
        self._theta = wrap_angle(th + dt / 6.0 * (k1t + 2.0 * k2t + 2.0 * k3t + k4t))
        self._omega = om + dt / 6.0 * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)

    def _accel(self, theta: float, omega: float, torque: float) -> float:
        return self._g_over_l * math.sin(theta) + (torque - self.damping * omega) / self._inertia


def check_state(state: Sequence[float], names: Sequence[str], model: str) -> list:
    """Return ``state`` as floats, or say which size was expected and what was found."""
    return check_vector(state, key=f'{model} state {list(names)}', size=len(names),
                        finite=True).tolist()


def check_command(command: np.ndarray, low: np.ndarray, high: np.ndarray,
                  model: str) -> list:
    """Return ``command`` clipped to ``[low, high]`` as floats; reject wrong sizes and NaN."""
    if isinstance(command, np.ndarray) and command.dtype == np.float64 \
            and command.size == low.size:
        # Once per physics step: plain floats beat numpy on a vector this short (5x).
        values = command.ravel().tolist()
        if all(map(math.isfinite, values)):
            return [min(max(v, lo), hi) for v, lo, hi in zip(values, low.tolist(), high.tolist())]
    values = check_vector(command, key=f'{model} command', size=low.size, finite=True)
    return np.clip(values, low, high).tolist()
