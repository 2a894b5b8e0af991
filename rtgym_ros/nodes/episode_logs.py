"""
What the agent node keeps of each episode, and the logs it writes: a CSV and a PNG.

The CSV has one row per step: its timing, reward, the action ``step()`` was given, each slot's
observation age and stale flag, and whether the step timed out. The PNG shows the returns of
every episode, each slot's observation age over all steps (its ``max_age`` and the stale steps
marked), and the capture timing with the time-outs marked.
"""

import csv
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rtgym_ros.core.timing import capture_spacing_errors


@dataclass
class EpisodeRecord:
    """What one episode did, step by step (node-clock times, seconds)."""

    index: int
    rewards: list[float] = field(default_factory=list)
    capture_times: list[float] = field(default_factory=list)
    obs_ages: list[float] = field(default_factory=list)
    """The oldest slot's age at each step."""
    slot_ages: dict[str, list[float]] = field(default_factory=dict)
    """Each slot's age at each step."""
    stale: list[tuple[str, ...]] = field(default_factory=list)
    """The stale slots of each step."""
    timed_out: list[bool] = field(default_factory=list)
    """Whether each step's time-step started late (a time-out)."""
    actions: list[np.ndarray] = field(default_factory=list)
    """The action each ``step()`` was given (as applied: after the env's bounds checks)."""
    timeouts: int = 0
    wall_time: float = 0.0

    def add_step(self, reward: float, info: dict, *, action: Any, timed_out: bool) -> None:
        """Keep one step: its reward, ``info`` (ages, stale slots, capture time) and action."""
        step = len(self.rewards)
        self.rewards.append(float(reward))
        self.capture_times.append(float(info.get('capture_time', np.nan)))
        ages = info.get('obs_ages', {})
        self.obs_ages.append(max(ages.values()) if ages else np.nan)
        for name in dict.fromkeys([*ages, *self.slot_ages]):  # the config's order
            self.slot_ages.setdefault(name, [np.nan] * step).append(ages.get(name, np.nan))
        self.stale.append(tuple(info.get('stale', ())))
        self.timed_out.append(bool(timed_out))
        self.actions.append(np.array(action, dtype=np.float64).reshape(-1))

    def ages_of(self, slot: str) -> np.ndarray:
        """Return a slot's age at each step, in seconds (NaN where it had none)."""
        return np.asarray(self.slot_ages.get(slot, [np.nan] * len(self.rewards)), np.float64)

    @property
    def ret(self) -> float:
        return float(np.sum(self.rewards))

    @property
    def stale_steps(self) -> int:
        return sum(bool(names) for names in self.stale)

    def spacing_errors(self, period: float) -> np.ndarray:
        """|capture spacing - T| in seconds (the first step after reset excluded)."""
        return capture_spacing_errors(self.capture_times, period)


def action_labels(groups: Any) -> list[str]:
    """Name each action value by its group: ``effort``, or ``arm_0``, ``arm_1`` for several."""
    labels = []
    for group in groups:
        labels += [group.name] if group.size == 1 else [f'{group.name}_{i}'
                                                        for i in range(group.size)]
    return labels


def write_csv(path: str, records: list[EpisodeRecord], period: float, *,
              action_names: list[str] | None = None) -> None:
    """
    Write one row per step of every episode.

    Columns: ``episode, step, capture_time_s, nominal_time_s, spacing_error_ms, obs_age_ms``
    (the oldest slot's), ``reward, timed_out`` (0/1), then per slot ``age_<slot>_ms`` and
    ``stale_<slot>`` (0/1), then ``action_<name>`` per action value.
    """
    slots = _slot_names(records)
    width = max((record.actions[0].size for record in records if record.actions), default=0)
    names = list(action_names or [])
    names += [str(i) for i in range(len(names), width)]
    with open(path, 'w', newline='') as handle:
        writer = csv.writer(handle)
        writer.writerow(['episode', 'step', 'capture_time_s', 'nominal_time_s',
                         'spacing_error_ms', 'obs_age_ms', 'reward', 'timed_out',
                         *(f'age_{slot}_ms' for slot in slots),
                         *(f'stale_{slot}' for slot in slots),
                         *(f'action_{name}' for name in names[:width])])
        for record in records:
            start = record.capture_times[0] if record.capture_times else 0.0
            previous = None
            for step, capture in enumerate(record.capture_times):
                error = '' if previous is None else f'{(capture - previous - period) * 1e3:.4f}'
                ages = [record.ages_of(slot)[step] for slot in slots]
                writer.writerow([
                    record.index, step, f'{capture:.6f}', f'{start + step * period:.6f}', error,
                    f'{record.obs_ages[step] * 1e3:.3f}', f'{record.rewards[step]:.6f}',
                    int(record.timed_out[step]), *(f'{age * 1e3:.3f}' for age in ages),
                    *(int(slot in record.stale[step]) for slot in slots),
                    *(f'{value:.6g}' for value in record.actions[step])])
                previous = capture


def write_plot(path: str, records: list[EpisodeRecord], period: float, *, title: str = '',
               max_ages: dict[str, float | None] | None = None) -> None:
    """Write a PNG: returns per episode, each slot's observation age, capture timing."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("timing_plot needs matplotlib: pip install 'rtgym_ros[plot]'")
    max_ages = max_ages or {}
    figure, (returns, ages, timing) = plt.subplots(
        3, 1, figsize=(12, 10), gridspec_kw={'height_ratios': [1, 1.3, 1.3]})
    figure.suptitle(title or 'agent')

    indices = [record.index for record in records]
    returns.bar(indices, [record.ret for record in records], color='tab:blue', width=0.6)
    returns.axhline(0.0, color='black', linewidth=0.5)
    if len(indices) <= 30:
        returns.set_xticks(indices)
    returns.set_xlabel('episode')
    returns.set_ylabel('return')
    returns.set_title('Return per episode')

    starts = np.cumsum([0] + [len(record.rewards) for record in records])
    steps = np.arange(starts[-1])
    for axes in (ages, timing):
        for start in starts[1:-1]:
            axes.axvline(start - 0.5, color='grey', linestyle=':', linewidth=0.8)
        axes.set_xlim(-0.5, max(starts[-1] - 0.5, 0.5))
        axes.set_xlabel(f'step, all episodes (dotted: episode starts; T = {period * 1e3:g} ms)')

    for color, slot in zip(_colors(plt), _slot_names(records)):
        values = np.concatenate([record.ages_of(slot) for record in records]) * 1e3
        ages.plot(steps, values, '.-', color=color, markersize=2, linewidth=0.6, label=slot)
        stale = np.array([slot in names for record in records for names in record.stale])
        if stale.any():
            ages.plot(steps[stale], values[stale], 'x', color=color, markersize=6,
                      label=f'{slot}: stale')
        if max_ages.get(slot) is not None:
            ages.axhline(max_ages[slot] * 1e3, color=color, linestyle='--', linewidth=1.0,
                         label=f'{slot}: max_age')
    ages.set_ylabel('observation age at capture (ms)')
    ages.set_title('Observation age per slot')
    ages.legend(loc='upper left', bbox_to_anchor=(1.01, 1.0), fontsize='small')

    errors = np.concatenate([np.r_[np.nan, np.diff(record.capture_times) - period]
                             for record in records]) * 1e3
    timing.plot(steps, errors, '.', color='tab:blue', markersize=3,
                label='capture spacing - T')
    timed_out = np.concatenate([record.timed_out for record in records]).astype(bool)
    if timed_out.any():
        low, high = np.nanmin(np.r_[errors, 0.0]), np.nanmax(np.r_[errors, 0.0])
        timing.vlines(steps[timed_out], low, high, color='tab:red', linewidth=1.0,
                      label=f'time-out ({int(timed_out.sum())})')
    timing.axhline(0.0, color='black', linewidth=0.5)
    timing.set_ylabel('capture spacing error (ms)')
    timing.set_title('Capture timing')
    timing.legend(loc='upper left', bbox_to_anchor=(1.01, 1.0), fontsize='small')
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _slot_names(records: list[EpisodeRecord]) -> list[str]:
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record.slot_ages))
    return list(names)


def _colors(plt: Any) -> list[str]:
    cycle = plt.rcParams['axes.prop_cycle'].by_key().get('color', ['tab:blue'])
    return [cycle[i % len(cycle)] for i in range(64)]
