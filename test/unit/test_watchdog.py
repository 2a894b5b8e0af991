"""The watchdog thread: it fires once when its deadline passes, and closing it is immediate."""

import threading
import time

from rtgym_ros.core.watchdog import Watchdog


def test_it_fires_once_when_the_deadline_passes():
    fired = threading.Event()
    calls = []
    watchdog = Watchdog(lambda: (calls.append(1), fired.set()), name='test_watchdog')
    try:
        watchdog.arm(0.05)
        assert fired.wait(5.0)
        time.sleep(0.1)
        assert calls == [1]
    finally:
        watchdog.close()


def test_closing_does_not_wait_for_the_sleeping_thread():
    # close() runs before the env's safe action goes out: it must not wait out the thread's
    # sleep towards a far deadline (half a second at a time).
    watchdog = Watchdog(lambda: None, name='test_watchdog')
    watchdog.arm(30.0)
    time.sleep(0.05)  # the thread is asleep now
    start = time.monotonic()
    watchdog.close()
    assert time.monotonic() - start < 0.25
    assert not watchdog._thread.is_alive()


def test_a_disarmed_watchdog_does_not_fire():
    calls = []
    watchdog = Watchdog(lambda: calls.append(1), name='test_watchdog')
    try:
        watchdog.arm(0.05)
        watchdog.disarm()
        time.sleep(0.2)
        assert calls == []
    finally:
        watchdog.close()
