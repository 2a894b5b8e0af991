"""
Deadlines on a hand-set clock.

The lockstep deadline (inline waits, posted callbacks, no lost wake-up) and the wall-time
sleep to a deadline.
"""

import threading
import time

import pytest
from rtgym_ros.ros.deadline import ClockDeadline, sleep_to

STRETCH = 1e-3


class Clock:
    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time


def make(inline_wait: float = 0.0):
    clock, posted, fired = Clock(), [], []
    deadline = ClockDeadline(now=clock.now, post=lambda f, *a: posted.append((f, a)),
                             inline_wait=inline_wait)
    return clock, deadline, posted, fired


def run(posted: list) -> None:
    while posted:
        function, args = posted.pop(0)
        function(*args)


def test_a_target_already_reached_fires_at_once():
    clock, deadline, posted, fired = make()
    clock.time = 1.0
    deadline.on_clock()  # the clock got there before anything was armed: nothing to do
    deadline.arm(1.0 + 1e-12, lambda: fired.append(threading.get_ident()))
    assert fired == [threading.get_ident()] and not posted and not deadline.armed


def test_the_arming_thread_waits_for_the_clock_itself():
    clock, deadline, posted, fired = make(inline_wait=5.0)

    def simulator() -> None:
        time.sleep(0.05)
        clock.time = 0.02
        deadline.on_clock()

    threading.Thread(target=simulator).start()
    start = time.monotonic()
    deadline.arm(0.02, lambda: fired.append(threading.get_ident()))
    assert fired == [threading.get_ident()] and not posted
    assert time.monotonic() - start < 4.0


def test_past_the_inline_wait_the_clock_thread_posts_the_callback_once():
    clock, deadline, posted, fired = make(inline_wait=0.0)
    deadline.arm(0.02, lambda: fired.append('capture'))
    assert deadline.armed and not fired
    clock.time = 0.01
    deadline.on_clock()
    assert not posted
    clock.time = 0.02
    deadline.on_clock()
    deadline.on_clock()  # /clock said again: still one callback
    assert len(posted) == 1
    run(posted)
    assert fired == ['capture'] and not deadline.armed


def test_a_posted_callback_of_a_cancelled_or_moved_deadline_does_nothing():
    clock, deadline, posted, fired = make()
    deadline.arm(0.02, lambda: fired.append('old'))
    clock.time = 0.02
    deadline.on_clock()
    deadline.cancel()
    run(posted)
    assert fired == []
    clock.time = 0.0  # the simulator was reset
    deadline.arm(0.04, lambda: fired.append('new'))
    deadline.retarget(0.02)
    clock.time = 0.02
    deadline.on_clock()
    run(posted)
    assert fired == ['new']


def _sleeping_clock(start: float, overshoot: float = 0.0):
    """Return a clock that each sleep moves on by what was asked, plus ``overshoot``."""
    clock, slept = Clock(), []
    clock.time = start

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.time += seconds + overshoot

    return clock, slept, sleep


def test_a_far_deadline_sleeps_its_last_stretch_apart():
    clock, slept, sleep = _sleeping_clock(0.0, overshoot=300e-6)
    sleep_to(0.01, 0.01, clock.now, sleep, stretch=STRETCH)
    # The first sleep ended 300 µs late; the second sleeps what is left, from a fresh reading.
    assert slept == [pytest.approx(0.01 - STRETCH), pytest.approx(STRETCH - 300e-6)]


def test_a_near_deadline_is_one_sleep_and_a_past_one_none():
    clock, slept, sleep = _sleeping_clock(0.0)
    sleep_to(1.5 * STRETCH, 1.5 * STRETCH, clock.now, sleep, stretch=STRETCH)
    assert slept == [pytest.approx(1.5 * STRETCH)]
    clock, slept, sleep = _sleeping_clock(0.0, overshoot=2 * STRETCH)
    # The first sleep overshot the deadline: no second one.
    sleep_to(0.01, 0.01, clock.now, sleep, stretch=STRETCH)
    assert slept == [pytest.approx(0.01 - STRETCH)]


def test_a_clock_set_back_during_the_first_sleep_does_not_lengthen_the_second():
    clock, slept, sleep = _sleeping_clock(0.0)

    def sleep_then_set_back(seconds: float) -> None:
        sleep(seconds)
        if len(slept) == 1:
            clock.time -= 3600.0  # the system clock was set back an hour

    sleep_to(0.01, 0.01, clock.now, sleep_then_set_back, stretch=STRETCH)
    assert slept == [pytest.approx(0.01 - STRETCH), pytest.approx(STRETCH)]


def test_a_last_stretch_of_zero_sleeps_once_and_another_one_is_kept():
    clock, slept, sleep = _sleeping_clock(0.0, overshoot=300e-6)
    sleep_to(0.01, 0.01, clock.now, sleep, stretch=0.0)
    assert slept == [pytest.approx(0.01)]
    clock, slept, sleep = _sleeping_clock(0.0)
    sleep_to(0.01, 0.01, clock.now, sleep, stretch=2e-3)
    assert slept == [pytest.approx(0.008), pytest.approx(0.002)]
