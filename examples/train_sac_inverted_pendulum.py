"""
Train SAC on InvertedPendulum through ROS 2 topics in lockstep, and on Gymnasium in-process.

    python examples/train_sac_inverted_pendulum.py --mode both --steps 20000 --seeds 0 1 2
    python examples/train_sac_inverted_pendulum.py --mode realtime \
        --model runs/sac_inverted_pendulum/sac_topics_seed0.zip

``topics``: ``mujoco_sim`` runs ``config/mujoco_sim/inverted_pendulum.yaml`` as a child process
with ``stepping:=lockstep`` (it owns /clock and steps only when asked on ``step_until``), and
the env is ``rtgym_ros/ros-v1`` on ``config/robots/mujoco_inverted_pendulum.yaml`` with the
lockstep overrides. ``inprocess``: Gymnasium's ``InvertedPendulum-v5``. Both train the same
SAC (``MultiInputPolicy``, ``train_freq=1``, ``gradient_steps=1``, ``SAC_KWARGS``) on a Dict
with ``joints`` = [x, theta, x_dot, theta_dot], evaluated with deterministic actions every
``--eval-every`` steps. One difference stays: as in rtgym, the ROS env's ``step(a)`` returns
the state at the start of the step in which ``a`` acts, so its observation also holds
``action_buffer`` (the action being applied) to stay Markov; Gymnasium's has no such delay.
``realtime``: a saved topics model runs on the wall clock against ``mujoco_sim`` in real time.
Writes ``returns.csv``, ``summary.md``, ``learning_curves.png`` and the models to ``--out``.
"""

import argparse
import contextlib
import csv
from dataclasses import dataclass, field
import os
from pathlib import Path
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterator, Sequence

import gymnasium as gym
import numpy as np

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = '/pendulum'
ROBOT_CONFIG = REPO / 'config/robots/mujoco_inverted_pendulum.yaml'
SIM_CONFIG = REPO / 'config/mujoco_sim/inverted_pendulum.yaml'
# The robot config with the env in lockstep: it asks mujoco_sim for each time-step on
# step_until and follows its /clock.
LOCKSTEP = {'stepping': 'lockstep', 'step': {'topic': 'step_until'}, 'use_sim_time': True}
MODES = ('topics', 'inprocess')
# SB3's defaults ([256, 256], learning rate 3e-4) reached returns of about 100 in 10 000 steps
# in both modes; small nets are also ~3x cheaper per gradient step on one core.
SAC_KWARGS = {'policy_kwargs': {'net_arch': [64, 64]}, 'learning_rate': 1e-3}


class JointsDict(gym.ObservationWrapper):
    """Give InvertedPendulum-v5's observation the ROS env's ``joints`` entry: a Dict."""

    def __init__(self, env: gym.Env, space: gym.spaces.Dict) -> None:
        super().__init__(env)
        self.observation_space = space

    def observation(self, observation: np.ndarray) -> dict:
        """Wrap the 4 values; the dtype is the ROS env's."""
        dtype = self.observation_space['joints'].dtype
        return {'joints': np.asarray(observation, dtype=dtype)}


@dataclass
class RunResult:
    """What one (mode, seed) training gave."""

    mode: str
    seed: int
    checkpoints: list[tuple[int, list[float]]] = field(default_factory=list)
    train_wall: float = 0.0       # learn() only, evaluations excluded
    train_steps: int = 0
    random_wall: float = 0.0      # step() with random actions, resets excluded
    random_steps: int = 0
    reset_wall: float = 0.0       # the resets those steps needed
    resets: int = 0
    timeouts: int = 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; ``--mode both`` trains topics and inprocess, seed by seed."""
    parser = argparse.ArgumentParser(
        description=__doc__.strip().split('\n')[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument('--mode', choices=('both', *MODES, 'realtime'), default='both')
    parser.add_argument('--steps', type=int, default=20_000, help='env steps of training')
    parser.add_argument('--seeds', type=int, nargs='+', default=[0])
    parser.add_argument('--out', type=Path, default=Path('runs/sac_inverted_pendulum'))
    parser.add_argument('--eval-every', type=int, default=1000, help='env steps')
    parser.add_argument('--eval-episodes', type=int, default=3)
    parser.add_argument('--learning-starts', type=int, default=1000)
    parser.add_argument('--random-steps', type=int, default=2000,
                        help='env steps with random actions, timed before each training')
    parser.add_argument('--model', type=Path, default=None,
                        help='realtime: the saved topics model to run')
    parser.add_argument('--episodes', type=int, default=3, help='realtime: episodes to run')
    opts = parser.parse_args(argv)
    for name in ('steps', 'eval_every', 'eval_episodes', 'episodes'):
        if getattr(opts, name) < 1:
            parser.error(f'--{name.replace("_", "-")} must be at least 1, got '
                         f'{getattr(opts, name)}')
    if opts.mode == 'realtime' and opts.model is None:
        parser.error('--mode realtime needs --model (a zip that --mode topics saved)')
    return opts


def modes_of(mode: str) -> tuple[str, ...]:
    """Return the training modes ``--mode`` names."""
    return MODES if mode == 'both' else (mode,)


@contextlib.contextmanager
def sim_process(log: Path, *params: str) -> Iterator[subprocess.Popen]:
    """Run mujoco_sim on the pendulum in ``NAMESPACE`` with ``params``; SIGINT it after."""
    from rtgym_ros.nodes.signals import die_with_parent
    args = [sys.executable, '-m', 'rtgym_ros.nodes.mujoco_sim', '--ros-args',
            '--params-file', str(SIM_CONFIG), '-r', f'__ns:={NAMESPACE}']
    for param in params:
        args += ['-p', param]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(REPO), os.environ.get('PYTHONPATH')])))
    sim = subprocess.Popen(args, env=env, stdout=log.open('w'), stderr=subprocess.STDOUT,
                           preexec_fn=die_with_parent)
    try:
        yield sim
    finally:
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.kill()


def ros_env(**overrides: Any) -> gym.Env:
    """Make ros-v1 on the pendulum's robot config, as InvertedPendulum-v5 sees it."""
    import rtgym_ros  # noqa: F401  (registers the env ids)
    return gym.make('rtgym_ros/ros-v1', robot_config=str(ROBOT_CONFIG), namespace=NAMESPACE,
                    **overrides)


@contextlib.contextmanager
def make_env(mode: str, seed: int, space: gym.spaces.Dict | None) -> Iterator[gym.Env]:
    """Yield the env of ``mode``: for topics, with its lockstep simulator running."""
    if mode == 'inprocess':
        env = JointsDict(gym.make('InvertedPendulum-v5'), space)
        try:
            yield env
        finally:
            env.close()
        return
    log = Path(tempfile.gettempdir()) / f'train_sac_ip_sim_{os.getpid()}_{seed}.log'
    with sim_process(log, 'stepping:=lockstep', f'seed:={seed}'):
        env = ros_env(**LOCKSTEP)
        try:
            yield env
        finally:
            env.close()


def time_random_steps(env: gym.Env, steps: int, seed: int) -> tuple[float, float, int]:
    """Return the wall time of ``steps`` random-action steps, of their resets, and the resets."""
    env.action_space.seed(seed)
    step_wall = reset_wall = 0.0
    resets, done = 0, True
    for index in range(steps):
        if done:
            started = time.perf_counter()
            env.reset(seed=seed if index == 0 else None)
            reset_wall += time.perf_counter() - started
            resets += 1
        action = env.action_space.sample()
        started = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        step_wall += time.perf_counter() - started
        done = terminated or truncated
    return step_wall, reset_wall, resets


def evaluate(model: Any, env: gym.Env, episodes: int, seed: int) -> list[float]:
    """Return the returns of deterministic episodes (the ROS sim draws its own starts)."""
    returns = []
    for index in range(episodes):
        obs, _ = env.reset(seed=seed + index)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(
                model.predict(obs, deterministic=True)[0])
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return returns


def make_sac(env: gym.Env, seed: int, learning_starts: int) -> Any:
    """Build the same SAC for every mode: SB3's defaults but for ``SAC_KWARGS``."""
    from stable_baselines3 import SAC
    return SAC('MultiInputPolicy', env, learning_starts=learning_starts, seed=seed,
               device='cpu', verbose=0, **SAC_KWARGS)


def train(mode: str, seed: int, opts: argparse.Namespace, space: gym.spaces.Dict) -> RunResult:
    """Time random steps, then train in chunks of ``eval_every`` with evaluations between."""
    result = RunResult(mode, seed)
    with make_env(mode, seed, space) as env:
        result.random_steps = opts.random_steps
        result.random_wall, result.reset_wall, result.resets = time_random_steps(
            env, opts.random_steps, seed)
        base_timeouts = env.unwrapped.timeouts if mode == 'topics' else 0
        model = make_sac(env, seed, opts.learning_starts)
        while result.train_steps < opts.steps:
            chunk = min(opts.eval_every, opts.steps - result.train_steps)
            started = time.perf_counter()
            model.learn(total_timesteps=chunk, reset_num_timesteps=False)
            result.train_wall += time.perf_counter() - started
            result.train_steps = model.num_timesteps
            returns = evaluate(model, env, opts.eval_episodes, 10_000 * (seed + 1))
            result.checkpoints.append((result.train_steps, returns))
            print(f'{mode:9s} seed {seed} | {result.train_steps:6d} steps | eval return '
                  f'{np.mean(returns):7.1f} | {result.train_wall:6.0f} s training', flush=True)
            # The evaluation used the env: the next chunk starts from a reset.
            model._last_obs = None
        if mode == 'topics':
            result.timeouts = env.unwrapped.timeouts - base_timeouts
        opts.out.mkdir(parents=True, exist_ok=True)
        model.save(opts.out / f'sac_{mode}_seed{seed}.zip')
    return result


def csv_rows(results: Sequence[RunResult]) -> list[dict]:
    """Return one row per evaluation episode: mode, seed, env_steps, episode_return."""
    return [{'mode': r.mode, 'seed': r.seed, 'env_steps': steps, 'episode_return': value}
            for r in results for steps, returns in r.checkpoints for value in returns]


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    """Write ``rows`` with a header."""
    with path.open('w', newline='') as file:
        writer = csv.DictWriter(file, fieldnames=['mode', 'seed', 'env_steps',
                                                  'episode_return'])
        writer.writeheader()
        writer.writerows(rows)


def curves(rows: Sequence[dict]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per mode: checkpoints and, per seed (rows) and checkpoint, the mean return."""
    out = {}
    for mode in dict.fromkeys(row['mode'] for row in rows):
        mine = [row for row in rows if row['mode'] == mode]
        steps = np.array(sorted({row['env_steps'] for row in mine}))
        seeds = sorted({row['seed'] for row in mine})
        means = np.full((len(seeds), len(steps)), np.nan)
        for i, seed in enumerate(seeds):
            for j, step in enumerate(steps):
                values = [row['episode_return'] for row in mine
                          if row['seed'] == seed and row['env_steps'] == step]
                if values:
                    means[i, j] = np.mean(values)
        out[mode] = (steps, means)
    return out


def summary_table(results: Sequence[RunResult]) -> str:
    """Return the markdown table: final return and wall time per 1000 env steps, per mode."""
    lines = ['| mode | seeds | final return, mean (per seed) | s / 1000 steps, random '
             'actions | reset (ms) | s / 1000 steps, learning | time-outs |',
             '|---|---|---|---|---|---|---|']
    for mode in dict.fromkeys(r.mode for r in results):
        mine = [r for r in results if r.mode == mode]
        finals = [float(np.mean(r.checkpoints[-1][1])) for r in mine]
        random_s = [1000 * r.random_wall / r.random_steps for r in mine]
        reset_ms = [1000 * r.reset_wall / r.resets for r in mine]
        learn_s = [1000 * r.train_wall / r.train_steps for r in mine]
        timeouts = sum(r.timeouts for r in mine) if mode == 'topics' else '–'
        lines.append(
            f'| {mode} | {len(mine)} | {np.mean(finals):.1f} ('
            + ', '.join(f'{f:.0f}' for f in finals) + f') | {np.mean(random_s):.2f} | '
            f'{np.mean(reset_ms):.2f} | {np.mean(learn_s):.2f} | {timeouts} |')
    return '\n'.join(lines)


def plot(path: Path, rows: Sequence[dict], steps_label: str) -> None:
    """Plot the return vs env steps per mode: mean over seeds, the range shaded."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(6, 3.6), dpi=100)
    for mode, (steps, means) in curves(rows).items():
        line, = axes.plot(steps, np.nanmean(means, axis=0), marker='o', markersize=3,
                          label=f'{mode} ({means.shape[0]} seeds)')
        axes.fill_between(steps, np.nanmin(means, axis=0), np.nanmax(means, axis=0),
                          color=line.get_color(), alpha=0.2)
    axes.set_xlabel('env steps')
    axes.set_ylabel('deterministic evaluation return')
    axes.set_title(f'SAC on InvertedPendulum: {steps_label}', fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def run_realtime(opts: argparse.Namespace) -> int:
    """Run the model on the wall clock: mujoco_sim in real time, the env in real time."""
    from stable_baselines3 import SAC
    log = Path(tempfile.gettempdir()) / f'train_sac_ip_realtime_{os.getpid()}.log'
    with sim_process(log, 'stepping:=realtime'):
        env = ros_env()
        try:
            model = SAC.load(opts.model, device='cpu')
            returns, lengths = [], []
            for index in range(opts.episodes):
                started = time.perf_counter()
                returns += evaluate(model, env, 1, index)
                lengths.append(time.perf_counter() - started)
                print(f'episode {index} | return {returns[-1]:7.1f} | {lengths[-1]:5.1f} s '
                      f'wall | time-outs so far {env.unwrapped.timeouts}', flush=True)
            timeouts = env.unwrapped.timeouts
        finally:
            env.close()
    print(f'real time, {opts.episodes} episodes: mean return {np.mean(returns):.1f} ('
          + ', '.join(f'{r:.0f}' for r in returns) + f'), time-outs {timeouts}')
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Train the modes seed by seed (interleaved: they see the same machine load)."""
    opts = parse_args(argv)
    # DDS stays on this machine, in a domain of our own, unless the caller chose one.
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    os.environ.setdefault('ROS_DOMAIN_ID', str(101 + os.getpid() % 100))
    if opts.mode == 'realtime':
        return run_realtime(opts)
    import torch
    torch.set_num_threads(1)  # small nets gain nothing; the simulator keeps the other core
    space = None
    results = []
    load_before = os.getloadavg()
    started = time.perf_counter()
    for seed in opts.seeds:
        for mode in modes_of(opts.mode):
            if mode == 'inprocess' and space is None:
                space = joints_space()
            results.append(train(mode, seed, opts, space))
    opts.out.mkdir(parents=True, exist_ok=True)
    rows = csv_rows(results)
    write_csv(opts.out / 'returns.csv', rows)
    table = summary_table(results) + (
        '\n\nload averages (1, 5, 15 min) before: '
        + ', '.join(f'{v:.2f}' for v in load_before) + '; after: '
        + ', '.join(f'{v:.2f}' for v in os.getloadavg())
        + f'; whole run {time.perf_counter() - started:.0f} s wall')
    (opts.out / 'summary.md').write_text(table + '\n')
    plot(opts.out / 'learning_curves.png', rows, f'{opts.steps} steps, '
         f'{opts.eval_episodes} evaluation episodes per point')
    print(table)
    print(f"wrote {opts.out / 'returns.csv'}, {opts.out / 'summary.md'}, "
          f"{opts.out / 'learning_curves.png'}")
    return 0


def joints_space() -> gym.spaces.Dict:
    """Return the ROS env's observation space without the action buffer (no node needed)."""
    from rtgym_ros.robot.env import resolve_robot_config, robot_spaces
    from rtgym_ros.robot.loader import load_robot_config
    env_config, spec = load_robot_config(ROBOT_CONFIG, namespace=NAMESPACE, act_in_obs=False)
    return robot_spaces(resolve_robot_config(env_config), spec)[2]


if __name__ == '__main__':
    sys.exit(main())
