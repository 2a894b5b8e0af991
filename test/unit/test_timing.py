"""The capture spacing error that the timing demo, the agent node and the benchmarks report."""

import numpy as np
import pytest
from rtgym_ros.core.timing import capture_spacing_errors


def test_spacing_error_is_the_distance_of_each_gap_from_the_period():
    errors = capture_spacing_errors([0.0, 0.05, 0.11, 0.14], 0.05)
    assert errors == pytest.approx([0.0, 0.01, 0.02])
    assert errors.dtype == np.float64


def test_warmup_captures_are_left_out():
    times = [0.0, 0.2, 0.25, 0.30, 0.36]  # the first gap is start-up, not schedule
    assert capture_spacing_errors(times, 0.05, warmup=1) == pytest.approx([0.0, 0.0, 0.01])
    assert capture_spacing_errors(np.asarray(times), 0.05, warmup=1) == pytest.approx(
        [0.0, 0.0, 0.01])


@pytest.mark.parametrize('times,warmup', [([], 0), ([1.0], 0), ([1.0, 2.0], 2), ([1.0], 5)])
def test_fewer_than_two_captures_give_no_error(times, warmup):
    errors = capture_spacing_errors(times, 0.05, warmup=warmup)
    assert errors.shape == (0,) and errors.dtype == np.float64


def test_a_missing_capture_shows_as_nan():
    errors = capture_spacing_errors([0.0, np.nan, 0.1], 0.05)
    assert np.isnan(errors).all()
