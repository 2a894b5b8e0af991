"""The bare-lock wake-ups behave as the threading primitives they stand in for."""

import threading
import time

import pytest
from rtgym_ros.core.wakeups import Latch, Signal

SEQUENCES = [
    ['set', 'is_set', 'wait', 'is_set', 'wait'],
    ['is_set', 'wait', 'set', 'set', 'wait', 'clear', 'wait', 'is_set'],
    ['clear', 'clear', 'is_set', 'set', 'clear', 'set', 'wait', 'wait', 'is_set'],
]


@pytest.mark.parametrize('initially_set', [False, True])
@pytest.mark.parametrize('sequence', SEQUENCES)
def test_latch_answers_as_threading_event_does(initially_set, sequence):
    latch, event = Latch(is_set=initially_set), threading.Event()
    if initially_set:
        event.set()
    for operation in sequence:
        args = (0.0,) if operation == 'wait' else ()
        assert getattr(latch, operation)(*args) == getattr(event, operation)(*args), operation


def test_latch_set_releases_every_waiter_and_stays_set():
    latch = Latch()
    woken = []
    waiters = [threading.Thread(target=lambda: woken.append(latch.wait(5.0))) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.05)
    assert woken == []
    latch.set()
    for waiter in waiters:
        waiter.join(5.0)
    assert woken == [True, True, True]
    assert latch.is_set()


def test_latch_wait_times_out_while_clear():
    latch = Latch(is_set=True)
    latch.clear()
    started = time.monotonic()
    assert latch.wait(0.05) is False
    assert time.monotonic() - started >= 0.04


def test_signal_wakes_one_wait_and_is_consumed():
    signal = Signal()
    assert signal.wait(0.0) is False
    signal.notify()
    signal.notify()  # a second notify before the wait is the same wake-up
    assert signal.wait(0.0) is True
    assert signal.wait(0.0) is False


def test_signal_notified_from_another_thread_wakes_the_waiter():
    signal = Signal()
    timer = threading.Timer(0.05, signal.notify)
    timer.start()
    assert signal.wait(5.0) is True
    timer.join()


def test_signal_clear_drops_a_pending_notify():
    signal = Signal()
    signal.notify()
    signal.clear()
    assert signal.wait(0.0) is False
