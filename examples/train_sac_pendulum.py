"""
Train SAC (Stable-Baselines3) to swing up the simulated pendulum, in real time over ROS 2.

    python examples/train_sac_pendulum.py --steps 20000 --real-time-factor 2

Starts ``sim_robot`` (it owns ``/clock``) in namespace ``/train``, makes ``rtgym_ros/ros-v1``
on ``config/robots/pendulum_sim.yaml`` following that clock, trains SAC, saves the model,
then runs a few deterministic episodes. The model takes the env's own Dict observations, so
the agent node runs it as is: ``agent --ros-args ... -p policy:=sb3:SAC:pendulum_sac.zip``.
With tensorboard installed, training is logged to ``--tensorboard-log`` (SB3's
``tensorboard_log``): ``tensorboard --logdir runs``.
"""

import argparse
import importlib.util
import os
from pathlib import Path
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import gymnasium as gym
import numpy as np
from rtgym_ros.nodes.signals import die_with_parent

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = '/train'
# DDS stays on this machine, in a domain of our own, unless the caller chose one.
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('ROS_DOMAIN_ID', str(1 + os.getpid() % 100))


class TrainBetweenEpisodes(gym.Wrapper):
    """
    Runs SAC's gradient steps at each episode end, while the simulator is paused.

    ros-v1 has ``wait_on_done``: the step that ends an episode stops the robot and pauses the
    sim. SB3's own ``train_freq=(1, 'episode')`` trains later, after its VecEnv has reset the
    env and so started the next episode's first time-step, which then times out. So SB3 only
    collects (``gradient_steps=0``) and we train here: one gradient step per env step. Also
    records the wall time the agent takes between step() calls (it must stay under the
    time-step: T / real_time_factor).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.model: Any = None  # None: collect only (evaluation)
        self.gaps: list[float] = []
        self.train_time, self._returned, self._episode_steps = 0.0, None, 0

    def reset(self, **kwargs: Any) -> tuple:
        obs, info = self.env.reset(**kwargs)
        self._returned, self._episode_steps = time.perf_counter(), 0
        return obs, info

    def step(self, action: Any) -> tuple:
        if self._returned is not None:
            self.gaps.append(time.perf_counter() - self._returned)
        result = self.env.step(action)
        self._episode_steps += 1
        done, model = result[2] or result[3], self.model
        self._returned = None if done else time.perf_counter()
        if done and model is not None and model.num_timesteps >= model.learning_starts:
            started = time.perf_counter()
            model.train(gradient_steps=self._episode_steps, batch_size=model.batch_size)
            self.train_time += time.perf_counter() - started
        return result


def start_sim(opts: argparse.Namespace, log: Path) -> subprocess.Popen:
    """sim_robot owning /clock at real_time_factor x wall time, its output in ``log``."""
    args = [sys.executable, '-m', 'rtgym_ros.nodes.sim_robot', '--ros-args',
            '--params-file', str(REPO / 'config/sim_robot/pendulum.yaml'),
            '-r', f'__ns:={NAMESPACE}', '-p', 'publish_clock:=true',
            '-p', f'real_time_factor:={opts.real_time_factor}',
            '-p', f'clock_rate:={opts.clock_rate}']
    if opts.sensor_rate is not None:
        args += ['-p', f'sensor_rate:={opts.sensor_rate}']
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(REPO), os.environ.get('PYTHONPATH')])))
    return subprocess.Popen(args, env=env, stdout=log.open('w'), stderr=subprocess.STDOUT,
                            preexec_fn=die_with_parent)


def tensorboard_log(directory: str) -> str | None:
    """Return SB3's ``tensorboard_log``: ``directory`` if tensorboard is installed, else None."""
    if not directory:
        return None
    if importlib.util.find_spec('tensorboard') is None:
        print('tensorboard is not installed: training is not logged to TensorBoard '
              '(pip install tensorboard)', flush=True)
        return None
    print(f'TensorBoard logs in {directory}/: tensorboard --logdir {directory}', flush=True)
    return directory


def evaluate(model: Any, env: gym.Env, episodes: int) -> list[float]:
    """Deterministic episodes from random starts; the return sums 500 Pendulum-v1 rewards."""
    returns = []
    for index in range(episodes):
        obs, _ = env.reset(seed=10_000 + index)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(
                model.predict(obs, deterministic=True)[0])
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return returns


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--steps', type=int, default=20_000, help='env steps of training')
    parser.add_argument('--real-time-factor', type=float, default=1.0,
                        help='sim time speed; the wall budget per step is 20 ms / this')
    parser.add_argument('--clock-rate', type=float, default=100.0,
                        help='/clock messages per sim second: each costs every node using sim '
                             'time a callback (and the GIL); T = 20 ms is a multiple of 10 ms')
    parser.add_argument('--sensor-rate', type=float, default=None, help='sim JointState Hz')
    parser.add_argument('--out', default='pendulum_sac.zip', help='where the model is saved')
    parser.add_argument('--eval-episodes', type=int, default=3)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--tensorboard-log', default='runs',
                        help='TensorBoard log directory, used when tensorboard is installed; '
                             "'' for none")
    opts = parser.parse_args()

    import rtgym_ros  # noqa: F401  (registers the env ids)
    from stable_baselines3 import SAC
    import torch
    # One thread: small nets gain nothing from more, and the simulator keeps the other core.
    torch.set_num_threads(1)

    log = Path(tempfile.gettempdir()) / f'train_sac_sim_{os.getpid()}.log'
    sim = start_sim(opts, log)
    env = None
    try:
        env = TrainBetweenEpisodes(gym.make(
            'rtgym_ros/ros-v1', robot_config=str(REPO / 'config/robots/pendulum_sim.yaml'),
            namespace=NAMESPACE, use_sim_time=True))
        env.model = model = SAC(
            'MultiInputPolicy', env,  # the Dict observation as is: the agent node feeds it
            train_freq=(1, 'episode'), gradient_steps=0,  # collect only: see the wrapper
            policy_kwargs={'net_arch': [64, 64]},  # ~5 ms a gradient step on one core
            learning_rate=1e-3,   # rl-zoo's Pendulum-v1 setting
            gamma=0.995,          # 50 Hz is 2.5x Pendulum-v1's rate: a ~4 s horizon
            learning_starts=1000,  # two random episodes fill the buffer first
            batch_size=256, buffer_size=opts.steps, device='cpu', seed=opts.seed,
            tensorboard_log=tensorboard_log(opts.tensorboard_log))
        started = time.perf_counter()
        model.learn(total_timesteps=opts.steps, progress_bar=True, tb_log_name='sac_pendulum')
        train_wall = time.perf_counter() - started
        # SB3 reset the env after the last episode: stop the robot and pause the sim.
        env.unwrapped.wait()
        model.save(opts.out)
        env.model = None
        train_timeouts, gaps = env.unwrapped.timeouts, np.array(env.gaps) * 1e3
        started = time.perf_counter()
        returns = evaluate(model, env, opts.eval_episodes)
        eval_wall = time.perf_counter() - started
    finally:
        if env is not None:
            env.close()
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.kill()

    print(f'trained {opts.steps} steps in {train_wall:.0f} s wall ({env.train_time:.0f} s of '
          f'it gradient steps, sim paused) at real_time_factor {opts.real_time_factor:g}; '
          f'saved {opts.out}')
    print('training episode returns: '
          + ' '.join(f"{info['r']:.0f}" for info in model.ep_info_buffer))
    print(f'agent time between step() calls: p50 {np.percentile(gaps, 50):.2f} / p99 '
          f'{np.percentile(gaps, 99):.2f} / max {gaps.max():.2f} ms '
          f'(budget {20.0 / opts.real_time_factor:.1f} ms)')
    print(f'time-outs: {train_timeouts} in training, '
          f'{env.unwrapped.timeouts - train_timeouts} in evaluation')
    print(f'evaluation, {opts.eval_episodes} deterministic episodes in {eval_wall:.0f} s: '
          f'mean return {np.mean(returns):.1f} ('
          + ', '.join(f'{r:.1f}' for r in returns) + ')')
    return 0


if __name__ == '__main__':
    sys.exit(main())
