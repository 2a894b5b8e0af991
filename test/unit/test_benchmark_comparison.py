"""
How the benchmarks compare rtgym_ros with rtgym and with the host's floor.

Paired runs and counted time-outs (``step_timing.py``, ``comparison.py``); stalls that recur
at one period (``host_floor.py``); the threads' CPU and wake-ups as /proc gives them.

The benchmarks are scripts beside the package, not modules of it: loaded from their folder.
"""

import math
import os
from pathlib import Path
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / 'benchmarks'


@pytest.fixture(scope='module')
def bench() -> SimpleNamespace:
    """Import the benchmark modules from their folder, as the scripts import each other."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_support
        import comparison
        import host_floor
        import in_process
        import step_timing
    finally:
        sys.path.remove(str(BENCHMARKS))
    return SimpleNamespace(comparison=comparison, host_floor=host_floor, step_timing=step_timing,
                           support=bench_support, in_process=in_process)


def _pmf(k: int, n: int, p: float) -> float:
    return math.comb(n, k) * p**k * (1.0 - p) ** (n - k)


@pytest.mark.parametrize('successes, trials, expected', [
    (5, 10, (0.18709, 0.81291)),  # R: binom.test(5, 10)$conf.int
    (0, 10, (0.0, 0.30850)),
    (10, 10, (0.69150, 1.0)),
    (1, 1000, (0.0000253, 0.0055589)),
])
def test_the_binomial_interval_is_clopper_pearsons(bench, successes, trials, expected):
    low, high = bench.comparison.binomial_interval(successes, trials)
    assert low == pytest.approx(expected[0], rel=1e-3, abs=1e-9)
    assert high == pytest.approx(expected[1], rel=1e-3, abs=1e-9)


@pytest.mark.parametrize('p', [0.02, 0.3, 0.5, 0.9])
def test_the_binomial_interval_covers_the_proportion_at_least_as_often_as_it_says(
        bench, p):
    trials = 25
    intervals = [bench.comparison.binomial_interval(k, trials) for k in range(trials + 1)]
    covered = sum(_pmf(k, trials, p) for k, (low, high) in enumerate(intervals)
                  if low <= p <= high)
    assert covered >= 0.95


def test_counts_that_differ_by_chance_hold_1_and_far_apart_do_not(bench):
    ratio = bench.comparison.count_ratio_interval
    assert ratio(18, 15)[0] < 1.0 < ratio(18, 15)[1]
    assert ratio(40, 10)[0] > 1.0
    assert ratio(10, 40)[1] < 1.0
    assert ratio(0, 0) is None
    assert math.isinf(ratio(5, 0)[1]) and ratio(0, 5)[0] == 0.0


def test_bad_counts_are_refused(bench):
    with pytest.raises(ValueError, match='counts must be >= 0'):
        bench.comparison.count_ratio_interval(-1, 3)
    with pytest.raises(ValueError, match='successes must be within 0..trials'):
        bench.comparison.binomial_interval(4, 3)
    with pytest.raises(ValueError, match='as many of each env, got 2 and 1'):
        bench.comparison.paired_ratios([1.0, 2.0], [1.0])


@pytest.mark.parametrize('n, ranks', [(6, (1, 6)), (10, (2, 9)), (20, (6, 15)), (50, (18, 33))])
def test_the_median_interval_takes_the_sign_tests_order_statistics(bench, n, ranks):
    values = [float(v) for v in range(n, 0, -1)]  # the n-th smallest is n: ranks read as values
    assert bench.comparison.median_interval(values) == ranks


@pytest.mark.parametrize('n', range(6, 41))
def test_the_median_interval_covers_as_often_as_it_says_and_no_wider(bench, n):
    low, _ = bench.comparison.median_interval([float(v) for v in range(1, n + 1)])
    k = int(low)
    miss = 2 * sum(_pmf(j, n, 0.5) for j in range(k))
    assert miss <= 0.05  # [x_(k), x_(n+1-k)] misses the median this often
    assert 2 * sum(_pmf(j, n, 0.5) for j in range(k + 1)) > 0.05  # k + 1 would not do


@pytest.mark.parametrize('differences, expected', [
    ([1.0] * 9 + [-1.0], 2 * 11 / 1024),  # R: binom.test(9, 10)$p.value
    ([-1.0] * 9 + [1.0], 2 * 11 / 1024),
    ([1.0] * 5 + [-1.0] * 5, 1.0),
    ([1.0] * 6 + [0.0, math.nan], 2 / 64),  # zeros and NaN are no trial
    ([0.0, 0.0], 1.0),
])
def test_the_sign_test_is_the_two_sided_binomial_test(bench, differences, expected):
    assert bench.comparison.sign_test(differences) == pytest.approx(expected, rel=1e-9)


def test_in_process_blocks_rotate_the_order_and_put_the_package_back(bench):
    put = []
    variants = {name: (lambda name=name: put.append(name)) for name in ('package', 'a', 'b')}
    results = bench.in_process.rotated_blocks(lambda: None, variants, rounds=4, steps=2)
    assert put == ['package', 'a', 'b', 'a', 'b', 'package', 'b', 'package', 'a',
                   'package', 'a', 'b', 'package']
    assert {name: len(blocks) for name, blocks in results.items()} == dict.fromkeys(variants, 4)

    def failing_step() -> None:
        if put[-1] == 'a':
            raise RuntimeError('a step failed')

    put.clear()
    with pytest.raises(RuntimeError, match='a step failed'):
        bench.in_process.rotated_blocks(failing_step, variants, rounds=1, steps=1)
    assert put == ['package', 'a', 'package']


def test_in_process_blocks_count_the_cpu_they_are_given(bench):
    # A block of 4 steps, each costing the counted CPU 3 µs (the package) or 5 µs ('a'):
    # what is counted is the clock given (the env's threads), not the caller's thread.
    counted = [0]
    costs = {'package': 3_000, 'a': 5_000}
    current = ['package']
    variants = {name: (lambda name=name: current.__setitem__(0, name)) for name in costs}

    def step() -> None:
        counted[0] += costs[current[0]]
    results = bench.in_process.rotated_blocks(step, variants, rounds=2, steps=4,
                                              cpu_ns=lambda: counted[0])
    assert results == {'package': [3.0, 3.0], 'a': [5.0, 5.0]}
    assert bench.in_process.table_header("the env's threads").startswith(
        "| rate | variant | the env's threads (µs / step), median |")


def test_in_process_rows_give_each_variant_minus_the_package_block_by_block(bench):
    rows = bench.in_process.table_rows(100.0, {'package': [10.0, 20.0, 30.0],
                                               'slower': [12.0, 19.0, 34.0]})
    assert rows == ['| 100 Hz | package | 20.0 | – | – | – |',
                    '| 100 Hz | slower | 19.0 | 2.0 | 2 of 3 | 1.000 |']


def test_five_values_or_nan_ones_give_no_median_interval(bench):
    interval = bench.comparison.median_interval
    assert interval([1.0, 2.0, 3.0, 4.0, 5.0]) is None
    assert interval([1.0, 2.0, 3.0, 4.0, 5.0, math.nan]) is None
    assert interval([0.9, 1.1, 1.2, 1.3, 1.4, 1.5, math.nan]) == (0.9, 1.5)
    with pytest.raises(ValueError, match=r'confidence must be in \(0, 1\), got 1.0'):
        interval([1.0] * 6, confidence=1.0)


def test_six_pairs_all_above_1_say_more_and_one_below_says_chance(bench):
    rows = bench.step_timing.paired_rows
    assert rows(_pairs([110.0, 120.0, 130.0, 140.0, 150.0, 160.0]))[0][4] == '1.10–1.60 (more)'
    assert rows(_pairs([90.0, 120.0, 130.0, 140.0, 150.0, 160.0]))[0][4] == '0.90–1.60 (chance)'
    assert rows(_pairs([80.0] * 6))[0][4] == '0.80–0.80 (less)'


def test_the_p99_ratio_has_its_own_interval(bench):
    rows = bench.step_timing.paired_rows
    row = rows(_pairs([120.0] * 6, [40.0, 45.0, 48.0, 52.0, 55.0, 60.0]))[0]
    assert row[4] == '1.20–1.20 (more)'
    assert row[6] == '0.80–1.20 (chance)'
    assert rows(_pairs([120.0] * 6, [30.0] * 6))[0][6] == '0.60–0.60 (less)'


def test_a_bound_just_above_1_is_not_printed_as_1(bench):
    rows = bench.step_timing.paired_rows
    assert rows(_pairs([100.4, 101.0, 101.2, 101.2, 101.2, 101.8]))[0][4] == '1.004–1.02 (more)'
    assert rows(_pairs([100.0, 101.0, 101.2, 101.2, 101.2, 101.8]))[0][4] == '1.00–1.02 (chance)'


def _pairs(ours_cpu: list[float], ours_p99: list[float] | None = None) -> list[dict]:
    """Our runs, each beside an rtgym run of 100 µs of CPU per step and a p99 of 50 µs."""
    results = []
    for cpu, p99 in zip(ours_cpu, ours_p99 or [50.0] * len(ours_cpu)):
        results += [_run('rtgym_ros', cpu, p99, 0), _run('rtgym', 100.0, 50.0, 0)]
    return results


def _run(env: str, cpu: float, p99: float, timeouts: int, rate: float = 1000.0) -> dict:
    return {'env': env, 'rate_hz': rate, 'load': 'sleep', 'cpu_per_step_us': cpu,
            'p99_us': p99, 'timeouts': timeouts}


def test_each_run_is_paired_with_the_other_envs_run_of_the_same_round(bench):
    step_timing = bench.step_timing
    results = [_run('rtgym', 100.0, 50.0, 2), _run('rtgym_ros', 120.0, 40.0, 3),
               _run('rtgym_ros', 90.0, 60.0, 1), _run('rtgym', 100.0, 30.0, 0),
               _run('rtgym', 50.0, 10.0, 5, rate=100.0)]  # no rtgym_ros beside it: no row
    rows = step_timing.paired_rows(results)
    assert len(rows) == 1
    rate, load, against, cpu, cpu_interval, p99, p99_interval, timeouts, interval, work = rows[0]
    assert (rate, load, against) == ('1 kHz', 'sleep', 'rtgym')
    assert work == '–'  # the sleeping agent counts no work
    assert cpu == '1.05 (1.20, 0.90)'
    assert cpu_interval == '– (6 pairs or more)'
    assert p99 == '1.40 (0.80, 2.00)'
    assert p99_interval == '– (6 pairs or more)'
    assert timeouts == '4 / 2'
    assert interval.endswith('(chance)')


def test_a_busy_agents_work_is_paired_as_its_cpu_is(bench):
    runs = [{**_run('rtgym_ros', 120.0, 40.0, 0), 'work_per_step': 110.0},
            {**_run('rtgym', 100.0, 50.0, 0), 'work_per_step': 100.0},
            {**_run('rtgym_ros', 90.0, 60.0, 0), 'work_per_step': 95.0},
            {**_run('rtgym', 100.0, 50.0, 0), 'work_per_step': 100.0}]
    assert bench.step_timing.paired_rows(runs)[0][9] == '1.02 (1.10, 0.95)'
    runs[3]['work_per_step'] = None  # a run that counted none: no ratio
    assert bench.step_timing.paired_rows(runs)[0][9] == '–'


def test_a_failed_run_leaves_out_its_pair_only(bench):
    step_timing = bench.step_timing
    failed = {'env': 'rtgym', 'rate_hz': 1000.0, 'load': 'sleep', 'error': 'crashed'}
    results = [_run('rtgym', 100.0, 50.0, 2), _run('rtgym_ros', 120.0, 40.0, 3),
               _run('rtgym_ros', 90.0, 60.0, 1), failed,
               _run('rtgym', 50.0, 10.0, 0), _run('rtgym_ros', 60.0, 30.0, 4)]
    rows = step_timing.paired_rows(results)
    assert [row[3:8] for row in rows] == [['1.20 (1.20, 1.20)', '– (6 pairs or more)',
                                           '1.90 (0.80, 3.00)', '– (6 pairs or more)', '7 / 2']]
    assert step_timing.paired_rows(results[1:4]) == []


def test_a_stall_is_listed_with_its_time_and_error(bench):
    step_timing = bench.step_timing
    captures = [0.001 * k for k in range(step_timing.WARMUP_STEPS + 10)]
    captures[step_timing.WARMUP_STEPS + 4:] = [t + 0.0008 for t in
                                               captures[step_timing.WARMUP_STEPS + 4:]]
    summary = step_timing._summary(captures, 0.001)
    assert summary['stalls'] == [[0.0048, 800]]
    assert summary['max_us'] == pytest.approx(800.0)


def test_stalls_at_multiples_of_one_period_are_found_among_others(bench):
    times = [0.3 + 0.512 * k + 0.001 * (-1) ** k for k in (0, 1, 2, 4, 5, 8)] + [3.5]
    period, fits, intervals = bench.host_floor.recurring_period(sorted(times))
    assert period == pytest.approx(0.512, abs=0.003)
    assert (fits, intervals) == (4, 6)  # 3.5 s breaks two intervals: 0.64 and 0.9 s fit none
    assert bench.host_floor.recurring_period([1.0]) is None
    assert bench.host_floor.recurring_period([1.0, 1.01]) is None  # shorter than any period asked


def test_the_host_floor_runs_and_prints_a_row_per_part(bench, capsys):
    assert bench.host_floor.main(['--parts', 'sleep', 'spin', '--rates', '1000',
                                  '--seconds', '0.05']) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith('| s')]
    assert [row.split('|')[1].strip() for row in rows] == ['sleep', 'spin']
    assert '| 50 |' in rows[0]


def test_a_run_of_late_wake_ups_is_one_stall(bench):
    import numpy as np
    times = np.arange(8) * 0.001
    late = np.array([False, True, True, True, False, False, True, False])
    assert bench.host_floor.stall_starts(times, late).tolist() == [0.001, 0.006]


def test_a_short_period_that_chance_explains_is_not_reported(bench):
    import numpy as np
    for seed in range(20):
        times = np.cumsum(np.random.default_rng(seed).uniform(0.2, 1.5, size=40))
        assert bench.host_floor.recurring_period(times) is None


def test_a_run_too_short_for_two_wake_ups_is_refused(bench, capsys):
    with pytest.raises(SystemExit):
        bench.host_floor.main(['--rates', '100', '--seconds', '0.01'])
    assert 'must give 2 wake-ups or more, got 0.01 s and [100.0] Hz' in capsys.readouterr().err


def test_each_threads_cpu_and_wake_ups_are_read_as_proc_gives_them(bench):
    """The bytes reader against /proc's text files, read the plain way; and counts that move."""
    import threading
    import time

    ready, go = threading.Event(), threading.Event()

    def named_and_waiting() -> None:  # the name the kernel gives is the one read back
        with open(f'/proc/self/task/{threading.get_native_id()}/comm', 'w') as comm:
            comm.write('bench-helper')
        ready.set()
        go.wait()

    helper = threading.Thread(target=named_and_waiting)
    helper.start()
    ready.wait()
    this = threading.get_native_id()
    try:
        before = bench.support.thread_costs()
        spent = time.thread_time_ns()
        while time.thread_time_ns() - spent < 60_000_000:
            pass
        for _ in range(3):
            time.sleep(0.001)
        spent = time.thread_time_ns() - spent
        after = bench.support.thread_costs()
        # The helper is blocked: its counts hold still while read again (other threads of the
        # test process may come, go or wake meanwhile).
        base = f'/proc/self/task/{helper.native_id}/'
        with open(base + 'comm') as comm, open(base + 'status') as status:
            plain = (comm.read().strip(), next(int(line.split()[1]) for line in status
                                               if line.startswith('voluntary_ctxt_switches')))
    finally:
        go.set()
        helper.join()
    name, _, switches = after[helper.native_id]
    assert (name, switches) == plain and name == 'bench-helper'
    # The CPU spent between the reads, as this thread's clock counts it; schedstat may lag a
    # running thread by a scheduler tick at each read.
    assert abs((after[this][1] - before[this][1]) - spent) < 25_000_000
    assert after[this][2] - before[this][2] >= 3  # the three sleeps
    assert bench.support.thread_costs(pid=2**22 + 1) == {}  # no such process


def test_the_idle_agent_is_asked_for_by_name(bench):
    parse = bench.step_timing._parse_args
    assert parse([]).loads == ['sleep', 'numpy', 'python']
    assert parse(['--loads', 'idle']).loads == ['idle']


def test_a_fixed_agent_does_its_count_whatever_the_time(bench):
    fixed_load = bench.step_timing.fixed_load
    assert fixed_load('numpy', 3)(0.0) == 3
    started = time.perf_counter()
    assert fixed_load('python', 250)(60.0) == 200  # whole chunks of 100; the 60 s ignored
    assert time.perf_counter() - started < 5.0
    with pytest.raises(ValueError, match=r"needs a busy load, one of \['numpy', 'python'\], "
                                         r"got 'sleep'"):
        fixed_load('sleep', 1)


def test_the_fixed_count_is_the_work_of_half_a_step_with_no_env(bench):
    count = bench.step_timing.calibrate('python', 1000.0, runs=3)
    assert count > 0 and count % 100 == 0  # whole chunks, done in 0.5 ms
    assert bench.step_timing._parse_args([]).agent_work == 'wall'
    assert bench.step_timing._parse_args(['--agent-work', 'fixed']).agent_work == 'fixed'


def test_a_cell_with_a_fixed_count_does_it_every_measured_step(bench, monkeypatch):
    for key in ('ROS_DOMAIN_ID', 'ROS_AUTOMATIC_DISCOVERY_RANGE'):  # the cell joins the bench's
        monkeypatch.setenv(key, os.environ.get(key, ''))
    result = bench.step_timing.run_cell('rtgym', 200.0, 'numpy', 25, options={}, work_count=3)
    assert (result['agent_work'], result['work_count']) == ('fixed', 3)
    assert result['work_per_step'] == 3.0


def test_a_benchmarks_child_ends_with_the_benchmark(bench):
    script = ('import os, sys\n'
              f'sys.path.insert(0, {str(BENCHMARKS)!r})\n'
              'import bench_support\n'
              "child = bench_support.Child('sleeper', ['sleep', '60'], env=dict(os.environ))\n"
              'print(child.proc.pid, flush=True)\n'
              'os._exit(0)  # killed, or left without stopping its children\n')
    done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                          timeout=60, check=True)
    pid = int(done.stdout.split()[-1])
    deadline = time.monotonic() + 20.0
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid), 'the sleeper outlived the process that started it'


def _running(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat') as stat:
            return stat.read().rsplit(')', 1)[1].split()[0] != 'Z'  # a zombie has ended
    except FileNotFoundError:
        return False


def test_the_numpy_agents_matrices_start_on_a_cache_line_in_any_process():
    from rtgym_ros.nodes.timing_demo import cache_aligned, CACHE_LINE, numpy_operands
    padding = [np.empty(size, dtype=np.uint8) for size in range(1, 200, 7)]  # move the heap on
    for values in [np.arange(4096.0).reshape(64, 64), np.arange(3, dtype=np.float32)]:
        copies = [cache_aligned(values) for _ in padding]
        assert all(copy.ctypes.data % CACHE_LINE == 0 for copy in copies)
        assert all(np.array_equal(copy, values) and copy.dtype == values.dtype
                   for copy in copies)
    a, b, out = numpy_operands()
    assert [m.ctypes.data % CACHE_LINE for m in (a, b, out)] == [0, 0, 0]
    again = numpy_operands()
    assert np.array_equal(a, again[0]) and np.array_equal(b, again[1])  # every process's
