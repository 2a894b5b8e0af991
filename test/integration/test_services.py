"""
ServiceCaller against a real service server: ``timeout`` bounds the whole call.

The wait for the server to appear and the wait for its answer share one deadline: a server
that appears late and never answers holds the call for the bound, not twice it. The answer
ends the wait at once when the caller asks for that (lockstep), else at the next poll.
"""

import threading
import time

import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from ros_probe import DOMAIN
from rtgym_ros.robot import services
from rtgym_ros.robot.services import ServiceCaller, ServiceSpec
from rtgym_ros.ros.spin import SpinThread
from std_srvs.srv import Trigger

TIMEOUT = 2.0  # s, the bound of the call under test
APPEARS_AFTER = 0.6 * TIMEOUT  # s, when the server starts serving


class SilentServer:
    """A Trigger server in a context of its own that appears late and answers only at close."""

    def __init__(self, name: str, *, appears_after: float = APPEARS_AFTER) -> None:
        self.release = threading.Event()
        self.requests = 0
        self.context = Context()
        rclpy.init(context=self.context, domain_id=DOMAIN,
                   signal_handler_options=SignalHandlerOptions.NO)
        self.node = Node('silent_server', context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.spinner = SpinThread(self.executor, context=self.context, name='silent_server')
        self._name = name
        self._timer = threading.Timer(appears_after, self._serve)
        self._timer.start()

    def _serve(self) -> None:
        self.node.create_service(Trigger, self._name, self._answer_late)

    def _answer_late(self, request: Trigger.Request,
                     response: Trigger.Response) -> Trigger.Response:
        self.requests += 1
        self.release.wait(30.0)
        response.success = True
        return response

    def close(self) -> None:
        self._timer.cancel()
        self.release.set()
        self.spinner.stop(timeout=5.0)
        self.executor.shutdown(timeout_sec=5.0)
        self.node.destroy_node()
        self.context.try_shutdown()


@pytest.fixture
def probe(fresh_probe):
    """Give each test a fresh client participant: the server must be found within 0.8 s."""
    return fresh_probe


@pytest.mark.parametrize('retry', [True, False])
def test_a_late_server_that_never_answers_is_given_one_timeout_in_all(probe, retry):
    name = f'/silent_{"retry" if retry else "once"}_{time.monotonic_ns()}'
    client = probe.node.create_client(Trigger, name)
    spec = ServiceSpec(service=name, service_type=Trigger, success='success', retry=retry,
                       timeout=TIMEOUT)
    caller = ServiceCaller(lambda service, type_name: f'(describe {service})')
    server = SilentServer(name)
    try:
        start = time.monotonic()
        with pytest.raises(TimeoutError) as error:
            caller.call(spec, client, key='reset')
        elapsed = time.monotonic() - start
    finally:
        server.close()
        probe.node.destroy_client(client)
    message = str(error.value)
    # The server was found within the bound (else this tests only the wait for it).
    assert 'did not answer within 2.0 s' in message, message
    assert server.requests >= 1, 'the request never reached the server'
    # One deadline: about TIMEOUT. Two (a new one once the server appears): APPEARS_AFTER +
    # TIMEOUT = 1.6 TIMEOUT.
    assert elapsed < 1.3 * TIMEOUT, (
        f'the call took {elapsed:.2f} s, {elapsed / TIMEOUT:.2f} times its timeout '
        f'{TIMEOUT} s; expected about 1 ({message})')


POLL = 2.0  # s, the poll of the answer in the test below (10 ms in the package)


@pytest.mark.parametrize('wake_on_answer', [True, False])
def test_the_answer_ends_the_wait_at_once_only_when_asked_to(probe, monkeypatch,
                                                             wake_on_answer):
    monkeypatch.setattr(services, '_POLL', POLL)
    name = f'/answering_{wake_on_answer}_{time.monotonic_ns()}'.lower()
    client = probe.node.create_client(Trigger, name)
    spec = ServiceSpec(service=name, service_type=Trigger, success='success', retry=False,
                       timeout=30.0)
    caller = ServiceCaller(lambda service, type_name: f'(describe {service})')
    server = SilentServer(name, appears_after=0.0)
    answer = threading.Timer(0.1, server.release.set)  # the server answers 0.1 s on
    try:
        assert client.wait_for_service(timeout_sec=10.0), 'the server was not found'
        start = time.monotonic()
        answer.start()
        caller.call(spec, client, key='reset', wake_on_answer=wake_on_answer)
        elapsed = time.monotonic() - start
    finally:
        answer.cancel()
        server.close()
        probe.node.destroy_client(client)
    assert server.requests == 1
    if wake_on_answer:
        assert elapsed < POLL / 2, f'the call took {elapsed:.2f} s: it waited for the poll'
    else:
        assert elapsed >= POLL, f'the call took {elapsed:.2f} s, less than the poll ({POLL} s)'
