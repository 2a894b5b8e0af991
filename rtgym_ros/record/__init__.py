"""Recorded episodes: a rosbag2 (MCAP) of what the env received and sent, and its steps."""
