"""
``RealTimeEnv``: rtgym 0.16's real-time Gymnasium env, on a ROS 2 node and its clock.

The user's thread (``step``/``reset``) only hands actions over and waits on events; the
time-step itself, and every interface call, runs on the node's executor thread as timer
callbacks (see :mod:`rtgym_ros.core.time_step`). The semantics are rtgym's ``real-time-gym-ts-v1``
to the letter (docs/design.md).
"""

from collections import deque
import copy
import sys
from typing import Any, Callable
import warnings
import weakref

import gymnasium
import gymnasium.spaces as spaces
import numpy as np
from rclpy.clock import JumpThreshold, TimeJump
from rclpy.duration import Duration

from rtgym_ros.core import gc_freeze, gil, timer_slack
from rtgym_ros.core.config import DEFAULT_CONFIG_DICT, EnvConfig, resolve_config
from rtgym_ros.core.interface import RealTimeGymInterface
from rtgym_ros.core.schedule import ElasticSchedule, StepStart, TIMED_OUT
from rtgym_ros.core.time_step import TimeStepRunner
from rtgym_ros.core.timing import make_benchmark
from rtgym_ros.core.validate import check_fits_in_memory, short_repr
from rtgym_ros.core.watchdog import Watchdog
from rtgym_ros.ros.deadline import ClockDeadline, DeadlineTimer
from rtgym_ros.ros.deferred_log import DeferredLog
from rtgym_ros.ros.runtime import (check_node_name, NodeNameClaim, RosRuntime,
                                   RuntimeClosedError)
from rtgym_ros.ros.stall_monitor import POLL, StallMonitor
from rtgym_ros.safe_stop import SafeStop
from rtgym_ros.stop_signal import stop_robots_on_stopping_signals

_CLOSE_TIMEOUT = 1.0  # seconds: bound on each teardown wait, so close() never hangs
_DELIVERY_LINGER = 0.1  # s the safe action is given to reach the robot before the node goes
_SAFE_ACTION_BOUND = 0.25  # s close() gives a busy executor thread before stopping the robot
_LOCKSTEP_INLINE_WAIT = 0.05  # wall s the executor thread waits for /clock itself (lockstep)
_RESULTS_KEPT = 8  # completed steps' results kept for step() (it reads the one it waited for)


class BenchmarkDisabledError(RuntimeError, AssertionError):
    """``benchmarks()`` without ``benchmark=True`` (an AssertionError too, as in rtgym)."""


class RealTimeEnv(gymnasium.Env):
    """A real-time env whose elastic time-step runs on ROS timers (``use_sim_time`` aware)."""

    _prepro_at_capture = True  # rtgym: obs_prepro_func gets the interface's obs at capture
    _name_claim: NodeNameClaim | None = None  # a subclass's claim of the node's name
    metadata = {'render_modes': ['human']}
    """``render_mode='human'``: ``render()`` calls the interface's ``render`` (it draws) and
    returns None; ``None`` (the default): ``render()`` returns what the interface returns, as
    rtgym does. Nothing renders by itself during ``step()``: drawing would cost the time-step
    its timing. ``render_fps`` is the step rate, 1 / ``time_step_duration``."""

    def __init__(self, config: dict | EnvConfig = DEFAULT_CONFIG_DICT, *,
                 render_mode: str | None = None) -> None:
        self._closed = True  # until the runtime exists, close() has nothing to do
        self._warned_clock_publishers = False
        self._resetting = False  # the interface's reset() runs (executor thread)
        if render_mode is not None and render_mode not in self.metadata['render_modes']:
            raise ValueError(f'render_mode must be None or one of '
                             f"{self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        cfg: EnvConfig = resolve_config(config)
        check_node_name(cfg.node_name, cfg.namespace)
        stop_robots_on_stopping_signals()  # before any robot moves: close_all() runs on them
        self.config = cfg
        if cfg.time_step_duration > 0.0:
            self.metadata = {**type(self).metadata, 'render_fps': 1.0 / cfg.time_step_duration}
        self.wait_on_done = cfg.wait_on_done
        self.last_act_on_reset = cfg.last_act_on_reset
        self.act_prepro_func = cfg.act_prepro_func
        self.obs_prepro_func = cfg.obs_prepro_func
        self.ep_max_length = cfg.ep_max_length
        self.act_in_obs = cfg.act_in_obs
        self.act_buf_len = cfg.act_buf_len
        self.act_buf: deque = deque(maxlen=cfg.act_buf_len)
        self.reset_act_buf = cfg.reset_act_buf
        self.benchmark = cfg.benchmark
        self.bench = make_benchmark(cfg.benchmark_type, polyak=cfg.benchmark_polyak)
        self.current_step = 0
        self.running = False
        self.seed = None
        self.options = None
        self._schedule = ElasticSchedule(
            time_step_duration=cfg.time_step_duration, start_obs_capture=cfg.start_obs_capture,
            time_step_timeout_factor=cfg.time_step_timeout_factor)
        self._captured: tuple | None = None
        self._results: dict[int, tuple] = {}  # completion count -> what step() returns of it
        self._awaited: int | None = None  # the completion a step started from an offer makes
        self._step_timed_out = False
        self._ts_running = False
        self._user_stops = 0  # safe actions sent as an exception went to the user's thread
        self._stops_at_handover = 0  # _user_stops when the last action was handed over
        self.stalls = 0
        """How often the watchdog sent the default action because step() came too late."""
        self.timeouts = 0
        """How many time-steps timed out (each also a warning, as in rtgym)."""

        self._runtime = RosRuntime(node_name=cfg.node_name, namespace=cfg.namespace,
                                   use_sim_time=cfg.use_sim_time, domain_id=cfg.domain_id,
                                   name_claim=self._name_claim)
        self._closed = False  # the node and its threads run: close() tears them down
        try:
            self._stall_monitor = StallMonitor(
                self._runtime, use_sim_time=cfg.use_sim_time,
                stall_timeout=cfg.clock_stall_timeout, on_stall=cfg.on_clock_stall)
            self._stop_robot = SafeStop(self._runtime, interface=lambda: self.interface,
                                        safe_action=self.safe_action)
            self._runtime.on_failure = self._stop_robot.stop_for_good
            _live_envs.add(self)
            gil.acquire(self, cfg.gil_switch_interval)
            self.interface: RealTimeGymInterface = self._runtime.call(self._start_interface)
            self._check_action_buffer_memory()
        except BaseException:  # Ctrl-C included: no node and no thread outlive a failed make
            self.close()
            raise
        self.action_space = self.interface_action_space
        self.observation_space = self._get_observation_space()
        self.init_action_buffer()
        gc_freeze.acquire(self, cfg.gc_freeze)

    def _check_action_buffer_memory(self) -> None:
        """Refuse an action buffer memory cannot hold: it keeps the last act_buf_len actions."""
        check_fits_in_memory(self.act_buf_len * sys.getsizeof(np.array(self.default_action)),
                             key="config['act_buf_len']",
                             what=f'{self.act_buf_len} buffered actions')

    # -- executor-thread side ---------------------------------------------------------------

    def _start_interface(self) -> RealTimeGymInterface:
        """Executor thread: build the interface and the timers that run the time-step."""
        cfg = self.config
        timer_slack.set_for_this_thread(cfg.timer_slack)  # the deadlines are slept here
        node = self._runtime.node
        interface = cfg.interface(*cfg.interface_args, **cfg.interface_kwargs)
        if getattr(interface, 'wants_io_node', False):
            interface.bind_node(node, io_node=self._runtime.io_node)
        else:
            interface.bind_node(node)
        self.default_action = interface.get_default_action()
        self.interface_action_space = interface.get_action_space()
        self.interface_observation_space = interface.get_observation_space()
        self._log = DeferredLog(node)
        self._lockstep = lockstep = getattr(interface, 'lockstep', False)
        if lockstep:
            self._timer = ClockDeadline(now=self._runtime.now, post=self._post_quietly,
                                        inline_wait=_LOCKSTEP_INLINE_WAIT)
            self._runtime.add_clock_listener(self._timer.on_clock)
        else:
            self._timer = DeadlineTimer(node, lead=cfg.timer_lead,
                                        last_stretch=cfg.timer_last_stretch)
        self._watchdog = Watchdog(self._on_stall,
                                  name=f'rtgym_ros:{self._runtime.node_name}_watchdog')
        self._runner = TimeStepRunner(
            schedule=self._schedule, timer=self._timer,
            send_control=self._send_control, capture=self._capture,
            on_start=self._on_step_start, on_error=self._stop_robot,
            on_complete=self._on_complete, bench=self.bench if self.benchmark else None,
            handover_wait=self._handover_wait(lockstep=lockstep),
            advance=interface.advance_to if lockstep else None,
            executor_turn=self._runtime.executor_turn,
            turn_patience=(_no_patience if lockstep or self.config.use_sim_time
                           else self._runtime.turn_patience),
            executor_work=self._runtime.executor_work_check(),
            may_continue=self._may_continue)
        self._jump_handle = node.get_clock().create_jump_callback(
            JumpThreshold(min_forward=None, min_backward=Duration(nanoseconds=-1),
                          on_clock_change=False),
            post_callback=self._on_clock_jump)
        return interface

    def _post_quietly(self, function: Callable[..., Any], *args: Any) -> None:
        """Io thread: run ``function(*args)`` on the executor thread; nothing once closed."""
        try:
            self._runtime.post(function, *args)
        except RuntimeClosedError:
            pass

    def _handover_wait(self, *, lockstep: bool) -> float:
        """
        How long the executor thread waits for the next action itself after t_end.

        As long as the step may still start on time. In lockstep, where the agent's time is
        free, as long as it waits for ``/clock`` itself. Never under a free-running sim time,
        whose T is no wall time.
        """
        if lockstep:
            return _LOCKSTEP_INLINE_WAIT
        if self.config.use_sim_time:
            return 0.0
        cfg = self.config
        return min(cfg.time_step_duration * (1.0 + cfg.time_step_timeout_factor), 0.1)

    def _send_control(self, action: Any) -> None:
        if self._stopped_since_handover():
            return
        control = self._control_of(action)  # act_prepro_func: it may take a while
        if self._stopped_since_handover():  # the robot keeps the safe action, sent again
            self._stop_robot()  # (it also tells RosEnv that it is the robot's target)
            return
        self.interface.send_control(control)
        if self._stopped_since_handover():  # the stop came while it went out: end on the stop
            self._stop_robot()
            return
        watchdog = self.config.watchdog_timeout
        if not watchdog:
            return
        if self._lockstep:  # the paused simulator waits for this step: nobody stalls
            self._watchdog.disarm()
        else:  # this time-step must end, and the next action come, in time
            self._watchdog.arm(self._schedule.time_step_duration + watchdog)

    def _control_of(self, action: Any) -> Any:
        """Executor thread: what ``send_control`` gets for ``action`` (``act_prepro_func``)."""
        return self.act_prepro_func(action) if self.act_prepro_func else action

    def _capture(self) -> None:
        obs, rew, terminated, info = self.interface.get_obs_rew_terminated_info()
        if self.obs_prepro_func and self._prepro_at_capture:
            obs = self.obs_prepro_func(obs)
        self._captured = (obs, rew, terminated, info, self._step_timed_out)

    def _on_step_start(self, start: StepStart) -> None:
        """
        Executor thread: count a time-out and warn about it, once.

        One line, rtgym's ``UserWarning`` (rtgym users filter it by category and text), without
        the source line Python would print under it. No ROS log line besides: in a terminal
        it would print every time-out twice; ``/diagnostics`` counts time-outs and
        ``info['timed_out']`` marks the step.
        """
        self._step_timed_out = start is TIMED_OUT
        if self._step_timed_out:
            self.timeouts += 1
            _warn_unregistered('Time-step timed out. Elapsed since last time-step: '
                               f'{self._schedule.late_by}')
            self._check_clock_step()

    def _check_clock_step(self) -> None:
        """At a time-out under sim time: say so if /clock moves in steps too coarse for T."""
        step = self._runtime.clock_step()
        elasticity = self._schedule.time_step_timeout
        if step is not None and step > elasticity and not self._lockstep:
            self._log.warning('clock step', (
                f'/clock moves {step:.4g} s at a time, more than a time-step may start late '
                f'({elasticity:.4g} s = T x time_step_timeout_factor): time-steps time out by '
                'the clock, not the agent; publish /clock more often, or raise '
                'time_step_timeout_factor'))

    def _on_clock_jump(self, jump: TimeJump) -> None:
        """
        Follow a clock that went back; runs on the thread that sets the clock (io, sim time).

        Then, under sim time, look for a second /clock publisher (one that came mid-episode).
        """
        self._follow_clock_jump(jump.delta.nanoseconds * 1e-9)
        if self.config.use_sim_time and not self._warned_clock_publishers:
            self._warn_about_clock_publishers()

    def _follow_clock_jump(self, delta: float) -> None:
        """
        Move the schedule (and the interface's data) with a clock that went back by ``delta``.

        Not back before the running time-step's start (jitter, not a reset): nothing moves, as
        rcl moves a ROS-time timer only when the clock went back before its last call.
        """
        interface = getattr(self, 'interface', None)
        getattr(interface, 'on_clock_back', lambda _: None)(delta)
        said = not self._resetting  # a reset that takes the clock back is what was asked for
        if self._runtime.now() > self._schedule.t_start:
            if said:
                self._log.warning('clock jitter', f'clock went back by {-delta:.3f} s within '
                                  'the running time-step: schedule and data kept')
            return
        if said:
            self._log.warning('clock jump',
                              f'clock jumped by {delta:.3f} s: schedule moved with it')
        getattr(interface, 'on_clock_jump', lambda _: None)(delta)
        if self._runtime.on_executor_thread():
            self._runner.on_clock_jump(delta)
        elif self._runtime.alive():
            self._runtime.post(self._runner.on_clock_jump, delta)

    def _on_complete(self, completion: int) -> None:
        """
        Executor thread, at t_end: keep the step's result; arm the watchdog.

        The result is kept under the completion count: a time-step started at once from an
        offered action captures again, before a slow user's thread may have read this one.
        """
        self._results[completion] = self._captured
        self._results.pop(completion - _RESULTS_KEPT, None)
        if self.config.watchdog_timeout:  # the agent must call step() within watchdog_timeout
            self._watchdog.arm(self.config.watchdog_timeout)

    def _may_continue(self) -> bool:
        """
        Say whether the next time-step may start with the offered action (executor, at t_end).

        As step() decides it (rtgym: no action after the episode's end): neither terminated
        nor at ``ep_max_length``, and no truncation rule that needs the user's thread.
        """
        terminated = self._captured[2]
        return (self.running and not terminated and self.current_step + 1 < self.ep_max_length
                and not self._may_truncate())

    def _may_truncate(self) -> bool:
        """Say whether :meth:`_truncation_reason` may end an episode (then step() decides)."""
        return False

    def _stopped_since_handover(self) -> bool:
        """
        Executor thread: say whether the robot was stopped since the action was handed over.

        By close(), or by an exception that went to the user's thread (Ctrl-C, a stall): no
        action handed over before may follow the safe one. (The watchdog's stop is not final:
        the agent may still be stepping, and the action it handed over goes out.)
        """
        return self._stop_robot.final or self._user_stops != self._stops_at_handover

    def _on_stall(self) -> None:
        """Watchdog thread: no new command in time (stalled agent, busy executor, no /clock)."""
        self.stalls += 1
        self._runtime.logger.warning(
            f'no new action for {self.config.watchdog_timeout} s (wall) after the last '
            'time-step should have ended: sending the safe action')
        self._stop_robot()

    def _pause_interface(self) -> None:
        """Executor thread: a paused env is not a stalled agent; the interface stops the robot."""
        self._watchdog.disarm()
        self.interface.wait()

    def _reset_interface(self, seed: int | None, options: dict | None) -> tuple:
        self._watchdog.disarm()
        self._resetting = True
        try:
            return self.interface.reset(seed=seed, options=options)
        finally:
            self._resetting = False

    # -- user-thread side ---------------------------------------------------------------------

    def _get_observation_space(self) -> spaces.Space:
        space = self.interface_observation_space
        if self.act_in_obs:
            space = spaces.Tuple((*space.spaces,
                                  *((self.interface_action_space,) * self.act_buf_len)))
        return space

    def _wait_time_step(self) -> None:
        """Wait until the running time-step completes; re-raise what failed in it."""
        if not self._ts_running:
            return
        if self._awaited is not None:
            self._runner.rearm(self._awaited)
            self._awaited = None
        done = self._runner.done
        try:
            if not done.wait(POLL):  # nearly every time-step completes within the first poll
                self._stall_monitor.wait(
                    done, step_end=self._schedule.t_end, nudge=self._nudge,
                    asked=getattr(self.interface, 'describe_advance', None) if self._lockstep
                    else None)
        except BaseException:  # Ctrl-C, a stalled clock, a closed env: stop the robot first
            self._withdraw_offer()  # no offered action may follow the safe one
            self._stop_for_the_user()
            raise
        if self._closed:
            self._withdraw_offer()
            raise RuntimeError('the env was closed while step() or reset() waited')
        if self._runtime.failure is not None:  # the io thread: no data comes any more
            self._withdraw_offer()
            self.running = False
            raise RuntimeClosedError(f'{self._runtime.dead_reason()}; the robot was sent its '
                                     'safe action and gets no other: close the env')
        self._ts_running = False
        error, self._runner.error = self._runner.error, None
        if error is not None:
            # The offer, else the next episode's first time-step would start it. Nothing to
            # await if the failed time-step had started from it: no _withdraw_offer() here.
            self._runner.withdraw()
            self.running = False
            raise RuntimeError(f'the time-step failed on the executor thread: {error!r}; '
                               'the default action was sent') from error

    def _withdraw_offer(self) -> None:
        """User thread, leaving step() by an exception: take the offered action back."""
        taken_at = self._runner.withdraw()
        if taken_at is not None:  # the next step started with it: a later wait is for that one
            self._awaited = taken_at + 1

    def _nudge(self) -> None:
        """User thread, waiting without progress: a lockstep simulator is asked again."""
        if getattr(self.interface, 'lockstep', False) and self._runtime.alive():
            self._runtime.post(self.interface.resend_step)

    def _warn_about_clock_publishers(self) -> None:
        """
        Several /clock publishers make sim time jump back and forth: say so, once.

        Looked at on reset() and on each jump back of the clock (any thread).
        """
        publishers = self._runtime.count_publishers('/clock')
        if publishers > 1:
            self._warned_clock_publishers = True
            message = (f'{publishers} nodes publish /clock: sim time will jump between them '
                       '(time-outs, clock jumps); run one simulator per ROS domain')
            warnings.warn(message, RuntimeWarning, stacklevel=3)
            self._runtime.logger.warning(message)

    def _on_executor(self, function: Callable[..., Any], *args: Any) -> Any:
        """Run an interface call on the executor thread; if it fails, stop the robot first."""
        try:
            return self._runtime.call(function, *args)
        except BaseException:  # Ctrl-C included: the robot must not keep its last command
            self._stop_for_the_user()
            raise

    def _on_user_thread(self, function: Callable[..., Any], *args: Any) -> Any:
        """
        Run user code, or a check of the user's input, here; if it fails, stop the robot first.

        ``obs_prepro_func``, or a check that refuses an action: in reset() the robot still has
        its last command and the watchdog is disarmed. (``step()`` does the same inline: a
        call more per step costs the user's thread, whose code is cold after each wait.)
        """
        try:
            return function(*args)
        except BaseException:
            self._stop_for_the_user()
            raise

    def _stop_for_the_user(self) -> None:
        """User thread, an exception on its way to the user: stop the robot, for this episode."""
        self._user_stops += 1  # before the safe action: _send_control() looks after publishing
        self._stop_robot()

    def _run_time_step(self, action: Any) -> None:
        self._ts_running = True
        self._stops_at_handover = self._user_stops
        self._runner.hand_over(action, self._runtime.post)

    def _first_observation(self, obs: Any) -> Any:
        """Return reset()'s observation: rtgym's tuple, action buffer appended, then prepro."""
        if self.act_in_obs:
            obs = list(obs) + self._buffered_actions()
        if self.obs_prepro_func:
            obs = self.obs_prepro_func(obs)
        return tuple(obs)

    def _step_observation(self, obs: Any) -> Any:
        """Return step()'s observation (prepro applied at capture): rtgym's tuple + buffer."""
        return (*obs, *self._buffered_actions()) if self.act_in_obs else tuple(obs)

    def _buffered_actions(self) -> list:
        """
        Return copies of the buffered actions.

        The buffer holds the env's own objects (the one default action at every reset, and
        :meth:`_owned_action`'s copies): observations that shared them would change when one
        of them is changed, and Gymnasium's ``check_env`` refuses that.
        """
        return [_copied(action) for action in self.act_buf]

    def _owned_action(self, action: Any) -> Any:
        """
        User thread, step(): return the env's own copy of ``action``, to buffer and hand over.

        A caller may write its next action into the same array once step() returned: while
        the action is still in the action buffer, or before it went out (a step() called
        after t_end hands it over and returns before the executor thread sends it). Made after
        step()'s wait, in which the caller cannot change it (an offered action is sent during
        that wait): next to the observation's copy, which then finds numpy's code warm; made
        before the wait, each step paid for two cold copies.
        """
        return _copied(action)

    def _truncation_reason(self, info: Any) -> str | None:
        """
        Return why the episode ends here besides ``ep_max_length`` (None: it goes on).

        Subclasses that end episodes here also say so in :meth:`_may_truncate`.
        """
        return None

    def _last_action_on_reset(self, action: Any) -> Any:
        """Return the action ``reset()`` sends again under ``last_act_on_reset`` (rtgym's)."""
        return action

    def init_action_buffer(self) -> None:
        for _ in range(self.act_buf_len):
            self.act_buf.append(self.default_action)

    @property
    def is_waiting(self) -> bool:
        """Say whether ``wait()`` was called and no time-step broke the elasticity since."""
        return self._schedule.expecting_restart

    def now(self) -> float:
        """Return the time on the env's clock in seconds (``/clock`` under ``use_sim_time``)."""
        return self._runtime.now()

    @property
    def time_initialized(self) -> bool:
        return self._schedule.initialized

    @property
    def time_step_duration(self) -> float:
        return self._schedule.time_step_duration

    @property
    def start_obs_capture(self) -> float:
        return self._schedule.start_obs_capture

    @property
    def time_step_timeout_factor(self) -> float:
        return self._schedule.time_step_timeout_factor

    @property
    def time_step_timeout(self) -> float:
        return self._schedule.time_step_timeout

    def reset(self, *, seed: int | None = None,
              options: dict | None = None) -> tuple[tuple, dict]:
        """Start an episode: apply the default (or last) action and return the first obs."""
        super().reset(seed=seed)
        self._check_open()
        if self.benchmark:
            self.bench.start_reset_time()
        self._wait_time_step()
        if self.benchmark:
            self.bench.end_reset_join_time()
        self.running = True
        self.seed = seed
        self.options = options
        self.current_step = 0
        if self.reset_act_buf:
            self.init_action_buffer()
        elif not self.last_act_on_reset:
            self.act_buf[-1] = self.default_action
        else:
            self.act_buf[-1] = self._last_action_on_reset(self.act_buf[-1])
        self._runner.release()
        gc_freeze.settle(self)
        if self.config.use_sim_time and not self._schedule.initialized:
            # Before the interface reads its first observation: until /clock comes the clock
            # says 0 (rclpy: unset), and a simulator's stamps would look far in the future.
            self._runtime.wait_for_clock(timeout=self.config.clock_wait_timeout)
        obs, info = self._on_executor(self._reset_interface, seed, options)
        obs = self._on_user_thread(self._first_observation, obs)
        if not self._schedule.initialized:
            self._schedule.initialize(self._runtime.now())
        if self.config.use_sim_time and not self._warned_clock_publishers:
            self._warn_about_clock_publishers()
        self._run_time_step(self.act_buf[-1])
        if self.benchmark:
            self.bench.end_reset_time()
        return obs, info

    def step(self, action: Any) -> tuple[tuple, Any, bool, bool, dict]:
        """
        Wait for the running time-step, return its observation, start the next with action.

        Real-time: call it again before the end of the next time-step, or the step times out.
        """
        self._check_open()
        if self.benchmark:
            self.bench.start_step_time()
        runner = self._runner
        if self.running and self._ts_running:
            self._stops_at_handover = self._user_stops
            runner.offer(action)  # the executor thread starts the next step with it at t_end
        self._wait_time_step()
        taken_at = runner.withdraw()
        if taken_at is not None:  # running already: _may_continue said what step() says
            self._ts_running = True
            self._awaited = taken_at + 1
        if self.benchmark:
            self.bench.end_step_join_time()
        try:  # as _on_user_thread does, without a call per step
            action = self._owned_action(action)
        except BaseException:
            self._stop_for_the_user()
            raise
        self.current_step += 1
        self.act_buf.append(action)
        if not self.running:
            raise RuntimeError('The episode is terminated or truncated. '
                               'Call reset before step.')
        completion = runner.completed if taken_at is None else taken_at
        obs, rew, terminated, info, timed_out = self._results.pop(completion)
        terminated = bool(terminated)
        if isinstance(info, dict):  # a copy: the interface may keep and reuse its own
            info = {**info, 'timed_out': timed_out}
        reason = None
        if not terminated:
            reason = ('ep_max_length' if self.current_step >= self.ep_max_length
                      else self._truncation_reason(info))
        truncated = reason is not None
        if truncated and isinstance(info, dict):
            info['truncated_reason'] = reason
        if taken_at is None:  # else the next time-step runs already, started from the offer
            if not (terminated or truncated):
                self._run_time_step(action)
            else:
                self._runner.release()
                self.running = False
                if self.wait_on_done:
                    self.wait()
        try:
            obs = self._step_observation(obs)
        except BaseException:
            self._stop_for_the_user()
            raise
        if self.benchmark:
            self.bench.end_step_time()
        return obs, rew, terminated, bool(truncated), info

    def stop(self) -> None:
        """Wait for the running time-step to complete."""
        self._check_open()
        self._wait_time_step()

    def wait(self) -> None:
        """Pause the env: the next time-step restarts the clock without a time-out warning."""
        self._check_open()
        self._wait_time_step()
        self._schedule.expect_restart()
        self._runner.release()
        self._on_executor(self._pause_interface)

    def benchmarks(self) -> dict:
        """Return timing statistics (:mod:`rtgym_ros.core.timing`); needs ``benchmark=True``."""
        if not self.benchmark:
            raise BenchmarkDisabledError(
                'The benchmark option is not set. Set benchmark=True in the configuration '
                'dictionary of the rtgym environment')
        return self.bench.get_benchmark_dict()

    def render(self, mode: str = 'human', join_thread: bool = False) -> Any:
        """
        Call the interface's rendering on the executor thread.

        Return its result, or None under ``render_mode='human'`` (Gymnasium's rule: a human
        render draws and returns nothing). ``mode`` is rtgym's argument, ignored as by rtgym.
        """
        self._check_open()
        if join_thread:
            self._wait_time_step()
        self._runner.release()
        result = self._on_executor(self.interface.render)
        return None if self.render_mode == 'human' else result

    def safe_action(self) -> Any:
        """Return what stops the robot now: the interface's safe action, else the default."""
        get_safe_action = getattr(self.interface, 'get_safe_action', None)
        if get_safe_action is None:  # an rtgym interface, not derived from ours
            return self.default_action
        return get_safe_action(self.default_action)

    def set_default_action(self, default_action: Any) -> None:
        """
        Set the action sent by the next ``reset()`` (and on close, errors, stalls).

        It is what stops the robot, sent unchecked when it must be: it has to be an action of
        the interface's space (finite, in bounds, of its shape), checked here.
        """
        self._check_open()
        space = self.interface_action_space
        value = default_action
        if isinstance(space, spaces.Box):  # any float array or list of the right values
            try:
                # A copy: the caller may change its own array, not the robot's safe action.
                value = np.array(default_action, dtype=space.dtype)
            except (TypeError, ValueError):
                pass  # refused below, as found
        else:
            try:
                value = _copied(default_action)
            except Exception:
                pass  # refused below, as found, unless the space holds it
        if not space.contains(value):
            raise ValueError(f'set_default_action: expected an action of {space} (finite, in '
                             f'its bounds), got {short_repr(default_action)}')
        self.default_action = value

    def set_time_step_duration(self, time_step_duration: float,
                               time_step_timeout_factor: float | None = None) -> None:
        """Change T (and optionally the elasticity) from the next time-step on."""
        self._check_open()
        self._wait_time_step()
        self._schedule.set_time_step_duration(time_step_duration, time_step_timeout_factor)

    def set_start_obs_capture(self, start_obs_capture: float) -> None:
        """Change c from the next time-step on."""
        self._check_open()
        self._wait_time_step()
        self._schedule.set_start_obs_capture(start_obs_capture)

    def set_ep_max_length(self, ep_max_length: int) -> None:
        """Change the episode length limit from the next step on."""
        self._check_open()
        self._wait_time_step()
        self.ep_max_length = ep_max_length

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError('the env is closed')

    def close(self) -> None:
        """
        Send the safe action at once, then stop the time-step and tear the node down.

        The safe action goes out from this thread before anything waits on the executor
        thread, which may be busy in an interface call; each teardown wait is bounded.
        Idempotent.
        """
        if self._closed:
            return
        runtime = self._runtime
        # No call between the mark and the try: CPython raises a Ctrl-C at a call, and one
        # raised there would leave an env marked closed whose robot was never stopped.
        self._closed = True
        try:
            _live_envs.discard(self)
            if hasattr(self, '_runner'):
                self._watchdog.close()
                getattr(self.interface, 'abort_waits', lambda: None)()
                if not runtime.alive():
                    raise TimeoutError('the executor thread is gone')
                self._runner.release()
                runtime.call(self._shutdown_interface, timeout=_SAFE_ACTION_BOUND)
        except TimeoutError:
            # The executor thread is busy (an interface call that blocks): stop the robot from
            # here, and let no action the executor thread still holds follow the safe one.
            self._stop_robot.final_stop(why=f'the executor thread stayed busy for '
                                        f'{_SAFE_ACTION_BOUND} s while closing')
        except Exception as error:
            runtime.logger.error(f'error while closing the interface: {error!r}')
        except BaseException as error:  # Ctrl-C while close() waits: the robot first
            self._stop_robot.final_stop(why=f'close() was interrupted ({error!r})')
            raise
        finally:
            try:
                try:
                    self._linger_for_delivery()
                finally:  # a Ctrl-C in the linger still tears the node down
                    runtime.close(timeout=_CLOSE_TIMEOUT)
            finally:  # a Ctrl-C in the teardown leaves the process as no env had been there
                gil.release(self)
                gc_freeze.release(self)

    def _linger_for_delivery(self) -> None:
        """Give the safe action time to reach the robot before the node goes (bounded)."""
        linger = getattr(getattr(self, 'interface', None), 'linger_for_delivery', None)
        if linger is None:
            return
        try:
            linger(_DELIVERY_LINGER)
        except Exception as error:
            self._runtime.logger.error(f'could not wait for the safe action to go out: {error!r}')

    def _shutdown_interface(self) -> None:
        """Executor thread: no more time-steps, robot in its safe state, interface closed."""
        self._runner.abort()
        self._jump_handle.unregister()
        self._stop_robot()
        try:
            self.interface.close()
        finally:
            self._timer.destroy()
            self._log.destroy()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


_live_envs: 'weakref.WeakSet[RealTimeEnv]' = weakref.WeakSet()


def close_all() -> None:
    """
    Close every env still open (at interpreter exit, before rclpy's own teardown).

    Every robot gets its safe action first, for good, before any env is closed: DDS can block
    a node's teardown for good (eProsima/Fast-DDS#6502), and the robots of the envs after it
    would keep their last command. One that raises (a second Ctrl-C in its teardown) keeps no
    other from closing: the first exception is raised once every env is closed. The loop runs
    inside the ``try`` and an env leaves the list once its ``close()`` returned or failed by
    itself: a Ctrl-C (or a SIGTERM's ``SystemExit``) between two closes, or before one began,
    skips none (a ``close()`` already under way returns at once when called again).
    """
    pending = list(_live_envs)
    failed: BaseException | None = None
    try:
        for env in pending:
            env._stop_robot.stop_for_good()
    except BaseException as error:  # a Ctrl-C: each close() below stops its robot too
        failed = error
    while pending:
        try:
            while pending:
                pending[-1].close()
                pending.pop()
        except BaseException as error:
            failed = failed or error
            if not isinstance(error, (KeyboardInterrupt, SystemExit)):
                pending.pop()  # its own failure, not a Ctrl-C or SIGTERM: not tried again
    if failed is not None:
        raise failed


def _copied(action: Any) -> Any:
    """Return a copy of ``action`` that shares nothing with it (an array's own ``copy``)."""
    return action.copy() if isinstance(action, np.ndarray) else copy.deepcopy(action)


def _warn_unregistered(message: str) -> None:
    """
    Warn as rtgym does (a UserWarning from this module), but keep no record of it.

    ``warnings.warn`` remembers every text it showed in the module's ``__warningregistry__``
    and each time-out's text is new (it holds the elapsed time): one entry per time-out,
    forever, in a process that may run for days. Line 0: Python prints no source line under
    the warning (it would be this call, which tells a user nothing), and reads no file for it
    on the executor thread.
    """
    warnings.warn_explicit(message, UserWarning, __file__, 0, module=__name__, registry=None)


def _no_patience() -> float:
    """
    Sim time: the executor's loop takes a due turn at the next step's end.

    Its deadlines are ROS timers, waited for in the loop; steps run back to back only when
    ``/clock`` is already past them, and no wall-time deadline has room for a turn.
    """
    return 0.0
