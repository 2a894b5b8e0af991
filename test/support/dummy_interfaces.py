"""Deterministic rtgym interfaces shared by the env tests (and their subprocess scripts)."""

import threading
import time

import gymnasium.spaces as spaces
import numpy as np

from rtgym_ros import RealTimeGymInterface


class CountingInterface(RealTimeGymInterface):
    """
    Observation = (capture count, last control received); terminates every Nth capture.

    Records every call with the thread it ran on and the wall time, so tests can check where
    and when the env called it. Also a plain rtgym interface (bind_node is optional).
    """

    def __init__(self, terminate_every: int = 0, fail_on_capture: int = 0) -> None:
        self.terminate_every = terminate_every
        self.fail_on_capture = fail_on_capture
        self.captures = 0
        self.last_control = np.zeros(2, dtype=np.float32)
        self.sent: list = []
        self.capture_times: list[float] = []
        self.threads: set[str] = set()
        self.calls: list[str] = []

    def _record(self, name: str) -> None:
        self.threads.add(threading.current_thread().name)
        self.calls.append(name)

    def send_control(self, control):
        self._record('send_control')
        self.sent.append(None if control is None else np.array(control, copy=True))
        if control is not None:
            self.last_control = np.array(control, dtype=np.float32)

    def reset(self, seed=None, options=None):
        self._record('reset')
        return [np.array([self.captures], dtype=np.float32), self.last_control.copy()], {}

    def wait(self):
        self._record('wait')

    def get_obs_rew_terminated_info(self):
        self._record('get_obs')
        self.capture_times.append(time.perf_counter())
        self.captures += 1
        if self.fail_on_capture and self.captures == self.fail_on_capture:
            raise ValueError('sensor exploded')
        terminated = bool(self.terminate_every) and self.captures % self.terminate_every == 0
        obs = [np.array([self.captures], dtype=np.float32), self.last_control.copy()]
        return obs, float(self.captures), terminated, {'capture': self.captures}

    def get_observation_space(self):
        return spaces.Tuple((spaces.Box(0, np.inf, (1,), np.float32),
                             spaces.Box(-1, 1, (2,), np.float32)))

    def get_action_space(self):
        return spaces.Box(-1, 1, (2,), np.float32)

    def get_default_action(self):
        return np.zeros(2, dtype=np.float32)

    def render(self):
        self._record('render')
        return 'rendered'
