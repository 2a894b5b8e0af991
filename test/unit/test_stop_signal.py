"""SIGTERM in a plain script becomes SystemExit(143) once, where nothing else handles it."""

import subprocess
import sys

import pytest

CASES = {
    'default action: handled once, then the default again': """
        assert stop_robots_on_sigterm()
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5.0)
        except SystemExit as exit:
            assert exit.code == 143, exit.code
        else:
            raise AssertionError('no SystemExit')
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert stop_robots_on_sigterm()  # a later env sets it again
    """,
    "the script's own handler is left alone": """
        def mine(signum, frame):
            pass
        signal.signal(signal.SIGTERM, mine)
        assert not stop_robots_on_sigterm()
        assert signal.getsignal(signal.SIGTERM) is mine
    """,
    "rclpy's handler is left alone": """
        from rclpy.signals import install_signal_handlers, SignalHandlerOptions
        install_signal_handlers(SignalHandlerOptions.SIGTERM)
        assert not stop_robots_on_sigterm()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # Python's record of it
    """,
    'not from another thread': """
        results = []
        thread = threading.Thread(target=lambda: results.append(stop_robots_on_sigterm()))
        thread.start()
        thread.join()
        assert results == [False]
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    """,
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_sigterm_handling(case):
    body = '\n'.join(line[8:] for line in CASES[case].splitlines())
    code = ('import os, signal, threading, time\n'
            'from rtgym_ros.stop_signal import stop_robots_on_sigterm\n' + body)
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
