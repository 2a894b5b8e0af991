"""The embedded robots' physics, without ROS: conservation laws, limits, determinism."""

import math

import numpy as np
import pytest

from rtgym_ros.sim import CartPole, make_model, MODELS, Pendulum
from rtgym_ros.sim.pendulum import wrap_angle

DT = 1e-3


def run(model, seconds: float, command: float = 0.0) -> None:
    for _ in range(int(round(seconds / DT))):
        model.step(DT, np.array([command]))


@pytest.mark.parametrize('start', [[0.3, 0.0], [2.5, -1.0], [-math.pi + 0.1, 4.0]])
def test_pendulum_energy_conserved_without_damping_or_torque(start):
    pendulum = Pendulum(damping=0.0)
    pendulum.reset(np.random.default_rng(0), state=start)
    energy = pendulum.energy()
    run(pendulum, 1.0)
    assert pendulum.energy() == pytest.approx(energy, abs=1e-6 * (1.0 + abs(energy)))
    assert not np.allclose(pendulum.state, start)  # it did move


def test_pendulum_damping_loses_energy():
    pendulum = Pendulum(damping=0.5)
    pendulum.reset(np.random.default_rng(0), state=[2.0, 0.0])
    energy = pendulum.energy()
    run(pendulum, 1.0)
    assert pendulum.energy() < energy - 0.1


def test_pendulum_small_angle_period_matches_analytic():
    pendulum = Pendulum(damping=0.0, length=0.5)
    pendulum.reset(np.random.default_rng(0), state=[math.pi - 0.02, 0.0])  # hanging, 0.02 rad
    crossings = []
    previous = pendulum.velocity()[0]
    for i in range(4000):
        pendulum.step(DT, np.zeros(1))
        velocity = pendulum.velocity()[0]
        if previous * velocity < 0.0:  # turning points are half a period apart
            crossings.append(i * DT)
        previous = velocity
    period = 2.0 * float(np.mean(np.diff(crossings)))
    assert len(crossings) >= 4
    assert period == pytest.approx(2.0 * math.pi * math.sqrt(0.5 / 9.81), rel=0.02)


def test_pendulum_torque_is_clipped_and_reported():
    pendulum = Pendulum(max_torque=2.0, damping=0.0)
    pendulum.reset(np.random.default_rng(0), state=[math.pi, 0.0])  # hanging at rest
    pendulum.step(DT, np.array([50.0]))
    assert pendulum.effort().tolist() == [2.0]
    np.testing.assert_array_equal(pendulum.command_high, [2.0])
    run(pendulum, 0.1, command=-50.0)
    assert pendulum.effort().tolist() == [-2.0]
    assert pendulum.velocity()[0] < 0.0  # a negative torque turns it the negative way


def test_pendulum_cannot_lift_straight_up_with_limited_torque():
    pendulum = Pendulum(max_torque=2.0)
    pendulum.reset(np.random.default_rng(0), state=[math.pi, 0.0])
    highest = 0.0
    for _ in range(3000):
        pendulum.step(DT, np.array([2.0]))
        highest = max(highest, abs(wrap_angle(pendulum.position()[0] - math.pi)))
    # Static balance is at asin(2 / 9.81) ~ 0.2 rad; overshoot stays well below upright.
    assert 0.2 < highest < math.pi / 2


def test_pendulum_angle_wraps_to_minus_pi_pi():
    pendulum = Pendulum(damping=0.0)
    pendulum.reset(np.random.default_rng(0), state=[0.0, 9.0])  # enough to spin over the top
    for _ in range(5000):
        pendulum.step(DT, np.zeros(1))
        assert -math.pi <= pendulum.position()[0] < math.pi
    assert wrap_angle(math.pi) == -math.pi
    assert wrap_angle(-math.pi) == -math.pi


@pytest.mark.parametrize('name', sorted(MODELS))
def test_reset_is_deterministic_for_a_seed(name):
    a, b = make_model(name), make_model(name)
    rng_a, rng_b = np.random.default_rng(42), np.random.default_rng(42)
    for _ in range(3):
        np.testing.assert_array_equal(a.reset(rng_a), b.reset(rng_b))
    assert not np.array_equal(a.reset(rng_a), make_model(name).reset(np.random.default_rng(7)))


@pytest.mark.parametrize('name', sorted(MODELS))
def test_reset_zeroes_the_effort_and_uses_the_given_state(name):
    model = make_model(name)
    rng = np.random.default_rng(0)
    model.reset(rng)
    model.step(DT, np.ones(model.command_size))
    assert np.any(model.effort() != 0.0)
    state = np.linspace(0.1, 0.4, len(model.state_names))
    np.testing.assert_allclose(model.reset(rng, state=state), state)
    assert np.all(model.effort() == 0.0)
    assert len(model.position()) == len(model.velocity()) == len(model.joint_names)


@pytest.mark.parametrize('name', sorted(MODELS))
def test_bad_commands_and_states_say_what_was_expected(name):
    model = make_model(name)
    model.reset(np.random.default_rng(0))
    with pytest.raises(ValueError, match='must have 1 value'):
        model.step(DT, np.zeros(2))
    with pytest.raises(ValueError, match='finite'):
        model.step(DT, np.array([math.nan]))
    with pytest.raises(ValueError, match=f'must have {len(model.state_names)} values'):
        model.reset(np.random.default_rng(0), state=[0.0] * 7)


def test_bad_constants_are_rejected():
    with pytest.raises(ValueError, match='max_torque must be a finite number > 0, got -1'):
        Pendulum(max_torque=-1.0)
    with pytest.raises(ValueError, match='track_limit'):
        CartPole(track_limit=0.0)
    with pytest.raises(ValueError, match='model must be one of'):
        make_model('quadruped')


def test_cartpole_energy_conserved_without_friction_or_force():
    cartpole = CartPole()
    cartpole.reset(np.random.default_rng(0), state=[0.0, 0.2, 2.0, 0.5])
    energy = cartpole.energy()
    run(cartpole, 1.0)
    assert abs(cartpole.position()[0]) < cartpole.track_limit  # no end stop involved
    assert cartpole.energy() == pytest.approx(energy, abs=1e-6)


def test_cartpole_momentum_conserved_without_force():
    # No horizontal external force: the centre of mass keeps its horizontal velocity.
    cartpole = CartPole()
    cartpole.reset(np.random.default_rng(0), state=[0.0, 0.0, 0.3, 0.0])

    def momentum() -> float:
        _, xd, th, thd = cartpole.state
        return cartpole._total_mass * xd + cartpole._ml * thd * math.cos(th)

    run(cartpole, 0.5)
    assert momentum() == pytest.approx(0.0, abs=1e-9)
    assert cartpole.velocity()[0] != 0.0  # the falling pole pushed the cart


def test_cartpole_force_pushes_the_cart_and_tips_the_pole_back():
    cartpole = CartPole()
    cartpole.reset(np.random.default_rng(0), state=[0.0, 0.0, 0.0, 0.0])
    run(cartpole, 0.2, command=10.0)
    x, xd, theta, _ = cartpole.state
    assert x > 0.0 and xd > 0.0
    assert theta < 0.0  # the pole lags behind the accelerating cart
    assert cartpole.effort().tolist() == [10.0, 0.0]
    run(cartpole, 0.01, command=1e6)
    assert cartpole.effort().tolist() == [10.0, 0.0]  # clipped to max_force


def test_cartpole_stops_at_the_track_limits():
    cartpole = CartPole(track_limit=1.0)
    cartpole.reset(np.random.default_rng(0), state=[0.0, 0.0, 0.0, 0.0])
    run(cartpole, 3.0, command=10.0)
    x, xd, _, _ = cartpole.state
    assert x == pytest.approx(1.0)
    assert xd == pytest.approx(0.0, abs=1e-9)
    run(cartpole, 3.0, command=-10.0)
    assert cartpole.position()[0] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match='within the track'):
        cartpole.reset(np.random.default_rng(0), state=[1.5, 0.0, 0.0, 0.0])


def test_cartpole_end_stop_hands_the_cart_momentum_to_the_pole():
    cartpole = CartPole(track_limit=0.1)
    cartpole.reset(np.random.default_rng(0), state=[0.0, 1.0, 0.0, 0.0])
    for _ in range(200):
        cartpole.step(DT, np.zeros(1))
        if cartpole.position()[0] >= 0.1:
            break
    assert cartpole.position()[0] == pytest.approx(0.1)
    assert cartpole.velocity()[0] == 0.0
    # The upright pole is flung forward: dtheta = m l dx / (4/3 m l^2) = 1.5 rad/s here.
    assert cartpole.velocity()[1] == pytest.approx(1.5, rel=0.05)
