"""SIGTERM and SIGHUP in a plain script: SystemExit(128 + n) once, where nothing handles them."""

import subprocess
import sys

import pytest
from ros_probe import exit_code_after_a_hangup

CASES = {
    'default action: handled once, then the default again': """
        assert stop_robots_on_stopping_signals() == (signal.SIGTERM, signal.SIGHUP)
        for signum, code in ((signal.SIGTERM, 143), (signal.SIGHUP, 129)):
            try:
                os.kill(os.getpid(), signum)
                time.sleep(5.0)
            except SystemExit as exit:
                assert exit.code == code, (signum, exit.code)
            else:
                raise AssertionError(f'no SystemExit for {signum}')
            assert signal.getsignal(signum) is signal.SIG_DFL
        assert stop_robots_on_stopping_signals() == (signal.SIGTERM, signal.SIGHUP)  # again
    """,
    "the script's own handler is left alone": """
        def mine(signum, frame):
            pass
        signal.signal(signal.SIGTERM, mine)
        assert stop_robots_on_stopping_signals() == (signal.SIGHUP,)
        assert signal.getsignal(signal.SIGTERM) is mine
    """,
    "rclpy's handler is left alone": """
        from rclpy.signals import install_signal_handlers, SignalHandlerOptions
        install_signal_handlers(SignalHandlerOptions.SIGTERM)
        assert stop_robots_on_stopping_signals() == (signal.SIGHUP,)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # Python's record of it
    """,
    'an ignored hangup (nohup) is left ignored': """
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        assert stop_robots_on_stopping_signals() == (signal.SIGTERM,)
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.1)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    """,
    'not from another thread': """
        results = []
        thread = threading.Thread(
            target=lambda: results.append(stop_robots_on_stopping_signals()))
        thread.start()
        thread.join()
        assert results == [()]
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL
    """,
    "a node's stop signals: SIGHUP unless ignored": """
        from rtgym_ros.nodes.signals import stop_signals
        assert stop_signals() == (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        assert stop_signals() == (signal.SIGINT, signal.SIGTERM)
    """,
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_stopping_signal_handling(case):
    body = '\n'.join(line[8:] for line in CASES[case].splitlines())
    code = ('import os, signal, threading, time\n'
            'from rtgym_ros.stop_signal import stop_robots_on_stopping_signals\n'
            # as from a terminal: a test run under nohup passes SIGHUP ignored to its children
            'signal.signal(signal.SIGHUP, signal.SIG_DFL)\n' + body)
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr


def test_a_script_whose_terminal_closes_exits_129_though_it_prints_on_its_way():
    # Once the terminal is gone every write to it fails (EIO): the script's last print raised
    # OSError in its finally, and the process exited 1.
    code = ('import time\n'
            'from rtgym_ros.stop_signal import stop_robots_on_stopping_signals\n'
            'stop_robots_on_stopping_signals()\n'
            "print('ready', flush=True)\n"
            'try:\n'
            '    time.sleep(30)\n'
            'finally:\n'
            "    print('closing', flush=True)\n")
    assert exit_code_after_a_hangup([sys.executable, '-c', code], 'ready') == 129
