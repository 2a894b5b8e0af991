"""
The serialized receiver's thread against destroys from other threads, in a process of its own.

A crash there is a segmentation fault, so the racing receivers run in a child process and the
test reads its exit status.
"""

import subprocess
import sys

from ros_probe import CHILD_ENV, die_with_parent, REPO

ROUNDS = 30


def test_a_close_whose_join_timed_out_never_frees_what_the_thread_waits_on():
    # Each round's close destroys four subscriptions and the wake guard while the receiving
    # thread waits on them: the wait holds their handles, so rclpy defers the destroys.
    result = subprocess.run(
        [sys.executable, str(REPO / 'test' / 'support' / 'serialized_close_race.py'),
         str(ROUNDS)], cwd=REPO, env=CHILD_ENV, capture_output=True, text=True, timeout=120,
        preexec_fn=die_with_parent)
    assert result.returncode == 0 and f'SURVIVED {ROUNDS}' in result.stdout, (
        f'exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}')
