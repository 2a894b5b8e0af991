"""
The Python sources ament's linters check: ours, not the venv, build or install trees.

A ROS package's linter tests scan the package directory; here that directory also holds
``.venv``, ``build/`` and ``install/`` once ``tools/test`` ran, so the paths are explicit.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINTED = [str(REPO / name) for name in
          ('rtgym_ros', 'test', 'benchmarks', 'launch', 'examples', 'setup.py')]
