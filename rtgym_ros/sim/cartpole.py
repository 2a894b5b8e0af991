"""A force-driven cart-pole on a bounded track, shaped like Gymnasium's CartPole-v1."""

import math
from typing import Optional, Sequence

import numpy as np
from rtgym_ros.core.validate import check_number

from rtgym_ros.sim.pendulum import check_command, check_state, wrap_angle


class CartPole:
    """
    A cart on a track with hard end stops, carrying a freely hinged uniform pole.

    The equations are Barto, Sutton and Anderson's (those of CartPole-v1), with optional viscous
    friction; the pole angle is 0 upright and wrapped to [-pi, pi) because the pole may swing
    all the way round here. The state is ``[x, x_dot, theta, theta_dot]`` as in CartPole-v1.
    At an end stop the cart stops inelastically and the pole takes the matching impulse, so a
    policy that slams into the stop is not rewarded with a free swing.
    """

    joint_names = ('cart_joint', 'pole_joint')
    state_names = ('x', 'x_dot', 'theta', 'theta_dot')

    def __init__(self, *, cart_mass: float = 1.0, pole_mass: float = 0.1,
                 pole_half_length: float = 0.5, gravity: float = 9.81,
                 max_force: float = 10.0, track_limit: float = 2.4,
                 cart_damping: float = 0.0, pole_damping: float = 0.0) -> None:
        """
        Build the cart-pole; every physical constant is validated here.

        :param cart_mass: Cart mass, kg.
        :param pole_mass: Pole mass, kg, spread uniformly along the pole.
        :param pole_half_length: Distance from the hinge to the pole's centre of mass, m.
        :param gravity: Gravitational acceleration, m/s^2 (>= 0).
        :param max_force: Force limit on the cart, N; commands are clipped to +-max_force.
        :param track_limit: The cart stops at x = +-track_limit, m.
        :param cart_damping: Viscous friction of the cart on the track, N s/m (>= 0).
        :param pole_damping: Viscous friction at the hinge, N m s/rad (>= 0).
        """
        for name, value in (('cart_mass', cart_mass), ('pole_mass', pole_mass),
                            ('pole_half_length', pole_half_length), ('max_force', max_force),
                            ('track_limit', track_limit)):
            check_number(value, key=f'CartPole {name}', above=0.0)
        for name, value in (('gravity', gravity), ('cart_damping', cart_damping),
                            ('pole_damping', pole_damping)):
            check_number(value, key=f'CartPole {name}', minimum=0.0)
        self.cart_mass = float(cart_mass)
        self.pole_mass = float(pole_mass)
        self.pole_half_length = float(pole_half_length)
        self.gravity = float(gravity)
        self.max_force = float(max_force)
        self.track_limit = float(track_limit)
        self.cart_damping = float(cart_damping)
        self.pole_damping = float(pole_damping)
        self._total_mass = self.cart_mass + self.pole_mass
        self._ml = self.pole_mass * self.pole_half_length
        self._pole_inertia = 4.0 / 3.0 * self.pole_mass * self.pole_half_length ** 2
        self.command_low = np.array([-self.max_force])
        self.command_high = np.array([self.max_force])
        self._s = [0.0, 0.0, 0.0, 0.0]
        self._force = 0.0

    @property
    def command_size(self) -> int:
        """Return the number of actuated joints (only the cart), i.e. values per command."""
        return 1

    @property
    def state(self) -> np.ndarray:
        """Return a copy of ``[x, x_dot, theta, theta_dot]``."""
        return np.array(self._s)

    def position(self) -> np.ndarray:
        """``[x (m), theta (rad)]``, one per joint name."""
        return np.array([self._s[0], self._s[2]])

    def velocity(self) -> np.ndarray:
        """``[x_dot (m/s), theta_dot (rad/s)]``, one per joint name."""
        return np.array([self._s[1], self._s[3]])

    def effort(self) -> np.ndarray:
        """``[force on the cart during the last step (N), 0 for the unactuated hinge]``."""
        return np.array([self._force, 0.0])

    def energy(self) -> float:
        """Return the total energy, J; conserved without friction, force and end stops."""
        _, xd, th, thd = self._s
        return (0.5 * self._total_mass * xd ** 2 + self._ml * xd * thd * math.cos(th)
                + 0.5 * self._pole_inertia * thd ** 2
                + self._ml * self.gravity * math.cos(th))

    def reset(self, rng: np.random.Generator, *,
              state: Optional[Sequence[float]] = None) -> np.ndarray:
        """
        Start a new episode; the applied force goes to zero.

        :param rng: Draws every state value in [-0.05, 0.05) like CartPole-v1.
        :param state: Use this ``[x, x_dot, theta, theta_dot]`` instead of a random one.
        :return: The new state.
        """
        if state is None:
            values = rng.uniform(-0.05, 0.05, size=4).tolist()
        else:
            values = check_state(state, self.state_names, 'CartPole')
            if abs(values[0]) > self.track_limit:
                raise ValueError(
                    f'CartPole state x must be within the track [-{self.track_limit}, '
                    f'{self.track_limit}], got {values[0]}')
        values[2] = wrap_angle(values[2])
        self._s = values
        self._force = 0.0
        return self.state

    def step(self, dt: float, command: np.ndarray) -> np.ndarray:
        """
        Advance by ``dt`` seconds with one classic RK4 step, the force held constant.

        :param dt: Step length, s (> 0); keep it at or below a few ms for accuracy.
        :param command: One force value for the cart; clipped to the force limit.
        :return: The new state.
        """
        if not dt > 0.0:
            raise ValueError(f'CartPole step dt must be > 0, got {dt!r}')
        self.advance(dt, self.checked_command(command))
        return self.state

    def checked_command(self, command: np.ndarray) -> list:
        """Return ``command`` clipped to the force limit, as :meth:`advance` takes it."""
        return check_command(command, self.command_low, self.command_high, 'CartPole')

    def advance(self, dt: float, command: list) -> None:
        """:meth:`step` without its checks (``command`` from :meth:`checked_command`)."""
        force = command[0]
        self._force = force
        s = self._s
        k1 = self._deriv(s, force)
        k2 = self._deriv([a + 0.5 * dt * b for a, b in zip(s, k1)], force)
        k3 = self._deriv([a + 0.5 * dt * b for a, b in zip(s, k2)], force)
        k4 = self._deriv([a + dt * b for a, b in zip(s, k3)], force)
        x, xd, th, thd = (a + dt / 6.0 * (b1 + 2.0 * b2 + 2.0 * b3 + b4)
                          for a, b1, b2, b3, b4 in zip(s, k1, k2, k3, k4))
        if abs(x) >= self.track_limit and x * xd > 0.0:
            # Inelastic stop: the impulse on the cart leaves the pole's angular momentum about
            # the hinge unchanged, which gives d(theta_dot) = -m l cos(theta) d(x_dot) / I.
            thd -= self._ml * math.cos(th) * (-xd) / self._pole_inertia
            xd = 0.0
        x = min(max(x, -self.track_limit), self.track_limit)
        self._s = [x, xd, wrap_angle(th), thd]

    def _deriv(self, s: list, force: float) -> tuple:
        _, xd, th, thd = s
        sin, cos = math.sin(th), math.cos(th)
        # Lagrange's equations in (x, theta) as a 2x2 linear system, solved by Cramer's rule.
        a11, a12, a22 = self._total_mass, self._ml * cos, self._pole_inertia
        b1 = force - self.cart_damping * xd + self._ml * thd ** 2 * sin
        b2 = self._ml * self.gravity * sin - self.pole_damping * thd
        det = a11 * a22 - a12 * a12
        xdd = (b1 * a22 - a12 * b2) / det
        thdd = (a11 * b2 - a12 * b1) / det
        return xd, xdd, thd, thdd
