"""``python -m rtgym_ros.nodes.sim_robot --ros-args ...``: run the node."""

import sys

from rtgym_ros.nodes.sim_robot import main

sys.exit(main())
