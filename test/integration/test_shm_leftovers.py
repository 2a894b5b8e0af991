"""The suite removes the shared memory its killed processes leave, and only theirs."""

import signal
import subprocess
import sys

from ros_probe import CHILD_ENV, die_with_parent
from shm_leftovers import is_held, mapped_segments, remove_abandoned, SHM

PARTICIPANT = """
import time
import rclpy
context = rclpy.Context()
rclpy.init(context=context)
node = rclpy.create_node('shm_leftovers_participant', context=context)
print('ready', flush=True)
time.sleep(60)
"""


def test_a_killed_participant_s_segment_is_removed_and_a_live_one_s_kept():
    child = subprocess.Popen([sys.executable, '-c', PARTICIPANT], env=CHILD_ENV,
                             stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    try:
        assert child.stdout.readline().strip() == 'ready'
        segments = mapped_segments(child.pid)
        assert segments, 'the participant maps no Fast DDS segment in /dev/shm'
        assert all(is_held(name) for name in segments)
        assert remove_abandoned(segments, older_than=0.0) == []  # alive: kept
        assert all((SHM / name).exists() for name in segments)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    assert not any(is_held(name) for name in segments)
    assert all((SHM / name).exists() for name in segments)  # what the clean-up is for
    assert sorted(remove_abandoned(segments, older_than=0.0)) == sorted(
        name.removesuffix('_el') for name in segments)
    assert not any((SHM / name).exists() or (SHM / name.removesuffix('_el')).exists()
                   for name in segments)
