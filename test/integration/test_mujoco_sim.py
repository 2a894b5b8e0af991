"""The mujoco_sim node as a real process, driven over real DDS from a private context."""

import math
import signal
import subprocess
import sys
import time
from typing import List

from nav_msgs.msg import Odometry
import pytest
from rclpy.qos import QoSProfile
from rclpy.time import Time
from ros_probe import (CHILD_ENV, Probe, Recorder, REPO, SimProcess, taken_after_call,
                       wait_until)
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Empty

pytest.importorskip('mujoco', reason="mujoco is not installed: pip install 'rtgym_ros[mujoco]'")

MODULE = 'rtgym_ros.nodes.mujoco_sim'
PENDULUM = 'config/mujoco_sim/inverted_pendulum.yaml'
FLOATING_ARM = str(REPO / 'test' / 'support' / 'mjcf' / 'floating_arm.xml')
SERVICES = ('reset_simulation', 'reset_world', 'pause_physics', 'unpause_physics')
MS = 1_000_000  # ns


def ns_of(msg) -> int:
    """Return a message's time (header stamp, or a Clock's clock) in ns."""
    return Time.from_msg(msg.header.stamp if hasattr(msg, 'header') else msg.clock).nanoseconds


class Sim:
    """A running mujoco_sim plus the probe's handles on its topics and services."""

    def __init__(self, probe: Probe, log_dir, *params: str, config: str = PENDULUM,
                 clock: str = '/clock', env: dict | None = None, ros_args: tuple = (),
                 first_state: bool = True, wall_clock: bool = False) -> None:
        """:param wall_clock: the sim stamps on the wall clock (it publishes no /clock)."""
        self.probe = probe
        self.sim = SimProcess(log_dir, *params, config=config, module=MODULE, env=env,
                              ros_args=ros_args)
        ns = self.sim.ns
        node = probe.node
        self.states = Recorder(probe, JointState, f'{ns}/joint_states')
        self.clock = Recorder(probe, Clock, clock if clock.startswith('/') else f'{ns}/{clock}')
        self.command_pub = node.create_publisher(
            Float64MultiArray, f'{ns}/effort_controller/commands', QoSProfile(depth=10))
        self.step_pub = node.create_publisher(Clock, f'{ns}/step_until', QoSProfile(depth=10))
        self.clients = {name: node.create_client(Empty, f'{ns}/{name}') for name in SERVICES}
        self._others: List = []
        self._first_state = first_state
        self.wall_clock = wall_clock

    def ready(self) -> 'Sim':
        """Wait until its services, topics (and with ``first_state`` a JointState) are up."""
        try:
            for client in self.clients.values():
                wait_until(client.service_is_ready, 30.0, f'the {client.srv_name} service')
            wait_until(lambda: self.command_pub.get_subscription_count() > 0, 10.0,
                       'the sim to subscribe to commands')
            wait_until(lambda: self.states.sub.get_publisher_count() > 0, 10.0,
                       'the JointState publisher')
            if self._first_state:
                self.states.wait_for(lambda m: True, since=0.0, timeout=10.0,
                                     what='a first JointState')
            else:  # lockstep
                wait_until(lambda: self.step_pub.get_subscription_count() > 0, 10.0,
                           'the sim to subscribe to step_until')
                wait_until(lambda: self.clock.sub.get_publisher_count() > 0, 10.0,
                           'the /clock publisher')
                self._handshake()
        except AssertionError as error:
            raise AssertionError(f'{error}\nmujoco_sim output:\n{self.sim.output()}') from None
        return self

    def _handshake(self) -> None:
        """
        Step until a /clock comes back, then rewind: both ways matched, the sim at time 0.

        Our reader seeing the sim's writer does not mean the sim's writer has matched our
        reader yet: a /clock sent before that is lost, not late. Each try asks for a new
        target (a repeated one is ignored); the reset after makes the state the same however
        many tries it took (the reset noise draws once per reset).
        """
        since = time.monotonic()
        for tries in range(1, 51):
            self.step_pub.publish(Clock(clock=Time(nanoseconds=tries * 20 * MS).to_msg()))
            time.sleep(0.2)
            if self.clock.since(since):
                break
        else:
            raise AssertionError('no /clock after 50 step_until requests, 0.2 s apart')
        # Once one came back, every later request gets its /clock: wait for the last.
        self.clock.wait_for(lambda m: ns_of(m) == tries * 20 * MS, since=since, timeout=5.0,
                            what='the /clock of the last start-up step_until')
        since = time.monotonic()
        self.probe.call(self.clients['reset_simulation'], Empty.Request())
        self.clock.wait_for(lambda m: ns_of(m) == 0, since=since, timeout=5.0,
                            what='/clock at 0 after the start-up reset')

    def record(self, msg_type, topic: str) -> Recorder:
        recorder = Recorder(self.probe, msg_type, f'{self.sim.ns}/{topic}')
        self._others.append(recorder)
        return recorder

    def command(self, *values: float) -> None:
        self.command_pub.publish(Float64MultiArray(data=list(values)))

    def command_for(self, seconds: float, *values: float, rate: float = 50.0) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.command(*values)
            time.sleep(1.0 / rate)

    def call(self, service: str) -> float:
        """Call a world service; return the receipt time from which only newer states come."""
        called = time.monotonic()
        self.probe.call(self.clients[service], Empty.Request())
        return taken_after_call(self.states, called, wall_clock=self.wall_clock, what=service)

    def latest(self, since: float) -> JointState:
        self.states.wait_for(lambda m: True, since=since, timeout=5.0, what='a JointState')
        return self.states.since(since)[-1][1]

    def close(self) -> None:
        node = self.probe.node
        for recorder in [self.states, self.clock, *self._others]:
            node.destroy_subscription(recorder.sub)
        node.destroy_publisher(self.command_pub)
        node.destroy_publisher(self.step_pub)
        for client in self.clients.values():
            node.destroy_client(client)
        if self.sim.proc.poll() is None:
            self.sim.stop()


@pytest.fixture(scope='module')
def log_dir(tmp_path_factory):
    return tmp_path_factory.mktemp('mujoco_sim')


# ------------------------------------------------------------------ realtime, node clock

@pytest.fixture(scope='module')
def pendulum(probe, log_dir):
    """Inverted pendulum on the wall clock, 0.3 s command watchdog."""
    sim = Sim(probe, log_dir, 'command_timeout:=0.3', wall_clock=True).ready()
    yield sim
    sim.close()


def test_joint_states_of_every_joint_at_the_physics_rate(pendulum):
    start = time.monotonic()
    time.sleep(1.0)
    received = pendulum.states.since(start)
    assert 35 < len(received) / (time.monotonic() - start) < 65  # 50 Hz physics
    stamps = [ns_of(msg) for _, msg in received]
    assert all(b > a for a, b in zip(stamps, stamps[1:]))
    assert abs(stamps[-1] / 1e9 - time.time()) < 1.0  # the node clock: wall time
    msg = received[-1][1]
    assert list(msg.name) == ['slider', 'hinge']
    assert len(msg.position) == len(msg.velocity) == len(msg.effort) == 2


def test_a_command_pushes_the_cart(pendulum):
    since = pendulum.call('reset_world')
    assert abs(pendulum.latest(since).position[0]) <= 0.011
    start = time.monotonic()
    pendulum.command_for(0.3, 1.0)
    received = [msg for _, msg in pendulum.states.since(start)]
    assert 100.0 in [msg.effort[0] for msg in received]  # ctrl 1 times gear 100
    assert max(msg.velocity[0] for msg in received) > 0.5
    pendulum.command_for(0.3, -1.0)
    assert pendulum.latest(time.monotonic() - 0.05).effort[0] == -100.0


def test_bad_commands_are_refused_with_a_log_line_and_the_last_one_kept(pendulum):
    pendulum.call('reset_world')
    start = time.monotonic()
    for _ in range(10):
        pendulum.command(0.5)
        time.sleep(0.02)
        pendulum.command(0.5, 0.5)  # one actuator, two values
        time.sleep(0.02)
        pendulum.command(math.nan)
        time.sleep(0.02)
    efforts = [msg.effort[0] for _, msg in pendulum.states.since(start)]
    assert set(efforts[efforts.index(50.0):]) == {50.0}
    wait_until(lambda: 'must have 1 value(s), one per actuator' in pendulum.sim.output()
               and 'must be finite, got [nan]' in pendulum.sim.output(), 5.0,
               'the refusals in the log')
    assert pendulum.sim.proc.poll() is None


def test_the_command_timeout_zeroes_the_actuators(pendulum):
    pendulum.call('reset_world')
    start = time.monotonic()
    pendulum.command_for(0.2, 0.7)
    pendulum.states.wait_for(lambda m: m.effort[0] == 70.0, since=start, timeout=2.0,
                             what='the commanded effort')
    last = time.monotonic()
    zero = pendulum.states.wait_for(lambda m: m.effort[0] == 0.0, since=last, timeout=3.0,
                                    what='the watchdog to zero the effort')
    received = pendulum.states.since(last)
    zeroed_at = next(t for t, msg in received if msg is zero)
    assert 0.15 < zeroed_at - last < 1.0  # command_timeout is 0.3 s
    assert all(msg.effort[0] == 0.0 for t, msg in received if t > zeroed_at + 0.05)


@pytest.mark.parametrize('service', ['reset_world', 'reset_simulation'])
def test_reset_services_draw_a_new_initial_state(pendulum, service):
    pendulum.command_for(0.3, 1.0)
    moved = pendulum.latest(time.monotonic() - 0.05)
    assert moved.position[0] > 0.02
    since = pendulum.call(service)
    msg = pendulum.latest(since)
    assert abs(msg.position[0]) <= 0.011 and msg.effort[0] == 0.0  # InvertedPendulum-v5's


def test_pause_freezes_the_state_and_unpause_resumes(pendulum):
    pendulum.call('reset_world')
    pendulum.call('pause_physics')
    try:
        start = time.monotonic()
        time.sleep(0.4)
        frozen = [msg for _, msg in pendulum.states.since(start)]
        assert len(frozen) > 10  # the sensors go on in wall time
        assert len({tuple(msg.position) for msg in frozen}) == 1
    finally:
        pendulum.call('unpause_physics')
    start = time.monotonic()
    pendulum.command_for(0.3, 1.0)
    assert len({msg.position[0] for _, msg in pendulum.states.since(start)}) > 5


def test_sigint_ends_it_cleanly(pendulum):
    code, seconds = pendulum.sim.stop(signal.SIGINT)
    output = pendulum.sim.output()
    assert code == 0, output
    assert seconds < 5.0
    assert 'terminate called' not in output and 'Traceback' not in output, output


# ------------------------------------------------------------------ realtime, own /clock

@pytest.fixture(scope='module')
def arm(probe, log_dir):
    """Run a file MJCF with a floating base, sensors and a camera; own /clock at 2x."""
    params = (f'model:={FLOATING_ARM}', 'publish_clock:=true', 'real_time_factor:=2',
              'sensor_rate:=50.0', 'clock_rate:=100.0')
    camera = ('camera:=overview', 'camera_rate:=5.0', 'image_width:=64', 'image_height:=48')
    try:
        sim = Sim(probe, log_dir, *params, *camera, env={'MUJOCO_GL': 'egl'}).ready()
        sim.has_camera = True
    except AssertionError as error:
        if 'OpenGL offscreen backend' not in str(error):
            raise
        sim = Sim(probe, log_dir, *params).ready()  # test_camera_images says why it skips
        sim.has_camera = False
    sim.sensors = sim.record(Float64MultiArray, 'sensors')
    sim.odometry = sim.record(Odometry, 'odom')
    sim.images = sim.record(Image, 'camera/image_raw')
    yield sim
    sim.close()


def test_own_clock_runs_at_the_real_time_factor_and_stamps_follow_it(arm):
    start = time.monotonic()
    time.sleep(1.5)
    ticks = arm.clock.since(start)
    assert len(ticks) > 100
    (w0, c0), (w1, c1) = [(t, ns_of(msg) / 1e9) for t, msg in (ticks[0], ticks[-1])]
    assert 1.3 < (c1 - c0) / (w1 - w0) < 2.7
    state = arm.latest(time.monotonic() - 0.1)
    assert ns_of(state) / 1e9 < 1e6 and abs(ns_of(state) / 1e9 - c1) < 0.5  # sim time
    assert list(state.name) == ['elbow']  # the ball joint is left out, the free joint too


def test_sensors_and_odometry_of_a_floating_base(arm):
    called = time.monotonic()
    since = arm.call('reset_world')
    arm.command_for(0.3, 0.5)
    sensors = arm.sensors.wait_for(lambda m: True, since=since, timeout=5.0, what='sensors')
    assert len(sensors.data) == 8  # elbow_angle[1], imu_acc[3], base_quat[4]
    odometry = [msg for _, msg in arm.odometry.since(called)]
    assert odometry, 'no odometry'
    assert odometry[-1].header.frame_id == 'odom' and odometry[-1].child_frame_id == 'base'
    heights = [msg.pose.pose.position.z for msg in odometry]
    # The base falls from 1 m. From the call on: the first sample of the reset is at 1 m, and
    # a late ``since`` (a loaded host, the sim at 2x) would start the record below that.
    assert max(heights) > 0.9 and heights[-1] < max(heights) - 0.1
    assert min(msg.twist.twist.linear.z for msg in odometry) < -0.5
    state = arm.latest(since)
    assert state.effort[0] == 1.0  # ctrl 0.5, gear 2
    # The elbow_angle sensor is the elbow's position of the same sample, exactly: the sensors
    # are of the state sent, not of the one a physics step (of 4 per sample) before.
    angles = {msg.data[0] for _, msg in arm.sensors.since(since)}
    positions = {msg.position[0] for _, msg in arm.states.since(since)}
    assert len(angles & positions) > 0.8 * len(angles) > 5


def test_camera_images(arm):
    if not arm.has_camera:
        pytest.skip('no OpenGL offscreen backend here (MUJOCO_GL=egl failed)')
    image = arm.images.wait_for(lambda m: True, since=0.0, timeout=10.0, what='an image')
    assert (image.width, image.height, image.encoding, image.step) == (64, 48, 'rgb8', 192)
    assert len(image.data) == 64 * 48 * 3 and image.header.frame_id == 'overview'
    assert sum(image.data) > 10 * len(image.data)  # not black


def test_reset_simulation_rewinds_own_clock_and_reset_world_does_not(arm):
    time.sleep(0.3)
    before = ns_of(arm.clock.since(0.0)[-1][1])
    since = arm.call('reset_world')
    after_world = ns_of(arm.clock.wait_for(lambda m: True, since=since, timeout=2.0,
                                           what='/clock after reset_world'))
    assert after_world >= before
    assert before > 500 * MS
    since = arm.call('reset_simulation')
    # The rewound one, not the first after the call: under load the probe may take a /clock
    # sent before the reset later than call()'s margin.
    arm.clock.wait_for(lambda m: ns_of(m) < 500 * MS, since=since, timeout=2.0,
                       what='/clock rewound below 0.5 s after reset_simulation')


# ------------------------------------------------------------------ lockstep

def step_until(sim: Sim, target_ns: int, *, timeout: float = 5.0) -> Clock:
    """Ask for ``target_ns``; return the first /clock at or after it."""
    since = time.monotonic()
    msg = Clock(clock=Time(nanoseconds=target_ns).to_msg())
    sim.step_pub.publish(msg)
    return sim.clock.wait_for(lambda m: ns_of(m) >= target_ns - 1, since=since,
                              timeout=timeout, what=f'/clock to reach {target_ns} ns')


def at_target(sim: Sim, target_ns: int, since: float) -> JointState:
    """
    Return the JointState stamped ``target_ns``.

    It is published before the /clock of the target, but DDS does not order messages across
    topics: it may arrive after that /clock.
    """
    return sim.states.wait_for(lambda m: ns_of(m) == target_ns, since=since, timeout=2.0,
                               what=f'the JointState of the target {target_ns} ns')


def lockstep_sim(probe, log_dir, *params: str) -> Sim:
    """Start a lockstep sim; its /clock is remapped into its namespace (the arm has /clock)."""
    return Sim(probe, log_dir, 'stepping:=lockstep', 'command_timeout:=0.5', *params,
               first_state=False, ros_args=('-r', '/clock:=clock'), clock='clock')


@pytest.fixture(scope='module')
def lockstep(probe, log_dir):
    """Run the inverted pendulum in lockstep, JointState at 10 sim-Hz (physics at 50)."""
    sim = lockstep_sim(probe, log_dir, 'sensor_rate:=10.0').ready()
    yield sim
    sim.close()


def clock_now(sim: Sim) -> int:
    ticks = sim.clock.since(0.0)
    assert ticks, 'no /clock yet (ready() waits for one)'
    return ns_of(ticks[-1][1])


def times_after(recorder: Recorder, since: float, after: int) -> List[int]:
    """
    Return the times of the messages received since ``since`` that are later than ``after``.

    A paused sim says its time again every 0.1 s without a request (its start or reset
    state too): one of ``after`` itself may come in just before a request.
    """
    return [ns_of(m) for _, m in recorder.since(since) if ns_of(m) > after]


def test_lockstep_steps_exactly_to_the_target_and_stops(lockstep):
    start = clock_now(lockstep)
    since = time.monotonic()
    reached = step_until(lockstep, start + 100 * MS)
    assert ns_of(reached) == start + 100 * MS  # a multiple of the 20 ms physics step
    time.sleep(0.3)
    assert set(times_after(lockstep.clock, since, start)) == {start + 100 * MS}  # said again
    stamps = times_after(lockstep.states, since, start)
    assert stamps[-1] == start + 100 * MS and len(stamps) == len(set(stamps))
    # Off the physics grid: the first step boundary after the target; the sensors are sent at
    # the target whatever their rate (10 Hz here).
    since = time.monotonic()
    reached = step_until(lockstep, start + 130 * MS)
    assert ns_of(reached) == start + 140 * MS
    time.sleep(0.3)
    assert times_after(lockstep.states, since, start + 100 * MS) == [start + 140 * MS]
    assert set(times_after(lockstep.clock, since, start + 100 * MS)) == {start + 140 * MS}


def test_lockstep_ignores_a_past_or_repeated_target(lockstep):
    now = step_until(lockstep, clock_now(lockstep) + 40 * MS)
    since = time.monotonic()
    for target in (ns_of(now), ns_of(now) - 20 * MS, 0):
        lockstep.step_pub.publish(Clock(clock=Time(nanoseconds=target).to_msg()))
    time.sleep(0.4)
    assert {ns_of(m) for _, m in lockstep.clock.since(since)} <= {ns_of(now)}  # said again
    assert lockstep.states.since(since) == []
    assert lockstep.sim.proc.poll() is None


def test_lockstep_sensors_on_the_way_at_their_rate(lockstep):
    start = clock_now(lockstep)
    base = (start // (100 * MS) + 1) * 100 * MS  # the next 10 Hz sample time
    step_until(lockstep, base)
    since = time.monotonic()
    step_until(lockstep, base + 300 * MS)
    time.sleep(0.2)
    stamps = [ns_of(m) for _, m in lockstep.states.since(since)]
    assert stamps == [base + 100 * MS, base + 200 * MS, base + 300 * MS]


def test_lockstep_applies_a_command_sent_before_the_step_and_times_it_out(lockstep):
    start = clock_now(lockstep)
    lockstep.command(1.0)
    since = time.monotonic()
    step_until(lockstep, start + 20 * MS)
    state = at_target(lockstep, start + 20 * MS, since)
    assert state.effort[0] == 100.0
    # command_timeout 0.5 s of sim time: 0.6 s later the actuator gets 0.
    step_until(lockstep, start + 600 * MS)
    state = at_target(lockstep, start + 600 * MS, since)
    assert state.effort[0] == 0.0


def test_lockstep_reset_publishes_the_new_state_at_time_zero(lockstep):
    step_until(lockstep, clock_now(lockstep) + 200 * MS)
    since = time.monotonic()
    lockstep.probe.call(lockstep.clients['reset_simulation'], Empty.Request())
    # A /clock or state published before the reset (the idle announcer says the time again)
    # can still arrive after it on a loaded machine: the reset's own are the ones at zero.
    lockstep.clock.wait_for(lambda m: ns_of(m) == 0, since=since, timeout=2.0,
                            what='/clock at time zero after the reset')
    state = lockstep.states.wait_for(lambda m: ns_of(m) == 0, since=since, timeout=2.0,
                                     what='the state at time zero after the reset')
    assert abs(state.position[0]) <= 0.01 and abs(state.position[1]) <= 0.01
    time.sleep(0.3)
    times = [ns_of(m) for _, m in lockstep.clock.since(since)]
    assert set(times[times.index(0):]) == {0}, times  # and paused again
    lockstep.probe.call(lockstep.clients['pause_physics'], Empty.Request())  # harmless
    assert ns_of(step_until(lockstep, 40 * MS)) == 40 * MS


def test_lockstep_reset_sends_the_rewound_clock_before_the_state(lockstep):
    """
    An env drops what came before its clock went back: the rewound /clock must go out first.

    DDS does not order messages across topics on arrival, so the order is the writers'
    source timestamps (one process, one clock).
    """
    sent = {'clock': [], 'state': []}
    node = lockstep.probe.node

    def keep(key: str):
        return lambda msg, info: sent[key].append((ns_of(msg), info['source_timestamp']))

    ns = lockstep.sim.ns
    subs = [node.create_subscription(Clock, f'{ns}/clock', keep('clock'), QoSProfile(depth=50)),
            node.create_subscription(JointState, f'{ns}/joint_states', keep('state'),
                                     QoSProfile(depth=50))]
    try:
        # Step until both new readers got something: the sim's writers have matched them.
        wait_until(lambda: step_until(lockstep, clock_now(lockstep) + 200 * MS)
                   and sent['clock'] and sent['state'], 10.0, 'the new readers to be matched')
        lockstep.probe.call(lockstep.clients['reset_simulation'], Empty.Request())
        wait_until(lambda: any(t == 0 for t, _ in sent['clock'])
                   and any(t == 0 for t, _ in sent['state']), 2.0,
                   '/clock and a JointState at time 0 after reset_simulation')
        clock_sent = min(source for t, source in sent['clock'] if t == 0)
        state_sent = min(source for t, source in sent['state'] if t == 0)
        assert clock_sent < state_sent, (clock_sent, state_sent)
    finally:
        for sub in subs:
            node.destroy_subscription(sub)


def test_lockstep_says_the_time_and_a_reset_state_again_to_late_readers(lockstep):
    """
    /clock is volatile: a node that comes after the sim's last message must still hear it.

    An env waits for its first /clock before its first reset, and for the state its reset
    asked for: the paused sim says its time again while no request comes, and its reset state
    until the next request, as gazebo_ros says /clock while paused.
    """
    lockstep.probe.call(lockstep.clients['reset_world'], Empty.Request())  # a state, no rewind
    now = clock_now(lockstep)
    time.sleep(0.3)  # well after the reset's own messages
    ns = lockstep.sim.ns
    clock = Recorder(lockstep.probe, Clock, f'{ns}/clock')
    states = Recorder(lockstep.probe, JointState, f'{ns}/joint_states')
    try:
        clock.wait_for(lambda m: ns_of(m) == now, since=0.0, timeout=5.0,
                       what='/clock said again to a late reader')
        states.wait_for(lambda m: ns_of(m) == now, since=0.0, timeout=5.0,
                        what='the reset state said again to a late reader')
        step_until(lockstep, now + 20 * MS)
        idle = time.monotonic() + 0.3
        time.sleep(0.6)
        assert states.since(idle) == [], 'a state said again after a request'
        assert {ns_of(m) for _, m in clock.since(idle)} == {now + 20 * MS}
    finally:
        lockstep.probe.node.destroy_subscription(clock.sub)
        lockstep.probe.node.destroy_subscription(states.sub)


def test_lockstep_runs_are_bit_identical(probe, log_dir):
    """The same seed, commands and targets: the same JointStates, bit for bit."""
    sims = [lockstep_sim(probe, log_dir, 'seed:=5') for _ in range(2)]  # start together
    try:
        for sim in sims:
            sim.ready()
        runs = []
        for sim in sims:
            since = time.monotonic()
            for k in range(1, 61):
                sim.command(math.sin(0.3 * k) * 2.0)
                step_until(sim, k * 40 * MS)
            time.sleep(0.2)
            runs.append([(ns_of(m), tuple(m.position), tuple(m.velocity), tuple(m.effort))
                         for _, m in sim.states.since(since) if ns_of(m) > 0])
        assert len(runs[0]) == 120  # every physics step, 60 targets of two steps each
        assert runs[0] == runs[1]
        assert len({state[1] for state in runs[0]}) == 120  # it moved
    finally:
        for sim in sims:
            sim.close()


# ------------------------------------------------------------------ start-up and --help

def test_bad_parameters_fail_at_start_and_say_why(log_dir, tmp_path):
    # More cases of the model's own errors: test/unit/test_mujoco_model.py.
    broken = tmp_path / 'broken.xml'
    broken.write_text('<mujoco><worldbody><body></worldbody></mujoco>')
    cases = {'model:=hoper': 'model must be a path to an MJCF file (.xml) or one of the '
                             'models Gymnasium ships: ant, half_cheetah, hopper',
             f'model:={broken}': f"model: MuJoCo cannot load '{broken}'",
             'sensor_rate:=100.0': 'sensor_rate must be <= the physics rate of the model '
                                   '(50 Hz, 1/timestep), got 100'}
    sims = {param: SimProcess(log_dir, param, config=PENDULUM, module=MODULE)
            for param in cases}
    for param, expected in cases.items():
        try:
            code = sims[param].proc.wait(timeout=30.0)
        except subprocess.TimeoutExpired:
            sims[param].stop(signal.SIGKILL)
            raise
        output = sims[param].output()
        assert code == 1, output
        assert 'cannot start: ' + expected in output, output
        assert 'Traceback' not in output, output


def test_help_lists_the_parameters_and_starts_nothing():
    result = subprocess.run([sys.executable, '-m', MODULE, '--help'], cwd=REPO, env=CHILD_ENV,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('usage: mujoco_sim [--help]')
    for line in ("model (string, default 'inverted_pendulum')",
                 "stepping (string, default 'realtime')",
                 'real_time_factor (double, default 1.0)', 'seed (integer, default 0)',
                 'publish_clock (bool, default false)', 'command_timeout (double, default 0.5)',
                 "controller (string, default 'effort_controller')"):
        assert line in result.stdout, result.stdout
    assert '[INFO]' not in result.stdout + result.stderr  # no node was made
