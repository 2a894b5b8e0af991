"""The time-step runner on a fake deadline timer: order of calls, capture instants, errors."""

import queue
import threading

import pytest

from rtgym_ros.core.schedule import ElasticSchedule, StepStart
from rtgym_ros.core.time_step import TimeStepRunner
from rtgym_ros.core.timing import PolyakBenchmark

T = 0.05
C = 0.03


class FakeDeadlineTimer:
    """The DeadlineTimer interface on a hand-advanced clock (the scheduling logic under test)."""

    def __init__(self, now: float = 0.0) -> None:
        self.time = now
        self.target = None
        self.callback = None

    @property
    def armed(self) -> bool:
        return self.target is not None

    def now(self) -> float:
        return self.time

    def arm(self, target, callback, turn=False):
        self.target, self.callback = target, callback
        if target <= self.time:
            self._fire()

    def retarget(self, target):
        if self.target is not None:
            self.target = target

    def cancel(self):
        self.target = self.callback = None

    def advance_to(self, time: float) -> None:
        self.time = time
        while self.target is not None and self.target <= self.time:
            self._fire()

    def _fire(self):
        callback = self.callback
        self.target = self.callback = None
        callback()


class Recorder:
    def __init__(self, timer):
        self.timer = timer
        self.events = []
        self.starts = []
        self.fail_capture = False

    def send(self, action):
        self.events.append(('send', action, self.timer.now()))

    def capture(self):
        if self.fail_capture:
            raise ValueError('sensor exploded')
        self.events.append(('capture', None, self.timer.now()))

    def safe(self):
        self.events.append(('safe', None, self.timer.now()))


def make(now=10.0, bench=None):
    timer = FakeDeadlineTimer(now)
    schedule = ElasticSchedule(time_step_duration=T, start_obs_capture=C,
                               time_step_timeout_factor=1.0)
    schedule.initialize(now)
    recorder = Recorder(timer)
    runner = TimeStepRunner(schedule=schedule, timer=timer, send_control=recorder.send,
                            capture=recorder.capture, on_start=recorder.starts.append,
                            on_error=recorder.safe, bench=bench)
    return runner, timer, recorder


def test_send_then_capture_at_t_co_then_done_at_t_end():
    runner, timer, recorder = make()
    runner.prepare()
    runner.start('a')
    assert recorder.events == [('send', 'a', 10.0)]
    assert not runner.done.is_set()
    timer.advance_to(10.0 + C - 1e-6)
    assert len(recorder.events) == 1
    timer.advance_to(10.0 + C)
    assert recorder.events[-1] == ('capture', None, 10.0 + C)
    assert not runner.done.is_set()
    timer.advance_to(10.0 + T)
    assert runner.done.is_set()
    assert recorder.starts[0] is StepStart.ELASTIC


def test_a_capture_at_the_end_completes_without_arming_another_deadline():
    """start_obs_capture == T (rtgym's benchmark setting): one deadline per step, not two."""
    runner, timer, recorder = make()
    runner.schedule.set_start_obs_capture(T)
    arms = []
    arm = timer.arm
    timer.arm = lambda target, callback, turn=False: (arms.append(target), arm(target, callback))
    runner.prepare()
    runner.start('a')
    timer.advance_to(10.0 + T)
    assert recorder.events[-1] == ('capture', None, 10.0 + T) and runner.done.is_set()
    assert arms == [10.0 + T]


def test_late_start_captures_at_once_when_t_co_is_past():
    runner, timer, recorder = make()
    timer.time = 10.0 + 0.9 * T  # the agent is late, still within elasticity
    runner.prepare()
    runner.start('a')
    assert [event for event, _, _ in recorder.events] == ['send', 'capture']
    assert not runner.done.is_set()  # t_end = 10.05 is still ahead
    timer.advance_to(10.0 + T)
    assert runner.done.is_set()


def test_timed_out_start_is_reported():
    runner, timer, recorder = make()
    timer.time = 10.0 + 2 * T
    runner.prepare()
    runner.start('a')
    assert recorder.starts[0] is StepStart.TIMED_OUT
    timer.advance_to(10.0 + 2 * T + C)
    assert recorder.events[-1] == ('capture', None, pytest.approx(10.0 + 2 * T + C))


def test_error_in_capture_sends_safe_action_and_releases_the_waiter():
    runner, timer, recorder = make()
    recorder.fail_capture = True
    runner.prepare()
    runner.start('a')
    timer.advance_to(10.0 + T)
    assert runner.done.is_set()
    assert isinstance(runner.error, ValueError)
    assert recorder.events[-1][0] == 'safe'
    assert not timer.armed


def test_backward_clock_jump_moves_the_pending_deadline():
    runner, timer, recorder = make()
    runner.prepare()
    runner.start('a')
    timer.time = 10.0 - 50.0  # the simulator was reset: time went back by 50 s
    runner.on_clock_jump(-50.0)
    timer.advance_to(10.0 - 50.0 + C)
    assert recorder.events[-1][0] == 'capture'
    timer.advance_to(10.0 - 50.0 + T)
    assert runner.done.is_set()


def _ended_then_rewound(back: float):
    """Step 'a' ended on the clock; then the clock went back by ``back`` s."""
    runner, timer, recorder = make()
    runner.prepare()
    runner.start('a')
    timer.advance_to(10.0 + T)
    timer.time = 10.0 + T - back
    return runner, timer, recorder


def test_a_step_started_on_the_rewound_clock_before_the_jump_callback_stays_put():
    # A fast simulator's clock ran on past the old schedule before the executor thread got to
    # the jump callback: step 'b' started on the new clock, timed out.
    runner, timer, recorder = _ended_then_rewound(1.0)
    timer.time = start = 10.0 + 4 * T
    runner.prepare()
    runner.start('b')
    assert recorder.starts[-1] is StepStart.TIMED_OUT
    runner.on_clock_jump(-1.0)
    assert runner.schedule.t_start == start
    timer.advance_to(start + C - 1e-6)
    assert recorder.events[-1][:2] == ('send', 'b')  # no capture before t_co
    timer.advance_to(start + C)
    assert recorder.events[-1] == ('capture', None, start + C)


def test_a_step_placed_at_the_old_t_end_before_the_jump_callback_moves_with_the_clock():
    runner, timer, recorder = _ended_then_rewound(50.0)
    runner.prepare()
    runner.start('b')  # elastic: at the old t_end, 50 s ahead of the clock
    runner.on_clock_jump(-50.0)
    assert runner.schedule.t_start == pytest.approx(10.0 + T - 50.0)
    timer.advance_to(10.0 + T - 50.0 + C)
    assert recorder.events[-1][0] == 'capture'


def test_abort_cancels_and_releases():
    runner, timer, recorder = make()
    runner.prepare()
    runner.start('a')
    runner.abort()
    assert runner.done.is_set()
    assert not timer.armed


def test_benchmark_hooks_are_called():
    bench = PolyakBenchmark(polyak=0.5)
    runner, timer, _ = make(bench=bench)
    for _ in range(3):
        runner.prepare()
        runner.start('a')
        timer.advance_to(runner.schedule.t_end)
    stats = bench.get_benchmark_dict()
    assert stats['time_step_duration'][0] is not None
    assert stats['get_obs_duration'][0] is not None
    assert stats['send_control_duration'][0] is not None


def test_hand_over_chains_thousands_of_steps_without_recursion():
    """
    Loop, not nest, when each completion takes the next action directly.

    That happens when deadlines are always past (1 kHz, lead > T).
    """
    timer = FakeDeadlineTimer(10.0)
    schedule = ElasticSchedule(time_step_duration=T, start_obs_capture=T,
                               time_step_timeout_factor=1e9)
    schedule.initialize(10.0)
    recorder = Recorder(timer)
    runner = TimeStepRunner(schedule=schedule, timer=timer, send_control=recorder.send,
                            capture=recorder.capture, on_start=recorder.starts.append,
                            on_error=recorder.safe, handover_wait=1.0)
    tasks = queue.Queue()  # the executor's task queue, served below by this thread
    count = 2000

    def agent():
        for index in range(1, count):
            assert runner.done.wait(5.0)
            runner.hand_over(index, lambda function, action: tasks.put((function, action)))
        assert runner.done.wait(5.0)
        runner.release()

    thread = threading.Thread(target=agent)
    timer.time = 10.0 + 1e6  # every deadline is already past
    runner.prepare()
    thread.start()
    runner.start(0)
    while thread.is_alive() or not tasks.empty():
        try:
            function, action = tasks.get(timeout=0.1)
        except queue.Empty:
            continue
        function(action)  # the executor's turn: a posted start (after a long chain)
    sent = [action for event, action, _ in recorder.events if event == 'send']
    assert runner.error is None
    assert sent == list(range(count))  # all started, in order, none lost, no recursion


def test_hand_over_posts_when_the_executor_is_not_listening():
    runner, _, recorder = make()
    posted = []
    runner.hand_over('a', lambda function, action: posted.append((function, action)))
    assert posted == [(runner.start, 'a')] and not runner.done.is_set()


class LoopTurnTimer(FakeDeadlineTimer):
    """A deadline armed with ``turn`` is fired by the executor's loop (a queue), not inline."""

    def __init__(self, now: float, loop: queue.Queue) -> None:
        super().__init__(now)
        self.loop = loop
        self.turns = 0

    def arm(self, target, callback, turn=False):
        if not turn:
            super().arm(target, callback)
            return
        self.turns += 1
        self.target, self.callback = target, callback
        self.loop.put((lambda _: self._fire(), None))


def _chain(count: int, *, timer_gives_turns: bool = False, **turn) -> tuple[int, list, int]:
    """
    Run ``count`` back-to-back steps (deadlines past); return what the executor's loop saw.

    The number of actions posted to it, the order of sends, captures and the loop's turns,
    and how many deadlines were armed with a turn.
    """
    tasks = queue.Queue()
    timer = LoopTurnTimer(10.0, tasks) if timer_gives_turns else FakeDeadlineTimer(10.0)
    schedule = ElasticSchedule(time_step_duration=T, start_obs_capture=T,
                               time_step_timeout_factor=1e9)
    schedule.initialize(10.0)
    recorder = Recorder(timer)
    runner = TimeStepRunner(schedule=schedule, timer=timer, send_control=recorder.send,
                            capture=recorder.capture, on_start=recorder.starts.append,
                            on_error=recorder.safe, handover_wait=1.0, **turn)
    posted = []

    def post(function, action):
        posted.append(action)
        tasks.put((function, action))

    def agent():
        for index in range(1, count):
            assert runner.done.wait(5.0)
            runner.hand_over(index, post)
        assert runner.done.wait(5.0)
        runner.release()

    thread = threading.Thread(target=agent)
    timer.time = 10.0 + 1e6
    runner.prepare()
    thread.start()
    runner.start(0)
    while thread.is_alive() or not tasks.empty():
        try:
            function, action = tasks.get(timeout=0.1)
        except queue.Empty:
            continue
        recorder.events.append(('loop', None, timer.now()))
        function(action)
    sent = [action for event, action, _ in recorder.events if event == 'send']
    assert runner.error is None and sent == list(range(count))
    order = [event for event, _, _ in recorder.events]
    return len(posted), order, getattr(timer, 'turns', 0)


def test_back_to_back_steps_keep_the_thread_while_the_executor_grants_the_turn():
    asked = []

    def turn():
        asked.append(1)
        return 60.0

    assert _chain(200, executor_turn=turn)[0] == 0  # every action taken directly
    assert len(asked) == 1  # asked once per chain, not per step


def test_a_due_executor_turn_without_patience_sends_every_next_action_through_the_executor():
    assert _chain(50, executor_turn=lambda: 0.0)[0] == 49


def test_a_due_turn_is_taken_inside_a_time_step_after_its_action_is_sent():
    """The loop runs while the step waits for its capture: no action waits for the loop."""
    posted, order, turns = _chain(50, timer_gives_turns=True, executor_turn=lambda: 0.0,
                                  turn_patience=lambda: 60.0)
    assert posted == 0  # every next action was taken directly at the step's end
    assert turns == order.count('loop') and turns >= 24  # a chain of two steps, then a turn
    for index, event in enumerate(order):
        if event == 'loop':  # between a step's action and its capture
            assert order[index - 1] == 'send' and order[index + 1] == 'capture'


def test_a_due_turn_with_no_room_waits_its_patience_then_ends_the_chain():
    # The timer gives no turn (time-steps too short for one): the chain goes on while the
    # turn may wait, then hands the next action to the executor's loop.
    assert _chain(200, executor_turn=lambda: 0.0, turn_patience=lambda: 60.0)[0] == 0
    assert _chain(50, executor_turn=lambda: 0.0, turn_patience=lambda: -1.0)[0] == 49


def test_work_posted_to_the_executor_ends_the_chain_at_once():
    assert _chain(50, executor_turn=lambda: 60.0, turn_patience=lambda: 60.0,
                  executor_work=lambda: True)[0] == 49


def _offering_runner(may_continue=lambda: True, handover_wait=1.0, timer=None, send=None,
                     **extra):
    timer = FakeDeadlineTimer(10.0) if timer is None else timer
    schedule = ElasticSchedule(time_step_duration=T, start_obs_capture=C,
                               time_step_timeout_factor=1.0)
    schedule.initialize(10.0)
    recorder = Recorder(timer)
    runner = TimeStepRunner(schedule=schedule, timer=timer,
                            send_control=recorder.send if send is None else send,
                            capture=recorder.capture, on_start=recorder.starts.append,
                            on_error=recorder.safe, handover_wait=handover_wait,
                            may_continue=may_continue, **extra)
    return runner, timer, recorder


def _running_with_offer(**options):
    """Return a runner running the step of 'a', with 'b' offered for the next (step('b') waits)."""
    runner, timer, recorder = _offering_runner(**options)
    runner.prepare()
    runner.start('a')
    runner.offer('b')
    return runner, timer, recorder


def test_an_offered_action_is_sent_at_t_end_by_the_thread_that_completes():
    runner, timer, recorder = _offering_runner()
    runner.prepare()
    runner.start('a')
    runner.offer('b')  # step('b') called during the time-step, before waiting
    timer.advance_to(10.0 + T)
    assert runner.done.is_set() and runner.completed == 1
    assert recorder.events[-1] == ('send', 'b', 10.0 + T)  # at t_end, no hand-over
    assert runner.withdraw() == 1  # started at the first completion
    assert recorder.starts[-1] is StepStart.ELASTIC
    runner.rearm(2)  # the user's next wait is for the second completion
    assert not runner.done.is_set()
    timer.advance_to(runner.schedule.t_end)
    assert runner.done.is_set() and runner.completed == 2


def test_only_the_awaited_completion_releases_the_user():
    # The user's thread may go on by the count (rearm) before the executor thread sets done
    # for that completion, and clear done for its next wait: a set meant for the earlier
    # completion must not end that wait (step() would take a result already taken).
    runner, timer, _ = _running_with_offer()
    runner.rearm(2)  # waiting for the step 'b' starts, before completion 1 sets done
    timer.advance_to(10.0 + T)  # completion 1: 'b' starts
    assert runner.completed == 1 and not runner.done.is_set()
    timer.advance_to(runner.schedule.t_end)  # completion 2
    assert runner.completed == 2 and runner.done.is_set()


def test_a_hand_over_waits_for_the_step_it_starts():
    runner, timer, _ = _offering_runner(handover_wait=0.0)
    runner.prepare()
    runner.start('a')
    timer.advance_to(10.0 + T)
    assert runner.done.is_set() and runner.completed == 1
    runner.hand_over('b', lambda function, action: function(action))
    assert not runner.done.is_set()
    timer.advance_to(runner.schedule.t_end)
    assert runner.done.is_set() and runner.completed == 2


def test_the_user_is_released_once_the_offered_action_is_sent_before_the_executor_sleeps():
    # Released before, the user's thread would wake only to wait for the GIL the executor
    # thread holds while it sends; after, it would wait for the executor thread's sleep.
    seen = []
    runner = None  # the callbacks run from the first start() on, before it is assigned

    def released():
        return runner is not None and runner.done.is_set()

    class NotingTimer(FakeDeadlineTimer):
        def arm(self, target, callback, turn=False):
            seen.append(('arm', released()))
            super().arm(target, callback, turn)

    def send(action):
        seen.append(('send', action, released()))

    runner, timer, _ = _running_with_offer(timer=NotingTimer(10.0), send=send)
    seen.clear()
    timer.advance_to(10.0 + C)  # t_co of 'a'
    timer.advance_to(10.0 + T)  # t_end: 'b' starts
    assert seen[-2:] == [('send', 'b', False), ('arm', True)], seen
    assert runner.withdraw() == 1


def test_a_user_that_went_on_by_the_count_is_not_woken_by_the_late_release():
    # While the executor thread sends 'b' (taken at completion 1), the user's thread finds
    # the count reached, goes on, offers 'c' and waits for completion 2: the release that
    # follows the send is for completion 1 and must leave that wait alone.
    def send(action):  # 'a' is sent before runner is assigned
        if action == 'b':  # the user's thread, meanwhile
            runner.rearm(1)
            assert runner.done.is_set() and runner.withdraw() == 1
            runner.offer('c')
            runner.rearm(2)

    runner, timer, _ = _running_with_offer(send=send)
    timer.advance_to(10.0 + T)  # completion 1: 'b' is sent, then released
    assert runner.completed == 1 and not runner.done.is_set()
    timer.advance_to(runner.schedule.t_end)  # completion 2: 'c' is sent, then released
    assert runner.completed == 2 and runner.done.is_set() and runner.withdraw() == 2


def test_an_offer_waits_for_the_user_when_the_executor_does_not_listen():
    runner, timer, recorder = _running_with_offer(handover_wait=0.0)  # free-running sim time
    timer.advance_to(10.0 + T)
    assert runner.done.is_set() and runner.withdraw() is None  # step() hands it over
    assert [e for e, *_ in recorder.events].count('send') == 1


def test_rearm_after_the_step_already_completed_does_not_wait():
    # A user's thread slower than a whole time-step: the completion it waits for came first.
    runner, timer, _ = _running_with_offer()
    timer.advance_to(10.0 + T)
    timer.advance_to(runner.schedule.t_end)  # the step of 'b' completes before the user looks
    assert runner.withdraw() == 1 and runner.completed == 2
    runner.rearm(2)
    assert runner.done.is_set()


def test_an_offer_is_not_taken_when_the_episode_ends_or_after_it_is_withdrawn():
    runner, timer, recorder = _running_with_offer(may_continue=lambda: False)
    timer.advance_to(10.0 + T)
    runner.release()  # step() ended the episode: no action comes
    assert runner.withdraw() is None
    assert [e for e, *_ in recorder.events].count('send') == 1
    runner, timer, recorder = _running_with_offer()
    assert runner.withdraw() is None  # step() left by an exception before t_end
    timer.advance_to(10.0 + T)
    runner.release()
    assert [e for e, *_ in recorder.events].count('send') == 1


def test_rearm_releases_the_waiter_of_a_step_that_failed_or_was_dropped():
    runner, timer, recorder = _running_with_offer()
    recorder.fail_capture = True
    timer.advance_to(10.0 + T)  # the capture of 'a' (t_co) fails: no completion
    runner.rearm(1)
    assert runner.done.is_set() and runner.error is not None
    runner, _, _ = _offering_runner()
    runner.prepare()
    runner.start('a')
    runner.abort()
    runner.rearm(1)
    assert runner.done.is_set()


def test_a_completion_is_counted_only_after_its_result_is_kept_and_the_offer_decided():
    # A user's thread that finds the count reached (rearm) reads the result at once and takes
    # its offer back: both must be settled by then.
    seen = []

    def on_complete(completion):
        seen.append((completion, runner.completed))

    def may_continue():
        seen.append(('decide', runner.completed))
        return True

    runner, timer, _ = _running_with_offer(may_continue=may_continue, on_complete=on_complete)
    timer.advance_to(10.0 + T)
    assert seen == [(1, 0), ('decide', 0)] and runner.completed == 1
