"""``python -m rtgym_ros.nodes.mujoco_sim --ros-args ...``: run the node."""

import sys

from rtgym_ros.nodes.mujoco_sim import main

sys.exit(main())
