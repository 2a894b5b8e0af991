"""
The user-facing interface class, call for call the one of rtgym 0.16.

An rtgym interface works unchanged here. Every method is called on the env's executor thread,
so an implementation never needs locks against the env. Two optional hooks are ours:
:meth:`RealTimeGymInterface.bind_node` hands the interface the env's ROS node before anything
else is called (to create publishers, subscriptions, clients), and
:meth:`RealTimeGymInterface.close` lets it release what it made.
"""

from __future__ import annotations

from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:  # core imports neither ROS nor Gymnasium at run time
    import gymnasium.spaces as spaces
    import numpy as np
    from rclpy.node import Node


class RealTimeGymInterface:
    """Implement this for your robot, then put the class under ``config['interface']``."""

    wants_io_node = False
    """Set True to get ``io_node`` in :meth:`bind_node` (see :mod:`rtgym_ros.ros.runtime`)."""

    def bind_node(self, node: Node, io_node: Node | None = None) -> None:
        """
        Receive the env's node (called once, first, on the executor thread).

        Use ``node.get_clock()`` for time: it follows ``/clock`` under ``use_sim_time``.
        ``io_node`` (when ``wants_io_node``) is spun by its own thread: subscriptions and
        service clients made on it deliver while the executor thread waits for them.
        """

    def send_control(self, control: Any) -> None:
        """Apply ``control`` (an element of the action space) to the robot, without blocking."""
        raise NotImplementedError

    def reset(self, seed: int | None = None,
              options: dict | None = None) -> tuple[list, dict]:
        """
        Start an episode; return ``(obs, info)``, obs a list matching the observation space.

        Do not put the action buffer in ``obs``: the env appends it.
        """
        raise NotImplementedError

    def wait(self) -> None:
        """
        Pause the robot until the next ``reset()`` (e.g. stop it, pause the simulator).

        If you implement this, keep ``reset_act_buf`` True in the config.
        """

    def get_obs_rew_terminated_info(self) -> tuple[list, float, bool, dict]:
        """Return ``(obs, reward, terminated, info)`` captured now (at ``t_co``)."""
        raise NotImplementedError

    def get_observation_space(self) -> spaces.Tuple:
        """Return the observation space, a ``spaces.Tuple`` (without the action buffer)."""
        raise NotImplementedError

    def get_action_space(self) -> spaces.Space:
        """Return the action space (usually a ``spaces.Box``)."""
        raise NotImplementedError

    def get_default_action(self) -> np.ndarray:
        """Return the safe action: sent at reset, on close, on errors and on a stalled agent."""
        raise NotImplementedError

    def get_safe_action(self, default_action: np.ndarray) -> np.ndarray:
        """
        Return what stops the robot now (on close, errors, a stalled agent); optional.

        ``default_action`` is the env's current one (``set_default_action`` changes it). A
        position-controlled robot may rather hold the position it was last sent.
        """
        return default_action

    def render(self) -> Any:
        """Draw the robot if you want; the env returns what this returns."""

    def close(self) -> None:
        """Release the publishers and subscriptions made in :meth:`bind_node` (on env close)."""
