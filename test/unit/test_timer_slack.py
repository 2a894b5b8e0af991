"""The executor thread's timer slack: set per thread through prctl, read back the same way."""

import sys
import threading

import pytest
from rtgym_ros.core import timer_slack

linux_only = pytest.mark.skipif(not sys.platform.startswith('linux'),
                                reason='timer slack is a Linux notion')


def _in_new_thread(function):
    """Return what ``function()`` returns on a fresh thread (which inherits our slack)."""
    result = []
    thread = threading.Thread(target=lambda: result.append(function()))
    thread.start()
    thread.join()
    return result[0]


@linux_only
def test_the_slack_set_is_the_calling_threads_only():
    ours = timer_slack.of_this_thread()

    def set_then_read():
        return timer_slack.set_for_this_thread(3e-6), timer_slack.of_this_thread()

    was_set, theirs = _in_new_thread(set_then_read)
    assert was_set and theirs == pytest.approx(3e-6)
    assert timer_slack.of_this_thread() == ours


@linux_only
def test_none_leaves_the_inherited_slack():
    ours = timer_slack.of_this_thread()
    assert ours is not None and ours > 0.0

    def leave_then_read():
        return timer_slack.set_for_this_thread(None), timer_slack.of_this_thread()

    assert _in_new_thread(leave_then_read) == (False, ours)


@linux_only
def test_a_slack_below_a_nanosecond_is_one_nanosecond_not_the_default():
    # prctl takes 0 as "back to the default" (50 µs): a tiny slack must not turn into that.
    def set_then_read():
        timer_slack.set_for_this_thread(1e-12)
        return timer_slack.of_this_thread()

    assert _in_new_thread(set_then_read) == pytest.approx(1e-9)
