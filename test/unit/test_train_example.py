"""
The pure parts of ``examples/train_sac_inverted_pendulum.py``: options, CSV rows, curves, table.

The example is a script, not a module of the package: it is loaded from its path. Training
itself is not run here (minutes of CPU); its results are in benchmarks/RESULTS.md.
"""

import csv
import importlib.util
from pathlib import Path

import numpy as np
import pytest

PATH = Path(__file__).resolve().parents[2] / 'examples' / 'train_sac_inverted_pendulum.py'


@pytest.fixture(scope='module')
def example():
    spec = importlib.util.spec_from_file_location('train_sac_inverted_pendulum', PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def results(example):
    """Two seeds of topics, one of inprocess, with known checkpoints and times."""
    run = example.RunResult
    return [
        run('topics', 0, [(1000, [10.0, 20.0]), (2000, [1000.0, 1000.0])], train_wall=30.0,
            train_steps=2000, random_wall=2.0, random_steps=1000, reset_wall=0.5, resets=25,
            timeouts=1),
        run('topics', 1, [(1000, [30.0, 30.0]), (2000, [900.0, 700.0])], train_wall=50.0,
            train_steps=2000, random_wall=4.0, random_steps=1000, reset_wall=1.5, resets=25,
            timeouts=2),
        run('inprocess', 0, [(1000, [5.0, 15.0]), (2000, [1000.0, 1000.0])], train_wall=20.0,
            train_steps=2000, random_wall=0.05, random_steps=1000, reset_wall=0.01, resets=20),
    ]


def test_defaults_and_modes(example):
    opts = example.parse_args([])
    assert (opts.mode, opts.steps, opts.seeds, opts.eval_every) == ('both', 20_000, [0], 1000)
    assert example.modes_of('both') == ('topics', 'inprocess')
    assert example.modes_of('inprocess') == ('inprocess',)
    opts = example.parse_args(['--mode', 'topics', '--seeds', '3', '4', '--steps', '500'])
    assert (opts.mode, opts.seeds, opts.steps) == ('topics', [3, 4], 500)


@pytest.mark.parametrize('argv, message', [
    (['--steps', '0'], '--steps must be at least 1, got 0'),
    (['--eval-episodes', '0'], '--eval-episodes must be at least 1, got 0'),
    (['--mode', 'realtime'], '--mode realtime needs --model'),
    (['--mode', 'sideways'], "invalid choice: 'sideways'"),
])
def test_bad_options_say_why(example, capsys, argv, message):
    with pytest.raises(SystemExit) as raised:
        example.parse_args(argv)
    assert raised.value.code == 2
    assert message in capsys.readouterr().err


def test_csv_has_one_row_per_evaluation_episode(example, tmp_path):
    rows = example.csv_rows(results(example))
    assert len(rows) == 12
    assert rows[2] == {'mode': 'topics', 'seed': 0, 'env_steps': 2000, 'episode_return': 1000.0}
    path = tmp_path / 'returns.csv'
    example.write_csv(path, rows)
    with path.open() as file:
        read = list(csv.DictReader(file))
    assert list(read[0]) == ['mode', 'seed', 'env_steps', 'episode_return']
    assert read[-1] == {'mode': 'inprocess', 'seed': '0', 'env_steps': '2000',
                        'episode_return': '1000.0'}


def test_curves_average_the_episodes_of_each_seed(example):
    curves = example.curves(example.csv_rows(results(example)))
    steps, means = curves['topics']
    assert steps.tolist() == [1000, 2000]
    np.testing.assert_allclose(means, [[15.0, 1000.0], [30.0, 800.0]])
    assert curves['inprocess'][1].shape == (1, 2)


def test_table_has_the_final_return_and_the_times_per_1000_steps(example):
    table = example.summary_table(results(example)).splitlines()
    assert table[0].startswith('| mode | seeds | final return')
    # Final: the mean of the last checkpoint per seed (1000, 800); random steps 2 and 4 s per
    # 1000; resets 20 and 60 ms; learning 15 and 25 s per 1000 steps; 1 + 2 time-outs.
    assert table[2] == '| topics | 2 | 900.0 (1000, 800) | 3.00 | 40.00 | 20.00 | 3 |'
    assert table[3] == '| inprocess | 1 | 1000.0 (1000) | 0.05 | 0.50 | 10.00 | – |'
