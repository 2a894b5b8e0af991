"""The env's config dict: defaults, validation, and the warnings rtgym never gave."""

import pytest
from rtgym_ros.core.config import DEFAULT_CONFIG_DICT, resolve_config
from rtgym_ros.core.interface import RealTimeGymInterface


class Interface(RealTimeGymInterface):
    """A class to name; resolve_config never instantiates it."""


def test_capture_after_the_end_of_the_step_is_warned_about():
    # The README's example once kept the default start_obs_capture (0.05) with T = 0.02.
    config = dict(DEFAULT_CONFIG_DICT, interface=Interface, time_step_duration=0.02)
    with pytest.warns(UserWarning, match='start_obs_capture.*time_step_duration'):
        resolve_config(config)


def test_capture_within_the_step_is_not_warned_about(recwarn):
    resolve_config(dict(DEFAULT_CONFIG_DICT, interface=Interface, time_step_duration=0.02,
                        start_obs_capture=0.02))
    assert not [w for w in recwarn if 'start_obs_capture' in str(w.message)]


@pytest.mark.parametrize('key', ['clock_stall_timeout', 'time_step_duration'])
def test_numbers_are_checked_with_the_key(key):
    with pytest.raises(ValueError, match=key):
        resolve_config(dict(DEFAULT_CONFIG_DICT, interface=Interface, **{key: 'soon'}))


def test_on_clock_stall_is_a_choice():
    with pytest.raises(ValueError, match='on_clock_stall.*warn, error'):
        resolve_config(dict(DEFAULT_CONFIG_DICT, interface=Interface, on_clock_stall='panic'))
