"""sim_robot's injected faults without ROS: ordered delays, dropout, noise, seeded streams."""

import numpy as np
import pytest
from rtgym_ros.nodes.sim_robot.faults import FaultInjector, OPTIONS

MS = 1_000_000  # ns


def injector(seed: int = 0, **faults: float) -> FaultInjector:
    sensor_seed, delay_seed = np.random.SeedSequence(seed).spawn(2)
    result = FaultInjector(sensor_seed=sensor_seed, delay_seed=delay_seed)
    result.configure(**{name: faults.get(name, 0.0) for name in OPTIONS})
    return result


def test_without_faults_everything_is_due_at_once_and_unchanged():
    faults = injector()
    faults.send_command(5 * MS, 'a')
    assert faults.due_command(5 * MS) == (5 * MS, 'a')
    position, velocity = faults.measure(np.array([1.0]), np.array([2.0]))
    assert position.tolist() == [1.0] and velocity.tolist() == [2.0]
    faults.send_measurement(5 * MS, 'm')
    assert faults.due_measurements(5 * MS) == ['m']


def test_latency_delays_commands_and_the_latest_due_one_wins():
    faults = injector(command_latency=0.01)
    faults.send_command(0, 'first')
    faults.send_command(2 * MS, 'second')
    assert faults.due_command(9 * MS) is None
    assert faults.due_command(10 * MS) == (10 * MS, 'first')
    assert faults.due_command(20 * MS) == (12 * MS, 'second')
    assert faults.due_command(30 * MS) is None


def test_jitter_never_reorders_and_stays_within_its_bound():
    faults = injector(sensor_latency=0.005, sensor_jitter=0.02)
    for k in range(200):
        faults.send_measurement(k * MS, k)
    due = []
    for t in range(0, 300 * MS, MS):
        due += [(t, k) for k in faults.due_measurements(t)]
    assert [k for _, k in due] == list(range(200))
    delays = [t - k * MS for t, k in due]
    assert min(delays) >= 5 * MS and max(delays) <= 25 * MS
    assert len(set(delays)) > 5  # the jitter is there


def test_restart_forgets_what_is_in_flight_and_drop_commands_only_commands():
    faults = injector(command_latency=0.01, sensor_latency=0.01)
    faults.send_command(0, 'c')
    faults.send_measurement(0, 'm')
    faults.drop_commands()
    assert faults.due_command(MS * 100) is None
    assert faults.due_measurements(MS * 100) == ['m']
    faults.send_command(0, 'c')
    faults.send_measurement(0, 'm')
    faults.restart(50 * MS)
    assert faults.due_command(MS * 100) is None and faults.due_measurements(MS * 100) == []


@pytest.mark.parametrize('dropout', [0.0, 0.3, 1.0])
def test_dropout_drops_that_share_of_measurements(dropout):
    faults = injector(sensor_dropout=dropout)
    kept = sum(faults.measure(np.zeros(1)) is not None for _ in range(2000))
    assert kept / 2000 == pytest.approx(1.0 - dropout, abs=0.05)


def test_noise_has_the_configured_spread_on_every_value():
    faults = injector(sensor_noise=0.1)
    samples = np.array([np.concatenate(faults.measure(np.zeros(2), np.ones(1)))
                        for _ in range(4000)])
    assert samples.mean(axis=0) == pytest.approx([0.0, 0.0, 1.0], abs=0.01)
    assert samples.std(axis=0) == pytest.approx([0.1] * 3, rel=0.1)


def test_a_seed_reproduces_the_faults():
    def run(seed: int) -> list:
        faults = injector(seed, sensor_noise=0.1, sensor_dropout=0.5, command_jitter=0.01)
        measured = [faults.measure(np.zeros(1)) for _ in range(50)]
        for k in range(50):
            faults.send_command(k * MS, k)
        due = [faults.due_command(t * MS) for t in range(100)]
        return [None if m is None else float(m[0][0]) for m in measured] + due

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_the_next_measurement_due_is_the_oldest_in_flight():
    faults = injector(sensor_latency=0.004, command_latency=0.001)
    assert faults.next_measurement_due() is None
    faults.send_command(0, 'c')  # commands are not measurements
    assert faults.next_measurement_due() is None
    faults.send_measurement(10 * MS, 'a')
    faults.send_measurement(20 * MS, 'b')
    assert faults.next_measurement_due() == 14 * MS
    assert faults.due_measurements(14 * MS) == ['a']
    assert faults.next_measurement_due() == 24 * MS
