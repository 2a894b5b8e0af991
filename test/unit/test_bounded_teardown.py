"""
A node's teardown ends its process within the limit, even when the blocking call holds the GIL.

DDS can block for good inside a participant's destruction, in C, with the GIL held: no Python
thread or signal handler runs then. Each case runs in a fresh interpreter, since the watchdog
ends the process it runs in.
"""

from pathlib import Path
import subprocess
import sys
import textwrap
import time

from ros_probe import exit_code_after_a_hangup

REPO = Path(__file__).resolve().parents[2]
_RUN = """
import ctypes, sys, time
from rtgym_ros.nodes.signals import bounded_teardown, ignore_stop_signals
ignore_stop_signals()
{body}
print('exited the block', flush=True)
"""
# A C call that holds the GIL for 20 s: ctypes.PyDLL keeps the GIL across the call.
_HOLD_GIL = 'ctypes.PyDLL(None).sleep(20)'


def _run(body: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, '-c', _RUN.format(body=body)], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    return result, time.monotonic() - started


def test_a_teardown_that_holds_the_gil_past_the_limit_ends_the_process_with_code_1():
    result, took = _run(f'with bounded_teardown(1.0):\n    {_HOLD_GIL}')
    assert result.returncode == 1, result
    assert took < 15, f'the process ran {took:.1f} s, the limit was 1 s'
    assert 'exited the block' not in result.stdout
    assert 'Timeout' in result.stderr and 'File' in result.stderr, result.stderr  # the stacks


def test_a_teardown_within_the_limit_leaves_the_process_alone():
    result, _ = _run('with bounded_teardown(1.0):\n    pass\ntime.sleep(2.0)')
    assert result.returncode == 0, result
    assert result.stdout == 'exited the block\n'
    assert result.stderr == ''


def test_a_teardown_that_raises_still_cancels_the_limit():
    body = ('try:\n    with bounded_teardown(1.0):\n        raise RuntimeError("x")\n'
            'except RuntimeError:\n    pass\ntime.sleep(2.0)')
    result, _ = _run(body)
    assert result.returncode == 0, result
    assert result.stdout == 'exited the block\n'


def test_only_the_first_stop_signal_interrupts_the_agent():
    # A second one would land anywhere in the teardown, before it ignores them: in
    # ignore_stop_signals() itself, the env's close() never ran.
    body = """
import os, signal, time
from rtgym_ros.nodes.agent import _raise_on_stop_signals, run_episode
_raise_on_stop_signals()
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5.0)
except KeyboardInterrupt:
    print('stopping', flush=True)
for signum in (signal.SIGINT, signal.SIGTERM):
    os.kill(os.getpid(), signum)
    time.sleep(0.1)
print('stopped', flush=True)


class Env:  # steps for ever unless the episode loop sees the stop
    class unwrapped:
        timeouts, act_buf = 0, [0.0]

    def reset(self, seed=None):
        return 0.0, {}

    def step(self, action):
        return 0.0, 0.0, False, False, {}


try:  # a KeyboardInterrupt that never reached the loop (swallowed): the loop stops anyway
    run_episode(Env(), lambda obs: 0.0, 0, seed=None)
except KeyboardInterrupt:
    print('episode stopped', flush=True)
"""
    result = subprocess.run([sys.executable, '-c', body], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result
    assert result.stdout.split('\n')[:3] == ['stopping', 'stopped', 'episode stopped'], result


def test_a_test_that_hangs_with_the_gil_ends_the_test_run_with_every_stack(tmp_path):
    # The suite's own bound (setup.cfg: faulthandler_timeout, faulthandler_exit_on_timeout):
    # a DDS deadlock in the test process must fail the run, not hang CI. Here with a 1 s limit.
    hanging = tmp_path / 'test_hanging.py'
    hanging.write_text(f'import ctypes\n\n\ndef test_hangs():\n    {_HOLD_GIL}\n')
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, '-m', 'pytest', '-c', str(REPO / 'setup.cfg'), '--rootdir', str(REPO),
         '-p', 'no:cacheprovider', '-o', 'faulthandler_timeout=1', str(hanging)],
        capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert result.returncode != 0, result
    assert took < 15, f'the run took {took:.1f} s, the limit was 1 s'
    assert 'Timeout' in result.stderr and 'test_hangs' in result.stderr, result.stderr


def test_hangups_to_the_last_moment_of_a_stopping_node_leave_its_exit_code():
    """Python's finalization gives SIGHUP back its default: a late one must not kill the node."""
    # A child sends the stopping script a SIGHUP every 0.2 ms, through its exit; three times.
    flood = textwrap.dedent("""
        import os, signal, sys, time
        end = time.monotonic() + 10
        print(1, flush=True)
        while time.monotonic() < end:
            try:
                os.kill(int(sys.argv[1]), signal.SIGHUP)
            except ProcessLookupError:
                break
            time.sleep(0.0002)
    """)
    code = textwrap.dedent(f"""
        import os, subprocess, sys
        from rtgym_ros.nodes.signals import ignore_stop_signals
        ignore_stop_signals()
        flood = subprocess.Popen([sys.executable, '-c', {flood!r}, str(os.getpid())],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        flood.stdout.readline()
    """)
    for _ in range(3):
        node = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True,
                              timeout=60)
        assert node.returncode == 0, (node.returncode, node.stderr[-2000:])


def test_a_hangup_while_a_node_stops_leaves_its_last_words_harmless():
    # Stopping, a node ignores further stop signals; a terminal that hangs up then (a Ctrl-C,
    # then the window closed) would still fail every later print with EIO, and exit 1.
    code = ('import time\n'
            'from rtgym_ros.nodes.signals import ignore_stop_signals\n'
            'ignore_stop_signals()\n'
            "print('ready', flush=True)\n"
            'time.sleep(2.0)\n'
            "print('summary', flush=True)\n")
    assert exit_code_after_a_hangup([sys.executable, '-c', code], 'ready', cwd=REPO) == 0
