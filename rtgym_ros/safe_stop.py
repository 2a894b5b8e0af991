"""
The robot's safe action, sent from whichever thread notices it is due, never waiting on another.

The executor thread may be held by an interface call that blocks (a reward function, a
capture waiting for a sensor); the watchdog, ``close()`` and a Ctrl-C in ``step()`` must still
stop the robot. An interface that can publish from any thread (``send_safe_action_now``, as
``RosInterface`` does) is used at once; another gets ``send_control`` on the executor thread
as soon as that thread is free.
"""

from typing import Any, Callable

from rtgym_ros.ros.runtime import RosRuntime


class SafeStop:
    """Send the safe action now; after a final stop, let no held action follow it."""

    def __init__(self, runtime: RosRuntime, *, interface: Callable[[], Any],
                 safe_action: Callable[[], Any]) -> None:
        self._runtime = runtime
        self._interface = interface
        self._safe_action = safe_action
        self.final = False
        """Set when the robot was stopped for good: no action the env still holds may follow."""

    def __call__(self) -> None:
        """Any thread: send the safe action now, whatever the executor thread is doing."""
        try:
            if self.send_now():
                return
            interface = self._interface()
            if self._runtime.on_executor_thread():
                interface.send_control(self._safe_action())
            elif self._runtime.alive():
                self._runtime.post(interface.send_control, self._safe_action())
        except Exception as error:
            self._runtime.logger.error(f'could not send the safe action: {error!r}')

    def send_now(self) -> bool:
        """Any thread: send the safe action if the interface can from here; say if it did."""
        send_now = getattr(self._interface(), 'send_safe_action_now', None)
        return send_now is not None and send_now(self._safe_action())

    def stop_for_good(self) -> None:
        """
        Any thread: send the safe action, and let no action the env holds follow it.

        The env cannot go on (a ROS thread of it died), or is about to close (at exit).
        """
        self.final = True
        self()

    def final_stop(self, *, why: str) -> None:
        """Stop the robot from this thread, for good (close() past a busy executor thread)."""
        self.final = True
        sent = False
        try:
            sent = self.send_now()
        except Exception as error:
            self._runtime.logger.error(f'could not send the safe action: {error!r}')
        self._runtime.logger.error(
            f'{why}; '
            + ('the safe action was sent from the closing thread' if sent else
               'this interface cannot send the safe action from another thread'))
