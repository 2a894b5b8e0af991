"""ROS plumbing without Gymnasium: private runtime, spin threads, deadline timer, logs, args."""
