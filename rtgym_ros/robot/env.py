"""
``RosEnv`` (``rtgym_ros/ros-v1``): a robot described by a ROS 2 params file, no code.

``gym.make('rtgym_ros/ros-v1', robot_config='config/robots/pendulum_sim.yaml', namespace='r1')``:
the file's keys, then the keyword overrides, configure the env (see ``robot_config``).
Actions are checked before they enter the action buffer: wrong shape is an error, NaN/inf is
replaced by the safe action (with a warning; ``on_stop: hold`` groups keep the previous step's
action), published as safe actions are, without ``act_prepro_func``; out-of-bounds is clipped
or rejected, and so is a change larger than an action group's ``max_delta`` per time-step,
measured from the last target the robot got: the previous step's action, or the safe action
if one went out since.

rtgym's ``obs_prepro_func`` and ``act_prepro_func`` (``package.module:function`` in a config):
``obs_prepro_func`` maps the observation the env would return (the Dict, or the Tuple) to the
one it returns, at reset and at every step, on the caller's thread; the observation space is
what it returns for a sample of the space before it. ``act_prepro_func`` maps each action
(checked, and as buffered) to the command published, on the executor thread; the command is
checked again (shape, finite, clipped into the action groups' bounds).
"""

from pathlib import Path
from typing import Any, Callable
import warnings

import gymnasium.spaces as spaces
import numpy as np
from rtgym_ros.core.config import EnvConfig, resolve_config
from rtgym_ros.env import RealTimeEnv
from rtgym_ros.robot.interface import RosInterface
from rtgym_ros.robot.layout import ObservationLayout, space_of_output
from rtgym_ros.robot.loader import env_node_name, load_robot_config
from rtgym_ros.robot.spec import RobotSpec
from rtgym_ros.ros.diagnostics import DiagnosticsPublisher, OK, WARN
from rtgym_ros.ros.runtime import NodeNameClaim

_FLOAT32 = np.dtype(np.float32)  # a singleton: action.dtype is it for a native float32 array


def robot_spaces(config: EnvConfig,
                 spec: RobotSpec) -> tuple[spaces.Box, ObservationLayout, spaces.Space]:
    """
    Return the action space, the observation layout and the observation space of a config.

    What ``RosEnv`` uses, computed without a node: the ``check`` tool prints the same.
    """
    interface = RosInterface(spec)
    action_space = interface.get_action_space()
    layout = ObservationLayout(spec.observations, action_space,
                               kind=spec.options.observation_layout,
                               act_in_obs=config.act_in_obs, act_buf_len=config.act_buf_len)
    space = layout.space
    if config.obs_prepro_func is not None:
        space = space_of_output(config.obs_prepro_func, space, key='obs_prepro_func')
    return action_space, layout, space


def resolve_robot_config(env_config: dict[str, Any]) -> EnvConfig:
    """Return the env config of a robot config's env keys (defaults applied, checked)."""
    return resolve_config(dict(env_config, interface=RosInterface))


class RosEnv(RealTimeEnv):
    """The real-time env on a robot config: Dict observations, checked actions, diagnostics."""

    _prepro_at_capture = False  # obs_prepro_func gets the Dict (or Tuple) the env returns

    def __init__(self, robot_config: str | Path | None = None, *,
                 node_name: str | None = None, render_mode: str | None = None,
                 command_line: bool = True, **overrides: Any) -> None:
        """
        Read ``robot_config`` for the env's node, then the command line, then ``overrides``.

        :param command_line: take the parameters that the ROS arguments of ``sys.argv``
            (``python train.py --ros-args -p k:=v``) give the env's node, as rcl gives them;
            ``False`` where the caller has read them already (the agent).
        """
        # The name first: the file is read for the node rcl will give it to, rtgym_env_2 when
        # another env of this process has rtgym_env.
        name, namespace = env_node_name(node_name, overrides)
        self._name_claim = NodeNameClaim(namespace, name)
        try:
            env_config, spec = load_robot_config(robot_config, node_name=self._name_claim.name,
                                                 command_line=command_line, **overrides)
        except BaseException:
            self._name_claim.release()
            raise
        env_config['node_name'] = self._name_claim.requested
        self.robot = spec
        self.rejected_actions = 0
        self.replaced_actions = 0
        self.rate_limited_actions = 0
        self.clipped_commands = 0
        self._max_delta = spec.max_delta  # once: the spec does not change
        self._max_deltas = None if self._max_delta is None else self._max_delta.tolist()
        self._reference = _frozen(spec.default_action)
        # The last target the robot got, or will get before the next action: swapped whole
        # (read-only arrays) by the user's thread at each step and reset, by whichever thread
        # sends a safe action. max_delta counts from it.
        self._pending: tuple[np.ndarray, bool] | None = None
        self._previous: tuple[np.ndarray, bool] | None = None
        # The actions step() handed over last and the time before (it may still be on its way
        # when the next one is checked; each is the reference it set), each with whether it
        # replaced a non-finite one: the executor thread knows from them a step's action
        # from reset()'s, and what to publish for a replacement.
        self._sent = self._reference
        # The last target the robot got (executor thread, or a safe action from any thread):
        # what a step's action is kept within max_delta of when it is published.
        self.recorder = None
        try:
            if spec.record is not None:  # rosbags is needed only then
                from rtgym_ros.record.recorder import EpisodeRecorder
                self.recorder = EpisodeRecorder(spec.record)
            config = resolve_robot_config(dict(env_config, interface_kwargs={
                'spec': spec, 'recorder': self.recorder}))
            # The spaces first: a failing obs_prepro_func is a config error before any node.
            _, self.layout, observation_space = robot_spaces(config, spec)
            super().__init__(config, render_mode=render_mode)
        except BaseException:
            self._name_claim.release()  # the runtime's, if it started (and released it)
            if self.recorder is not None:  # no env, no episode: the path stays free for a rerun
                self.recorder.discard()
            raise
        self.interface.time_step_duration = self.time_step_duration
        self.interface.on_safe_action = self._safe_action_sent
        self.observation_space = observation_space
        # For _checked: the float32 bounds as Python floats (exactly), and the shape (Box.shape
        # is a Python property).
        self._bounds = (self.action_space.low.tolist(), self.action_space.high.tolist())
        self._action_shape = self.action_space.shape
        period = spec.options.diagnostics_period
        if period > 0:
            self._diagnostics = self._runtime.call(lambda: DiagnosticsPublisher(
                self._runtime.node, name=f'rtgym_ros: {self._runtime.node_name}',
                period=period, collect=self._diagnostic_values))

    def _owned_action(self, action: np.ndarray) -> np.ndarray:
        """step(): the action is already the env's own array (:meth:`_checked` made it)."""
        return action

    def _first_observation(self, values: dict[str, np.ndarray]) -> Any:
        return self._observation(values)

    def _step_observation(self, values: dict[str, np.ndarray]) -> Any:
        return self._observation(values)

    def _observation(self, values: dict[str, np.ndarray]) -> Any:
        observation = self.layout.build(values, self.act_buf)
        if self.obs_prepro_func is not None:
            observation = self.obs_prepro_func(observation)
        return observation

    def _control_of(self, action: np.ndarray) -> np.ndarray:
        """
        Executor thread: the command published for a checked action (``act_prepro_func``).

        Its result is checked as an action is: wrong shape or non-finite values fail the
        time-step (the robot gets its safe action, ``step()`` raises), out-of-bounds values
        are clipped into the action groups' bounds. A non-finite action's replacement is a
        safe action: published as it is, without ``act_prepro_func``.
        """
        handed = self._handed(action)
        if handed is not None and handed[1]:  # a non-finite action's replacement: a safe action
            self._sent = action
            if self.act_prepro_func is None:
                return action
            # Held groups: the command last published (this thread publishes in order).
            return np.asarray(self.safe_action(), dtype=np.float32)
        if self._max_delta is not None:
            action = self._within_reach(action, handed)
        if self.act_prepro_func is None:
            return action
        space = self.action_space
        # A copy: a function that works in place (``*=``) must not change the buffered action,
        # nor the default action that reset() hands over.
        command = np.asarray(self.act_prepro_func(action.copy()), dtype=np.float64)
        if command.shape != space.shape:
            raise ValueError(f'act_prepro_func must return an action of shape {space.shape}, '
                             f'got shape {command.shape}')
        if not np.isfinite(command).all():
            raise ValueError(f'act_prepro_func returned non-finite values {command.tolist()}')
        if (command < space.low).any() or (command > space.high).any():
            self.clipped_commands += 1
            command = np.clip(command, space.low, space.high)
        return command.astype(np.float32)

    def _may_truncate(self) -> bool:
        return self.robot.options.truncate_on_stale is not None

    def _truncation_reason(self, info: Any) -> str | None:
        """End the episode when the robot is gone: ``truncate_on_stale``."""
        rule = self.robot.options.truncate_on_stale
        if rule is None:
            return None
        runs = info.get('stale_steps', {})
        if not all(runs.get(name, 0) >= rule.steps for name in rule.slots):
            return None
        self._runtime.logger.warning(
            f'episode truncated: observations {", ".join(rule.slots)} stale for {rule.steps} '
            'steps or more (truncate_on_stale): is the robot gone?')
        return 'stale_observations'

    def set_default_action(self, default_action: Any) -> None:
        super().set_default_action(default_action)
        self.interface.default_action = self.default_action  # wait() sends it too

    def set_time_step_duration(self, time_step_duration: float,
                               time_step_timeout_factor: float | None = None) -> None:
        super().set_time_step_duration(time_step_duration, time_step_timeout_factor)
        self.interface.time_step_duration = float(time_step_duration)

    def _handed(self, action: np.ndarray) -> tuple | None:
        """Executor thread: the hand-over of a step's ``action``; None for reset()'s action."""
        for handed in (self._pending, self._previous):
            if handed is not None and action is handed[0]:
                return handed
        return None

    def _within_reach(self, action: np.ndarray, handed: tuple | None) -> np.ndarray:
        """
        Executor thread: keep a step's action within ``max_delta`` of the robot's last target.

        step() checked it against the action before it. A safe action that went out since
        (the watchdog, an error), or an earlier action clipped here, is the robot's target
        now: the action is clipped within ``max_delta`` of it (under ``reject`` too: step()
        has returned). reset()'s action goes out as it is.
        """
        if handed is None:
            self._sent = _frozen(action)
            return action
        kept = self._kept_in_reach(action)
        sent = action if kept is action else _frozen(kept)
        self._sent = sent
        if self._pending is handed and (sent is not action or self._reference is not action):
            self._reference = sent  # no later step yet: the next action counts from this one
        return kept

    def _last_action_on_reset(self, action: Any) -> Any:
        """
        User thread, ``reset()``: keep the episode's last action within ``max_delta``.

        It is a step's action, sent again: a safe action may have gone out since (the
        episode's ``wait()``, the watchdog), and the ramp starts again from it. Clipped under
        ``reject`` too: a reset cannot refuse it.
        """
        if self._max_delta is None or action is self.default_action:
            return action
        return self._kept_in_reach(action)

    def _kept_in_reach(self, action: np.ndarray) -> np.ndarray:
        """Return ``action``, or it clipped within ``max_delta`` of the robot's last target."""
        target = self._sent
        if _plainly_within(action.tolist(), target.tolist(), self._max_deltas):
            return action
        low, high = self._reach(target)
        if (action >= low).all() and (action <= high).all():
            return action
        self.rate_limited_actions += 1
        return np.clip(action, low, high)

    def _reach(self, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """
        Return the bounds within ``max_delta`` of ``target``, in float32 as the action is.

        One rounding for the check in step() and the one at publication: a float32 ramp of
        ``max_delta`` a step is no step past either.
        """
        return ((target - self._max_delta).astype(np.float32),
                (target + self._max_delta).astype(np.float32))

    def _safe_action_sent(self, values: np.ndarray) -> None:
        """Any thread: the robot gets its safe action; the next change counts from it."""
        self._reference = self._sent = _frozen(values)

    def _pause_interface(self) -> None:
        """Executor thread, ``wait()``: the interface sends the safe action (then pauses)."""
        try:
            super()._pause_interface()
        finally:
            self._safe_action_sent(self.interface.last_action)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        self._pending = self._previous = None  # reset() sends its action as it is
        obs, info = super().reset(seed=seed, options=options)
        self._reference = _frozen(self.act_buf[-1])  # what reset() sent
        if self.recorder is not None:
            self.recorder.reset(info, timeouts=self.timeouts)
        return obs, info

    def step(self, action: Any) -> tuple:
        # Refused: the robot must not keep the last action until the watchdog.
        action, replaced = self._on_user_thread(self._checked, action)
        # The env's own new array (_checked made it), frozen in place: the reference too.
        # setflags(False), by position: cheaper than a copy or flags.writeable on the user's
        # thread, whose code is cold after each wait (benchmarks/action_check.py).
        action.setflags(False)
        self._previous, self._pending = self._pending, (action, replaced)
        self._reference = action
        result = super().step(action)
        if self.recorder is not None:
            self.recorder.step(action, *result[1:], timeouts=self.timeouts)
        return result

    def close(self) -> None:
        super().close()
        if getattr(self, 'recorder', None) is not None:
            self.recorder.close()  # after the node: every message received is in the queue

    def check_action(self, action: Any) -> np.ndarray:
        """Return the action that will be applied (and buffered), or raise ValueError."""
        return self._checked(action)[0]

    def _checked(self, action: Any) -> tuple[np.ndarray, bool]:
        """User thread: return the action as buffered and whether it replaced a non-finite one."""
        if type(action) is np.ndarray and action.dtype is _FLOAT32:
            values = action  # an agent's usual action: copied by astype() below
        else:
            try:
                values = np.asarray(action, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(f'action must be {_numbers(self._action_shape[0])}, '
                                 f'got {action!r}') from None
            except OverflowError as error:  # a Python int beyond float64 (not printed: huge)
                raise ValueError(f'action must be {_numbers(self._action_shape[0])} within '
                                 f"float64's range, got a {type(action).__name__} with a "
                                 f'larger one ({error})') from None
        if values.shape != self._action_shape:
            raise ValueError(f'action must have shape {self._action_shape}, got {values.shape}')
        # Within the float32 bounds as a float64: finite, and within them as the float32 it is
        # applied as (rounding keeps the order, and a bound is a float32). Python floats: for
        # the few values of an action, numpy's calls cost more (benchmarks/action_check.py).
        listed = values.tolist()
        for value, low, high in zip(listed, *self._bounds):
            if not low <= value <= high:
                return self._checked_closely(values)
        return self._limit_rate(values.astype(np.float32), listed), False

    def _checked_closely(self, values: np.ndarray) -> tuple[np.ndarray, bool]:
        """
        Check values not within the bounds as float64s, as :meth:`_checked` returns them.

        Non-finite values, values beyond a bound, or 0.7 for a bound of 0.7 (within it as the
        float32 it is applied as).
        """
        if not np.isfinite(values).all():
            self.replaced_actions += 1
            warnings.warn(f'non-finite action {values.tolist()} replaced by the safe action')
            # Held groups keep the previous step's action, which may still be on its way to
            # the robot: not the interface's last published action.
            return self.interface.get_safe_action(self.default_action,
                                                  last=self._reference), True
        # Checked as the float32 it is applied as: a bound of the config is the float32 bound
        # of the space, and 0.7 given as a float64 is in [-0.7, 0.7] once it is a float32.
        with np.errstate(over='ignore'):  # finite beyond float32: inf, out of bounds
            values = values.astype(np.float32)
        space = self.action_space
        values, _ = self._keep_within(
            values, space.low, space.high,
            lambda: f'is outside the bounds [{space.low.tolist()}, {space.high.tolist()}]')
        return self._limit_rate(values), False

    def _limit_rate(self, values: np.ndarray, listed: list[float] | None = None) -> np.ndarray:
        """
        Keep each value within ``max_delta`` of the robot's last target (clip or reject).

        That target is the previous step's action (the default, or last, action after a
        reset), or the safe action if one went out since (watchdog, error, ``wait()``): the
        ramp starts again from it. Safe actions themselves are not limited.

        :param listed: the values as Python floats, before their cast to float32, if known.
        """
        limit = self._max_delta
        if limit is None:
            return values
        previous = self._reference
        if listed is not None and _plainly_within(listed, previous.tolist(), self._max_deltas):
            return values
        values, clipped = self._keep_within(
            values, *self._reach(previous),
            lambda: f'moves more than max_delta {limit.tolist()} from the last target '
                    f'{previous.tolist()}')
        self.rate_limited_actions += clipped
        return values

    def _keep_within(self, values: np.ndarray, low: np.ndarray, high: np.ndarray,
                     why: Callable[[], str]) -> tuple[np.ndarray, bool]:
        """Clip to [low, high], or raise ValueError(why()) under ``action_policy: reject``."""
        if (values >= low).all() and (values <= high).all():
            return values, False
        if self.robot.options.action_policy == 'reject':
            self.rejected_actions += 1
            raise ValueError(f'action {values.tolist()} {why()} (action_policy: reject)')
        return np.clip(values, low, high), True

    def _diagnostic_values(self) -> tuple[bytes, str, dict[str, object]]:
        """Executor thread, ~1 Hz: what an operator wants to see on rqt_runtime_monitor."""
        interface: RosInterface = self.interface
        now = interface.now()
        ages = {f'age {slot.name} (s)': f'{slot.age(now):.4f}' for slot in interface.slots}
        stale = [slot.name for slot in interface.slots if slot.is_stale(now)]
        values = {'steps': self.current_step, 'time-outs': self.timeouts,
                  'watchdog stops': self.stalls,
                  'rejected actions': self.rejected_actions,
                  'replaced actions (non-finite)': self.replaced_actions,
                  'rate-limited actions': self.rate_limited_actions,
                  'clipped commands (act_prepro_func)': self.clipped_commands,
                  'time_step_duration (s)': self.time_step_duration, **ages,
                  **{f'stale count {name}': count
                     for name, count in interface.stale_counts.items()}}
        if stale:
            return WARN, f'stale observations: {", ".join(stale)}', values
        return OK, 'running' if self.running else 'idle', values

    def _shutdown_interface(self) -> None:
        diagnostics = getattr(self, '_diagnostics', None)
        if diagnostics is not None:
            diagnostics.destroy()
        super()._shutdown_interface()


def _plainly_within(values: list[float], target: list[float], deltas: list[float]) -> bool:
    """
    Return whether each value is within its delta of the target, in float64.

    Then it is within :meth:`RosEnv._reach`'s float32 bounds too: they are these bounds
    rounded to float32, and rounding keeps the order (a value rounds to the float32 it is
    applied as). Otherwise numpy's check decides. Python floats: for the few values of an
    action, numpy's calls cost more on a thread whose code is cold (benchmarks/action_check.py).
    """
    for value, last, delta in zip(values, target, deltas):
        if not last - delta <= value <= last + delta:
            return False
    return True


def _frozen(values: Any) -> np.ndarray:
    """Return a read-only float32 copy: shared between threads, swapped, never changed."""
    frozen = np.array(values, dtype=np.float32).reshape(-1)
    frozen.flags.writeable = False
    return frozen


def _numbers(count: int) -> str:
    """Say ``count`` numbers in English: '1 number', '3 numbers'."""
    return f'{count} number' if count == 1 else f'{count} numbers'
