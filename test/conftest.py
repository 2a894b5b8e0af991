"""
Keep DDS traffic on this machine and on a domain of its own for every test run.

Tiers: ``unit/`` (no messages over DDS: params files are read by rcl through a throw-away
node, and subprocesses only run command lines that start no node), ``integration/`` (real DDS,
processes); the helpers both use live in ``support/``, importable by name.
"""

import os
from pathlib import Path
import sys

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / 'support'))

os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
# tools/test sets a per-run domain; a bare `pytest` gets one derived from its pid.
os.environ.setdefault('ROS_DOMAIN_ID', str(1 + os.getpid() % 100))
# A node process that crashes in C (rcl, Fast DDS) prints its Python stack to the stderr the
# test shows (pytest does the same for its own process).
os.environ.setdefault('PYTHONFAULTHANDLER', '1')


@pytest.fixture(scope='session', autouse=True)
def _no_shared_memory_left_behind():
    """Remove the Fast DDS segments of the run's killed processes (shm_leftovers)."""
    from shm_leftovers import remove_abandoned, segment_locks
    before = segment_locks()
    yield
    remove_abandoned(segment_locks() - before)


def _probe_node():
    from ros_probe import Probe
    node = Probe()
    yield node
    node.close()


@pytest.fixture(scope='module')
def probe():
    """Give the tests of a module one node of their own (ros_probe.Probe)."""
    yield from _probe_node()


@pytest.fixture
def fresh_probe():
    """
    Give a test a probe of its own: a participant that no other has come to and left yet.

    For a test whose bound leaves discovery under 3 s. In these Fast DDS wheels a new
    participant often takes about 3 s to find one that has seen others come and go, against
    0.1 s for a fresh one (measured with a script outside the suite); and twice an env did not
    find a stand-in service made on a module-wide probe within 30 s. A module uses it as its
    ``probe`` by overriding that fixture.
    """
    yield from _probe_node()
