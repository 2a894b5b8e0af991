"""The ROS-free layers import without rclpy (and without Gymnasium): a fresh interpreter each."""

from pathlib import Path
import subprocess
import sys

import pytest

REPO = Path(__file__).resolve().parents[2]
_BLOCKER = """
import sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {blocked!r}:
            raise ImportError(f'{{name}} is blocked in this test')
sys.meta_path.insert(0, Blocked())
import {module}
leaked = sorted(m for m in sys.modules if m.split('.')[0] in {blocked!r})
assert not leaked, leaked
print('imported', {module!r})
"""


def _import_without(module: str, blocked: tuple[str, ...]) -> subprocess.CompletedProcess:
    code = _BLOCKER.format(module=module, blocked=blocked)
    return subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize('module', ['rtgym_ros', 'rtgym_ros.core.schedule',
                                    'rtgym_ros.core.time_step', 'rtgym_ros.core.config',
                                    'rtgym_ros.core.timing', 'rtgym_ros.sim',
                                    'rtgym_ros.sim.controllers', 'rtgym_ros.sim.tasks',
                                    'rtgym_ros.sim.mujoco_model', 'rtgym_ros.sim.mujoco_tasks'])
def test_ros_free_layers_import_without_rclpy_or_gymnasium(module):
    result = _import_without(module, ('rclpy', 'gymnasium'))
    assert result.returncode == 0, result.stderr


def test_the_blocker_does_block():
    result = _import_without('rtgym_ros.env', ('rclpy',))
    assert result.returncode != 0 and 'rclpy' in result.stderr
