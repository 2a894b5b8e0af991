"""The elastic schedule, driven by a fake clock: rtgym 0.16's arithmetic, no sleeping."""

import math

import pytest

from rtgym_ros.core.schedule import ElasticSchedule, StepStart

T = 0.05


def make(*, capture: float = 0.03, factor: float = 1.0, now: float = 100.0) -> ElasticSchedule:
    schedule = ElasticSchedule(time_step_duration=T, start_obs_capture=capture,
                               time_step_timeout_factor=factor)
    schedule.initialize(now)
    return schedule


def test_initialize_fakes_a_previous_step_ending_now():
    schedule = make(now=10.0)
    assert schedule.t_end == pytest.approx(10.0)
    assert schedule.t_start == pytest.approx(10.0 - T)
    assert schedule.t_co == pytest.approx(10.0 - T + 0.03)


def test_begin_step_before_initialize_is_an_error():
    schedule = ElasticSchedule(time_step_duration=T, start_obs_capture=T,
                               time_step_timeout_factor=1.0)
    with pytest.raises(RuntimeError, match='initialized'):
        schedule.begin_step(0.0)


def test_on_time_step_starts_at_previous_end():
    schedule = make(now=100.0)
    assert schedule.begin_step(100.0 - 0.001) is StepStart.ELASTIC
    assert schedule.t_start == pytest.approx(100.0)
    assert schedule.t_co == pytest.approx(100.03)
    assert schedule.t_end == pytest.approx(100.0 + T)


def test_late_step_within_elasticity_makes_up_lost_time():
    schedule = make(now=100.0)
    assert schedule.begin_step(100.0 + 0.8 * T) is StepStart.ELASTIC
    assert schedule.late_by == pytest.approx(0.8 * T)
    assert schedule.t_start == pytest.approx(100.0)  # on the grid, not at 'now'
    # and the next on-time step is back on the nominal grid
    schedule.begin_step(schedule.t_end - 0.001)
    assert schedule.t_start == pytest.approx(100.0 + T)


def test_step_past_elasticity_times_out_and_restarts_at_now():
    schedule = make(now=100.0)
    assert schedule.begin_step(100.0 + 1.5 * T) is StepStart.TIMED_OUT
    assert schedule.late_by == pytest.approx(1.5 * T)
    assert schedule.t_start == pytest.approx(100.0 + 1.5 * T)
    assert schedule.t_end == pytest.approx(100.0 + 2.5 * T)


def test_elasticity_boundary_is_strict_as_in_rtgym():
    schedule = make(now=100.0)
    assert schedule.begin_step(100.0 + T) is StepStart.TIMED_OUT


def test_timeout_factor_scales_the_elasticity():
    schedule = make(factor=3.0, now=100.0)
    assert schedule.time_step_timeout == pytest.approx(3 * T)
    assert schedule.begin_step(100.0 + 2.5 * T) is StepStart.ELASTIC
    assert schedule.begin_step(schedule.t_end + 3.5 * T) is StepStart.TIMED_OUT


def test_zero_factor_means_no_elasticity():
    schedule = make(factor=0.0, now=100.0)
    assert schedule.begin_step(100.0 - 1e-6) is StepStart.ELASTIC
    assert schedule.begin_step(schedule.t_end + 1e-6) is StepStart.TIMED_OUT


def test_restart_after_wait_is_not_a_timeout_and_clears_the_flag():
    schedule = make(now=100.0)
    schedule.expect_restart()
    assert schedule.begin_step(105.0) is StepStart.RESTARTED
    assert not schedule.expecting_restart
    assert schedule.t_start == pytest.approx(105.0)
    # a later real time-out is reported again
    assert schedule.begin_step(schedule.t_end + 2 * T) is StepStart.TIMED_OUT


def test_quick_restart_after_wait_keeps_the_flag_like_rtgym():
    """Keep the waiting flag until the elasticity is broken, as rtgym does."""
    schedule = make(now=100.0)
    schedule.expect_restart()
    assert schedule.begin_step(100.0 + 0.1 * T) is StepStart.ELASTIC
    assert schedule.expecting_restart
    assert schedule.begin_step(schedule.t_end + 2 * T) is StepStart.RESTARTED


def test_set_time_step_duration_applies_from_the_next_step():
    schedule = make(now=100.0)
    schedule.begin_step(99.99)
    end = schedule.t_end
    schedule.set_time_step_duration(0.2, time_step_timeout_factor=2.0)
    assert schedule.t_end == end  # the running step is untouched
    schedule.begin_step(end - 0.001)
    assert schedule.t_end - schedule.t_start == pytest.approx(0.2)
    assert schedule.time_step_timeout == pytest.approx(0.4)


def test_set_time_step_duration_keeps_factor_when_not_given():
    schedule = make(factor=2.0)
    schedule.set_time_step_duration(0.1)
    assert schedule.time_step_timeout == pytest.approx(0.2)


def test_set_start_obs_capture_applies_from_the_next_step():
    schedule = make(now=100.0)
    schedule.set_start_obs_capture(0.01)
    schedule.begin_step(99.99)
    assert schedule.t_co - schedule.t_start == pytest.approx(0.01)


def test_shift_moves_every_boundary():
    schedule = make(now=100.0)
    schedule.begin_step(99.99)
    before = (schedule.t_start, schedule.t_co, schedule.t_end)
    schedule.shift(-42.0)
    after = (schedule.t_start, schedule.t_co, schedule.t_end)
    assert after == pytest.approx(tuple(t - 42.0 for t in before))


def simulate(schedule: ElasticSchedule,
             agent_delays: list[float]) -> list[tuple[float, StepStart]]:
    """
    Play an agent against the schedule: capture at max(now, t_co), done at max(now, t_end).

    Each step the agent returns ``delay`` seconds after the time-step completed.
    """
    now = schedule.t_end
    captures = []
    for delay in agent_delays:
        start = schedule.begin_step(now)
        now = max(now, schedule.t_co)
        captures.append((now, start))
        now = max(now, schedule.t_end) + delay
    return captures


def test_one_late_agent_step_is_made_up_on_the_grid():
    schedule = make(capture=T, now=0.0)
    captures = simulate(schedule, [0.01, 0.01, 0.04, 0.0, 0.0, 0.0])
    times = [t for t, _ in captures]
    # the 4th step starts 0.04 late (within T): its capture is late, then back on the grid
    assert times[:3] == pytest.approx([T, 2 * T, 3 * T])
    assert times[3] == pytest.approx(4 * T)  # t_co of step 4 is still ahead of the agent
    assert times[4:] == pytest.approx([5 * T, 6 * T])
    assert all(start is StepStart.ELASTIC for _, start in captures)


def test_very_late_agent_shifts_the_grid_once():
    schedule = make(capture=T, now=0.0)
    captures = simulate(schedule, [0.0, 0.2, 0.0, 0.0])
    starts = [start for _, start in captures]
    assert starts == [StepStart.ELASTIC, StepStart.ELASTIC, StepStart.TIMED_OUT,
                      StepStart.ELASTIC]
    times = [t for t, _ in captures]
    assert times[2] - times[1] == pytest.approx(0.2 + T)
    assert times[3] - times[2] == pytest.approx(T)


def test_nan_free_after_initialize():
    schedule = ElasticSchedule(time_step_duration=T, start_obs_capture=T,
                               time_step_timeout_factor=1.0)
    assert math.isnan(schedule.t_end)
    schedule.initialize(0.0)
    assert not math.isnan(schedule.t_end)
