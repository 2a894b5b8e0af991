"""
Variants of one piece of the step path, priced inside one env process.

A few µs per step are less than the spread between two processes of the same env
(``step_timing.py``'s pairs), so a change that small is priced in one process: blocks of
steps with each variant in turn, the order rotated every round, the CPU per step of each
block (the user's thread's, ``time.thread_time``, or the whole process's), and each variant's
difference to the package's block of its round, with a sign test.
"""

import contextlib
import os
import statistics
import time
from typing import Any, Callable, Iterator

from bench_support import Child, join_bench_domain, rate_label
from comparison import sign_test
from scale import _start_sims, ENV_CONFIG


@contextlib.contextmanager
def beside_one_sim(prefix: str) -> Iterator[None]:
    """
    Run the body beside one ``sim_robot`` pendulum in ``/{prefix}_0``, this process on its domain.

    The load average is printed before and after, as the tables of these benchmarks give it.
    """
    sims: list[Child] = []
    try:
        _start_sims(prefix, 1, join_bench_domain(), sims)
        print(f'load average before: {os.getloadavg()[0]:.2f}')
        yield
        print(f'load average after: {os.getloadavg()[0]:.2f}')
    finally:
        for sim in sims:
            sim.stop()


def pendulum_env(prefix: str, rate: float, robot_config: str = ENV_CONFIG) -> Any:
    """Make a ``ros-v1`` env at ``rate`` on :func:`beside_one_sim`'s pendulum; endless episodes."""
    import gymnasium
    import rtgym_ros  # noqa: F401 - registers the env ids
    return gymnasium.make('rtgym_ros/ros-v1', robot_config=robot_config,
                          namespace=f'/{prefix}_0', time_step_duration=1.0 / rate,
                          start_obs_capture=1.0 / rate, ep_max_length=10 ** 9,
                          reset_timeout=15.0)


def rotated_blocks(step: Callable[[], object], variants: dict[str, Callable[[], None]], *,
                   rounds: int, steps: int,
                   cpu_ns: Callable[[], int] = time.thread_time_ns) -> dict[str, list[float]]:
    """
    Return µs of CPU per step, block by block, for each variant.

    :param step: one step of the env (the idle agent: called again at once).
    :param variants: name: what puts that variant in place; the package's comes first, and
        is put back at the end.
    :param cpu_ns: the CPU counted: the user's thread's, or ``time.process_time_ns`` for the
        env's threads too.
    """
    names = list(variants)
    results: dict[str, list[float]] = {name: [] for name in names}
    try:
        for round_ in range(rounds):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                variants[name]()
                for _ in range(5):  # the first steps after the other variant
                    step()
                cpu = cpu_ns()
                for _ in range(steps):
                    step()
                results[name].append((cpu_ns() - cpu) / steps / 1e3)
    finally:
        variants[names[0]]()
    return results


def table_header(counted: str = "user's thread") -> str:
    """Return the header of :func:`table_rows`'s table; ``counted``: whose CPU it is."""
    return (f"| rate | variant | {counted} (µs / step), median | minus the package's, "
            'median (µs) | blocks where it costs more | sign test p |\n'
            '|---|---|---:|---:|---|---:|')


def table_rows(rate: float, results: dict[str, list[float]]) -> list[str]:
    """Return the markdown rows of :func:`table_header` for one rate; the package's first."""
    names = list(results)
    package = results[names[0]]
    rows = [f'| {rate_label(rate)} | {names[0]} | {statistics.median(package):.1f} '
            '| – | – | – |']
    for name in names[1:]:
        differences = [a - b for a, b in zip(results[name], package)]
        above = sum(d > 0 for d in differences)
        p = sign_test(differences)
        rows.append(f'| {rate_label(rate)} | {name} | {statistics.median(results[name]):.1f} '
                    f'| {statistics.median(differences):.1f} | {above} of {len(differences)} '
                    f"| {'< 0.001' if p < 0.001 else f'{p:.3f}'} |")
    return rows
