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


@pytest.fixture(scope='module')
def probe():
    """Give the tests of a module one node of their own (ros_probe.Probe)."""
    from ros_probe import Probe
    node = Probe()
    yield node
    node.close()
