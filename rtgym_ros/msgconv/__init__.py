"""ROS messages and numpy: message types from strings, field readers, field writers, images."""
