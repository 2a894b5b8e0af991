#!/usr/bin/env python3
"""
A JointState slot's take and read, priced: Python floats against numpy's arrays.

A ``ros-v1`` env takes each JointState on its io thread (the bytes read by
``joint_state_cdr.decode``) and reads the slot at each capture on its executor thread (the
slot's reader). Both run right after a wake-up, when each numpy call costs several
microseconds. The package reads a message's position, velocity and effort as tuples of
Python floats, and a reader of a few scalar or JointState values lists them and makes its
array with one numpy call. The variants:

- ``arrays at the take``: each sequence read as a read-only numpy view on the bytes
  (``cdr.read_doubles``), as ``multi_array_cdr`` reads a command;
- ``numpy's read``: the reader's field-by-field path (``read_with_numpy``) at each capture,
  as for an array field or many values;
- ``both``.

Every variant reads the same values (``test_a_few_values_are_read_as_numpy_reads_them``,
``test_decode_reads_what_rclpy_reads_from_rclpys_bytes``).

One env on ``config/robots/pendulum_sim.yaml`` (one joint, position and velocity) against a
``sim_robot`` pendulum publishing at 100 Hz; the CPU per step of the env's threads (the io
thread that takes the messages, the executor thread that captures, the watchdog's), in blocks
of steps with each variant in turn inside the env's process (``in_process.py``), the idle
agent's zero action. The user's thread and Fast DDS's are left out: they do the same in every
variant, and their spread would hide a few microseconds.

    python3 benchmarks/joint_read.py                 # 50 Hz, about 3 minutes
    python3 benchmarks/joint_read.py --rates 50 100 --rounds 30
"""

import argparse
import threading
import time
from typing import Any, Callable

from bench_support import rate_label, threads_cpu_ns  # noqa: I100
from in_process import beside_one_sim, pendulum_env, rotated_blocks, table_header, table_rows
import numpy as np

PREFIX = 'joint_read'  # the sim's namespace: /joint_read_0


def measure(rate: float, rounds: int, steps: int) -> tuple[dict[str, list[float]], dict]:
    """
    Return µs of the env's threads' CPU per step, block by block, for each variant.

    And for each variant the µs of its io thread per message taken (the subscription's
    callback) and of its executor thread per slot read at a capture.
    """
    from rtgym_ros.msgconv import cdr, joint_state_cdr
    from rtgym_ros.msgconv.readers import FieldReader

    env = pendulum_env(PREFIX, rate)
    unwrapped: Any = env.unwrapped
    slot = unwrapped.interface.slots[0]
    reader: Any = slot.spec.reader
    assert isinstance(reader, FieldReader) and reader.joint_names, 'a JointState slot'
    package_read, numpy_read = reader.read, reader.read_with_numpy
    package_take = joint_state_cdr.read_floats
    in_place: dict[str, dict[str, list[int]]] = {}  # variant: 'take'/'read': [ns, calls]
    current = ['package']

    def using(name: str, take: Callable[..., tuple],
              read: Callable[[Any], np.ndarray]) -> Callable[[], None]:
        in_place[name] = {'take': [0, 0], 'read': [0, 0]}

        def put() -> None:
            joint_state_cdr.read_floats = take
            reader.read = read
            current[0] = name
        return put

    def timed(function: Callable[..., Any], part: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            start = time.thread_time_ns()
            try:
                return function(*args)
            finally:
                spent = in_place[current[0]][part]
                spent[0] += time.thread_time_ns() - start
                spent[1] += 1
        return call

    variants = {'package': using('package', package_take, package_read),
                'arrays at the take': using('arrays at the take', cdr.read_doubles,
                                            package_read),
                "numpy's read": using("numpy's read", package_take, numpy_read),
                'both': using('both', cdr.read_doubles, numpy_read)}
    subscription = unwrapped.interface._subscriptions[0]
    subscription.callback = timed(subscription.callback, 'take')  # rclpy reads it each time
    slot.read = timed(slot.read, 'read')
    action = np.zeros(unwrapped.action_space.shape, dtype=np.float32)
    try:
        env.reset()
        for _ in range(int(rate)):  # a second: the env's caches and the host settle
            env.step(action)
        env_threads = [thread.native_id for thread in threading.enumerate()
                       if thread.name.startswith('rtgym_ros:')]
        blocks = rotated_blocks(lambda: env.step(action), variants, rounds=rounds,
                                steps=steps, cpu_ns=lambda: threads_cpu_ns(env_threads))
    finally:
        variants['package']()
        env.close()
    per_call = {name: {part: ns / max(1, calls) / 1e3 for part, (ns, calls) in parts.items()}
                for name, parts in in_place.items()}
    return blocks, per_call


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rates', type=float, nargs='+', default=[50.0])
    parser.add_argument('--rounds', type=int, default=20, help='blocks of each variant (20)')
    parser.add_argument('--seconds', type=float, default=2.0, help='per block (2.0)')
    args = parser.parse_args()
    with beside_one_sim(PREFIX):
        rows, parts = [], []
        for rate in args.rates:
            blocks, per_call = measure(rate, args.rounds, max(10, int(rate * args.seconds)))
            rows += table_rows(rate, blocks)
            parts += [f'| {rate_label(rate)} | {name} | {part["take"]:.1f} | {part["read"]:.1f} |'
                      for name, part in per_call.items()]
        print(table_header("the env's threads"))
        print('\n'.join(rows))
        print('\n| rate | variant | io thread, µs per message taken | executor thread, µs per '
              'read |\n|---|---|---:|---:|')
        print('\n'.join(parts))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
