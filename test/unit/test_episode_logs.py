"""The agent's logs: per-step CSV rows and the PNG, from episodes made up here."""

import csv

import numpy as np
import pytest
from rtgym_ros.nodes.episode_logs import action_labels, EpisodeRecord, write_csv, write_plot

T = 0.02


def episode(index: int, steps: int, *, timed_out: tuple = (), stale: tuple = ()) -> EpisodeRecord:
    """Make an episode of two slots, joints and a slower scan, and two action values."""
    record = EpisodeRecord(index)
    start = 100.0 * index
    for step in range(steps):
        late = 0.015 if step in timed_out else 0.0
        info = {'capture_time': start + step * T + late,
                'obs_ages': {'joints': 0.004 + 0.001 * (step % 3), 'scan': 0.02 * (step % 5)},
                'stale': ['scan'] if step in stale else []}
        record.add_step(-0.5 * step, info, action=np.array([0.1 * step, -1.0], np.float32),
                        timed_out=step in timed_out)
    return record


@pytest.fixture
def records():
    return [episode(0, 30, stale=(4, 9)), episode(1, 40, timed_out=(7,)), episode(2, 25)]


def test_a_record_keeps_each_slot_and_the_actions():
    record = episode(0, 5, stale=(4,), timed_out=(2,))
    assert list(record.slot_ages) == ['joints', 'scan']  # the config's order
    assert record.ages_of('scan').tolist() == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08])
    assert record.obs_ages[4] == pytest.approx(0.08)  # the oldest slot
    assert record.stale_steps == 1 and record.timed_out == [False, False, True, False, False]
    assert record.actions[3].tolist() == pytest.approx([0.3, -1.0])
    assert record.ret == pytest.approx(-5.0)
    assert np.isnan(record.ages_of('camera')).all()


def test_a_slot_first_seen_later_has_no_age_before():
    record = EpisodeRecord(0)
    record.add_step(0.0, {'obs_ages': {'a': 0.1}}, action=[0.0], timed_out=False)
    record.add_step(0.0, {'obs_ages': {'a': 0.1, 'b': 0.2}}, action=[0.0], timed_out=False)
    assert np.isnan(record.slot_ages['b'][0]) and record.slot_ages['b'][1] == 0.2


def test_action_labels_name_each_value_by_its_group():
    class Group:
        def __init__(self, name, size):
            self.name, self.size = name, size

    assert action_labels([Group('effort', 1), Group('arm', 2)]) == ['effort', 'arm_0', 'arm_1']


def test_csv_has_a_row_per_step_with_actions_ages_and_flags(records, tmp_path):
    path = tmp_path / 'run.csv'
    write_csv(str(path), records, T, action_names=['wheel_0', 'wheel_1'])
    with open(path, newline='') as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 30 + 40 + 25
    assert list(rows[0]) == [
        'episode', 'step', 'capture_time_s', 'nominal_time_s', 'spacing_error_ms', 'obs_age_ms',
        'reward', 'timed_out', 'age_joints_ms', 'age_scan_ms', 'stale_joints', 'stale_scan',
        'action_wheel_0', 'action_wheel_1']
    row = rows[4]
    assert (row['episode'], row['step'], row['stale_scan'], row['stale_joints']) == (
        '0', '4', '1', '0')
    assert float(row['age_scan_ms']) == pytest.approx(80.0)
    assert float(row['action_wheel_0']) == pytest.approx(0.4)
    late = rows[30 + 7]
    assert (late['episode'], late['step'], late['timed_out']) == ('1', '7', '1')
    assert float(late['spacing_error_ms']) == pytest.approx(15.0)
    assert sum(int(row['timed_out']) for row in rows) == 1
    assert rows[30]['spacing_error_ms'] == ''  # the first step of an episode has no spacing


def test_plot_is_a_png_of_returns_ages_and_timing(records, tmp_path):
    pytest.importorskip('matplotlib', reason="the plot needs matplotlib: pip install '.[plot]'")
    path = tmp_path / 'run.png'
    write_plot(str(path), records, T, title='agent /r1/agent: policy random',
               max_ages={'joints': 0.01, 'scan': 0.15})
    data = path.read_bytes()
    assert data.startswith(b'\x89PNG\r\n\x1a\n') and len(data) > 20_000
