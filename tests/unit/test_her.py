"""HERReplayBuffer / HERVectorReplayBuffer: relabelling on hand-built episodes, the relabel probability,
n-step targets along relabelled goals, save/load and sampler-state round trips, input errors, and the
BitFlippingEnv that the learning test uses.

Hand-built episodes encode where every goal came from: the achieved goal after step ``t`` of episode
``ep`` of env ``e`` is ``1000 * (e + 1) + 10 * ep + t + 1`` (one number), and every stored desired goal is
-1, so a relabelled goal names its column, episode and step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from tshtrain.algorithm import DQN, DQNParams, EpsilonSchedule, QValuePolicy, encoder_mlp, obs_encoder
from tshtrain.data import (
    Collector,
    HERReplayBuffer,
    HERVectorReplayBuffer,
    VectorReplayBuffer,
    load_buffer,
    load_buffer_into,
    save_buffer,
)
from tshtrain.data.her import BaseHERBuffer
from tshtrain.env import BIT_FLIPPING_ID, BitFlippingEnv, make_vector_env, register_goal_envs
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams
from tshtrain.checkpoint import CheckpointManager, CheckpointParams


def equal_reward(achieved: np.ndarray, desired: np.ndarray, info: Mapping[str, Any]) -> np.ndarray:
    """0 where the goals are equal, -1 elsewhere (the sparse reward of goal envs)."""
    del info
    return np.all(achieved == desired, axis=-1).astype(np.float32) - 1.0


def goal_code(env: int, episode: int, step: int) -> float:
    return float(1000 * (env + 1) + 10 * episode + step + 1)


def decode(goal: float) -> tuple[int, int, int]:
    code = int(goal)
    return code // 1000 - 1, (code % 1000) // 10, code % 10 - 1


def add_episodes(
    buffer: BaseHERBuffer, lengths_per_env: Sequence[Sequence[int]], *, last_open: bool = False
) -> None:
    """Add the episodes env by env (``env_ids``), each ending truncated (the last episode of every env
    stays open with ``last_open``)."""
    for env, lengths in enumerate(lengths_per_env):
        for ep, length in enumerate(lengths):
            for t in range(length):
                ends = t == length - 1 and not (last_open and ep == len(lengths) - 1)
                achieved_before = goal_code(env, ep, t - 1) if t else 0.0
                obs = {
                    "observation": np.array([[achieved_before]], dtype=np.float32),
                    "achieved_goal": np.array([[achieved_before]], dtype=np.float32),
                    "desired_goal": np.array([[-1.0]], dtype=np.float32),
                }
                achieved = goal_code(env, ep, t)
                obs_next = {
                    "observation": np.array([[achieved]], dtype=np.float32),
                    "achieved_goal": np.array([[achieved]], dtype=np.float32),
                    "desired_goal": np.array([[-1.0]], dtype=np.float32),
                }
                buffer.add(
                    obs=obs,
                    act=np.array([t]),
                    rew=np.array([-1.0]),
                    terminated=np.array([False]),
                    truncated=np.array([ends]),
                    obs_next=obs_next,
                    env_ids=np.array([env]),
                )


def check_relabelled_batch(buffer: BaseHERBuffer, batch_size: int) -> np.ndarray:
    """Sample, check every transition's goal, reward and consistency; the relabelled mask."""
    batch = buffer.sample(batch_size)
    assert isinstance(batch.obs, dict) and isinstance(batch.obs_next, dict)
    goal_N = batch.obs["desired_goal"][:, 0]
    np.testing.assert_array_equal(batch.obs_next["desired_goal"][:, 0], goal_N)
    achieved_next_N = batch.obs_next["achieved_goal"][:, 0]
    relabelled_N = goal_N != -1.0
    for goal, achieved_next in zip(goal_N[relabelled_N], achieved_next_N[relabelled_N], strict=True):
        env, ep, step = decode(goal)
        own_env, own_ep, own_step = decode(achieved_next)
        assert (env, ep) == (own_env, own_ep), "a goal from another env or episode"
        assert step >= own_step, "a goal achieved before the transition"
    expected_rew = np.where(relabelled_N, np.where(goal_N == achieved_next_N, 0.0, -1.0), -1.0)
    np.testing.assert_array_equal(batch.rew, expected_rew.astype(np.float32))
    # the storage is never written
    stored = buffer.chronological_indices()
    assert np.all(buffer.field_at("obs/desired_goal", stored) == -1.0)
    assert np.all(buffer.field_at("obs_next/desired_goal", stored) == -1.0)
    assert np.all(buffer.field_at("rew", stored) == -1.0)
    return relabelled_N


def test_goals_come_from_later_steps_of_the_same_episode_and_env() -> None:
    buffer = HERVectorReplayBuffer(60, 3, equal_reward, num_future_goals=1e9, seed=0)
    add_episodes(buffer, [[3, 4, 2], [5, 1], [1, 6]])
    relabelled = check_relabelled_batch(buffer, 4000)
    assert relabelled.mean() > 0.999
    # every (env, episode, step) goal that may be drawn is drawn: the draw covers the future uniformly
    batch = buffer.sample(4000)
    assert isinstance(batch.obs, dict)
    seen = {decode(g) for g in batch.obs["desired_goal"][:, 0]}
    expected = {
        (e, ep, t)
        for e, lens in enumerate([[3, 4, 2], [5, 1], [1, 6]])
        for ep, n in enumerate(lens)
        for t in range(n)
    }
    assert seen == expected


def test_wrapped_columns_and_open_episodes_never_leak() -> None:
    # capacity 7 per column: env 0's first episode is partly overwritten, env 1's last episode is open
    buffer = HERVectorReplayBuffer(14, 2, equal_reward, num_future_goals=1e9, seed=1)
    add_episodes(buffer, [[4, 3, 3], [2, 5]], last_open=True)
    assert len(buffer) == 14
    relabelled = check_relabelled_batch(buffer, 3000)
    assert relabelled.mean() > 0.999


def test_future_offsets_are_uniform_over_the_rest_of_the_episode() -> None:
    buffer = HERReplayBuffer(10, equal_reward, num_future_goals=1e9, seed=2)
    add_episodes(buffer, [[4]])
    relabel = buffer.draw_relabel(np.zeros(8000, dtype=np.int64))  # step 0 of the 4-step episode
    counts = np.bincount(relabel.future_indices, minlength=4)
    np.testing.assert_array_equal(buffer.episode_steps_left(np.arange(4)), [3, 2, 1, 0])
    assert counts.shape == (4,) and np.all(np.abs(counts / 8000 - 0.25) < 0.02), counts


@pytest.mark.parametrize(("num_future_goals", "expected"), [(4.0, 0.8), (1.0, 0.5), (7.0, 0.875), (0.0, 0.0)])
def test_relabel_probability_is_k_over_k_plus_one(num_future_goals: float, expected: float) -> None:
    buffer = HERVectorReplayBuffer(40, 2, equal_reward, num_future_goals=num_future_goals, seed=3)
    add_episodes(buffer, [[5, 5, 5, 5], [10, 10]])
    assert buffer.relabel_probability == pytest.approx(expected)
    num = 20_000
    relabel = buffer.draw_relabel(buffer.sample_indices(num))
    sigma = np.sqrt(expected * (1 - expected) / num)
    assert abs(relabel.relabelled.mean() - expected) <= 4 * sigma + 1e-12
    # a relabelled goal may equal the stored one only if drawn so; it never changes without the flag
    stored = buffer.field_at("obs/desired_goal", relabel.indices)
    assert np.all(relabel.desired_goal[~relabel.relabelled] == stored[~relabel.relabelled])


def test_nstep_targets_follow_the_relabelled_goal() -> None:
    buffer = HERReplayBuffer(20, equal_reward, num_future_goals=1e9, seed=4)
    add_episodes(buffer, [[6, 3]])
    gamma = 0.5
    batch = buffer.sample(200)
    assert isinstance(batch.obs, dict)
    targets = buffer.nstep_targets(batch.indices, n_step=3, gamma=gamma)
    assert isinstance(targets.obs_next, dict)
    np.testing.assert_array_equal(targets.obs_next["desired_goal"], batch.obs["desired_goal"])
    for i, idx in enumerate(batch.indices):
        goal = batch.obs["desired_goal"][i, 0]
        env, ep, _ = decode(goal)  # relabelled: every goal comes from the buffer's own episodes
        chain = [int(idx)]
        for _ in range(2):
            nxt = int(buffer.next_index(np.array([chain[-1]]))[0])
            if nxt == chain[-1]:
                break
            chain.append(nxt)
        achieved = buffer.field_at("obs_next/achieved_goal", np.array(chain))[:, 0]
        rewards = np.where(achieved == goal, 0.0, -1.0)
        expected = sum(gamma**k * r for k, r in enumerate(rewards))
        assert targets.returns[i] == pytest.approx(expected), (idx, goal, chain)
        assert targets.discounts[i] == pytest.approx(gamma ** len(chain))
        np.testing.assert_array_equal(targets.obs_next["achieved_goal"][i], [achieved[-1]])
        assert (env, ep) == decode(batch.obs_next["achieved_goal"][i, 0])[:2]
    # other indices (not the batch just sampled) use the stored goals and rewards
    plain = buffer.nstep_targets(np.array([0, 1]), n_step=2, gamma=gamma)
    np.testing.assert_allclose(plain.returns, [-1.5, -1.5])


def test_same_seed_same_batches_and_sampler_state_round_trip() -> None:
    def build() -> HERVectorReplayBuffer:
        buffer = HERVectorReplayBuffer(40, 2, equal_reward, seed=5)
        add_episodes(buffer, [[5, 5, 5], [7, 8]])
        return buffer

    first, second = build(), build()
    a, b = first.sample(64), second.sample(64)
    assert isinstance(a.obs, dict) and isinstance(b.obs, dict)
    np.testing.assert_array_equal(a.obs["desired_goal"], b.obs["desired_goal"])
    state = first.sampler_state()
    expected = first.sample(64)
    first.load_sampler_state(state)
    again = first.sample(64)
    assert isinstance(expected.obs, dict) and isinstance(again.obs, dict)
    np.testing.assert_array_equal(expected.indices, again.indices)
    np.testing.assert_array_equal(expected.obs["desired_goal"], again.obs["desired_goal"])
    np.testing.assert_array_equal(expected.rew, again.rew)


def test_save_load_round_trip(tmp_path: Path) -> None:
    buffer = HERVectorReplayBuffer(40, 2, equal_reward, seed=6)
    add_episodes(buffer, [[5, 4, 6], [3, 9]], last_open=True)
    buffer.sample(32)  # sampling leaves the storage as collected
    save_buffer(buffer, tmp_path / "her")
    loaded = load_buffer_into(HERVectorReplayBuffer(40, 2, equal_reward, seed=0), tmp_path / "her")
    for name, arr in buffer.field_arrays().items():
        np.testing.assert_array_equal(loaded.field_arrays()[name], arr)
    assert loaded.layout() == buffer.layout()
    loaded.load_sampler_state(buffer.sampler_state())
    a, b = buffer.sample(128), loaded.sample(128)
    assert isinstance(a.obs, dict) and isinstance(b.obs, dict)
    np.testing.assert_array_equal(a.obs["desired_goal"], b.obs["desired_goal"])
    np.testing.assert_array_equal(a.rew, b.rew)
    # without the reward function (never read from a file) load_buffer gives a plain buffer
    plain = load_buffer(tmp_path / "her")
    assert type(plain) is VectorReplayBuffer and len(plain) == len(buffer)


def test_loading_a_buffer_without_goals_is_refused_before_anything_changes(tmp_path: Path) -> None:
    plain = VectorReplayBuffer(8, 2)
    plain.add(
        obs=np.zeros((2, 3)),
        act=np.zeros(2, dtype=np.int64),
        rew=np.zeros(2),
        terminated=np.zeros(2, dtype=bool),
        truncated=np.zeros(2, dtype=bool),
        obs_next=np.zeros((2, 3)),
    )
    save_buffer(plain, tmp_path / "plain")
    target = HERVectorReplayBuffer(8, 2, equal_reward)
    with pytest.raises(ConfigurationError, match=r"the loaded buffer has an array observation; HER needs"):
        load_buffer_into(target, tmp_path / "plain")
    assert len(target) == 0 and not target.is_allocated


def dict_add(buffer: BaseHERBuffer, obs: dict[str, np.ndarray]) -> None:
    buffer.add(
        obs=obs,
        act=np.zeros(1, dtype=np.int64),
        rew=np.zeros(1),
        terminated=np.zeros(1, dtype=bool),
        truncated=np.zeros(1, dtype=bool),
        obs_next=obs,
    )


def test_input_errors_name_the_value_and_the_fix() -> None:
    with pytest.raises(ConfigurationError, match=r"num_future_goals must be a finite number >= 0.*got -1"):
        HERReplayBuffer(10, equal_reward, num_future_goals=-1)
    with pytest.raises(ConfigurationError, match=r"compute_reward_fn must be callable.*got 'reward'"):
        HERReplayBuffer(10, "reward")  # type: ignore[arg-type]  # the error under test
    with pytest.raises(ConfigurationError, match=r"total_size=1 is smaller than buffer_num=2"):
        HERVectorReplayBuffer(1, 2, equal_reward)
    buffer = HERReplayBuffer(10, equal_reward)
    with pytest.raises(ConfigurationError, match=r"Dict keys \['achieved_goal', 'observation'\]; HER needs"):
        dict_add(buffer, {"observation": np.zeros((1, 2)), "achieved_goal": np.zeros((1, 2))})
    with pytest.raises(
        ConfigurationError, match=r"'achieved_goal' has shape \(2,\) but 'desired_goal' has shape \(3,\)"
    ):
        dict_add(buffer, {"achieved_goal": np.zeros((1, 2)), "desired_goal": np.zeros((1, 3))})
    assert not buffer.is_allocated

    def bad_reward(achieved: np.ndarray, desired: np.ndarray, info: Mapping[str, Any]) -> np.ndarray:
        return np.zeros((len(achieved), 1))

    bad = HERReplayBuffer(10, bad_reward, num_future_goals=1e9, seed=0)
    add_episodes(bad, [[3]])
    with pytest.raises(ConfigurationError, match=r"compute_reward_fn returned shape \(4, 1\) for 4 goals"):
        bad.sample(4)


def test_bit_flipping_env() -> None:
    env = BitFlippingEnv(n_bits=4)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert not np.array_equal(obs["achieved_goal"], obs["desired_goal"])
    np.testing.assert_array_equal(obs["observation"], obs["achieved_goal"])
    # flip exactly the differing bits: the last flip reaches the goal with reward 0
    diff = np.flatnonzero(obs["achieved_goal"] != obs["desired_goal"])
    rewards = []
    for bit in diff:
        obs, reward, terminated, truncated, info = env.step(np.int64(bit))
        rewards.append(reward)
        assert not terminated
    assert rewards == [-1.0] * (len(diff) - 1) + [0.0] and info["is_success"]
    for _ in range(4 - len(diff)):
        _, _, _, truncated, _ = env.step(np.int64(0))
    assert truncated  # the time limit is n_bits steps
    achieved = np.array([[0, 1], [1, 1], [0, 0]], dtype=np.float32)
    desired = np.array([[0, 1], [1, 0], [0, 0]], dtype=np.float32)
    np.testing.assert_array_equal(BitFlippingEnv.compute_reward(achieved, desired, {}), [0.0, -1.0, 0.0])
    with pytest.raises(ConfigurationError, match=r"n_bits must be >= 1, got 0"):
        BitFlippingEnv(n_bits=0)


def test_one_env_collector_fast_path_stores_what_add_stores() -> None:
    # a one-column buffer takes the collector's add_single path after the first add
    env = BitFlippingEnv(n_bits=4)
    buffer = HERReplayBuffer(50, BitFlippingEnv.compute_reward, seed=8)
    policy = QValuePolicy(encoder_mlp(obs_encoder(env.observation_space), 4), env.action_space)
    Collector(policy, env, buffer, seed=8).collect(n_step=20, random=True)
    assert len(buffer) == 20
    stored = buffer.chronological_indices()
    achieved_next = buffer.field_at("obs_next/achieved_goal", stored)
    np.testing.assert_array_equal(
        buffer.field_at("obs/achieved_goal", stored)[1:][~buffer.get(stored).done[:-1]],
        achieved_next[:-1][~buffer.get(stored).done[:-1]],
    )
    np.testing.assert_array_equal(
        buffer.field_at("rew", stored),
        BitFlippingEnv.compute_reward(achieved_next, buffer.field_at("obs_next/desired_goal", stored), {}),
    )
    np.testing.assert_array_equal(buffer.episode_steps_left(stored[:4]), [3, 2, 1, 0])


def test_collector_fills_a_her_buffer_from_registered_env() -> None:
    register_goal_envs()
    register_goal_envs()  # idempotent
    assert gym.make(BIT_FLIPPING_ID, n_bits=5).unwrapped.n_bits == 5  # type: ignore[attr-defined]  # env attribute
    envs = make_vector_env(BIT_FLIPPING_ID, 3, env_kwargs={"n_bits": 5})
    buffer = HERVectorReplayBuffer(300, 3, BitFlippingEnv.compute_reward, seed=7)
    policy = QValuePolicy(
        encoder_mlp(obs_encoder(envs.single_observation_space), 5), envs.single_action_space
    )
    collector = Collector(policy, envs, buffer, seed=7)
    collector.collect(n_step=90, random=True)
    envs.close()
    assert len(buffer) == 90
    batch = buffer.sample(512)
    assert isinstance(batch.obs, dict) and isinstance(batch.obs_next, dict)
    recomputed = BitFlippingEnv.compute_reward(
        batch.obs_next["achieved_goal"], batch.obs_next["desired_goal"], {}
    )
    np.testing.assert_array_equal(batch.rew, recomputed)
    assert batch.rew.mean() > -0.9  # relabelled goals make reward 0 common; random play rarely earns it
    assert buffer.field_at("rew", buffer.chronological_indices()).mean() < -0.9


def test_the_docs_example_runs() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "algorithms" / "her.md"
    blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], str(page), "exec"), namespace)  # the page's own example, as written
    assert namespace["info"].best_reward >= -8.0
    assert isinstance(namespace["buffer"], HERVectorReplayBuffer)


def her_run(directory: Path, training_fn: Any = None) -> OffPolicyTrainer[Any]:
    """DQN (2-step targets) with a HER buffer on 6-bit flipping: 4 epochs of 200 env steps, a checkpoint
    after every epoch."""
    torch.manual_seed(0)
    envs = make_vector_env(lambda: BitFlippingEnv(n_bits=6), 2)
    test_envs = make_vector_env(lambda: BitFlippingEnv(n_bits=6), 2)
    policy = QValuePolicy(
        encoder_mlp(obs_encoder(envs.single_observation_space), 6, (32, 32)),
        envs.single_action_space,
        eps_schedule=EpsilonSchedule(num_env_steps=400),
        seed=0,
    )
    algorithm = DQN(policy=policy, params=DQNParams(target_update_freq=20, n_step=2, gamma=0.9))
    buffer = HERVectorReplayBuffer(1000, 2, BitFlippingEnv.compute_reward, seed=0)
    training = Collector(policy, envs, buffer, exploration_noise=True, seed=0)
    training.collect(n_step=60, random=True)
    params = OffPolicyTrainerParams(
        training_collector=training,
        test_collector=Collector(policy, test_envs, seed=100),
        max_epochs=4,
        epoch_num_steps=200,
        collection_step_num_env_steps=8,
        update_step_num_gradient_steps_per_sample=0.5,
        batch_size=32,
        test_step_num_episodes=2,
        training_fn=training_fn,
        checkpoint=CheckpointParams(directory=directory / "checkpoints"),
        verbose=False,
        show_progress=False,
    )
    return OffPolicyTrainer(algorithm, params)


def test_a_resumed_her_run_equals_the_uninterrupted_run_bitwise(tmp_path: Path) -> None:
    reference = her_run(tmp_path / "a")
    info_a = reference.run()

    def interrupt(epoch: int, env_step: int) -> None:
        if epoch == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        her_run(tmp_path / "b", training_fn=interrupt).run()
    latest = CheckpointManager(CheckpointParams(directory=tmp_path / "b" / "checkpoints")).latest()
    assert latest is not None and latest.name.startswith("periodic-000002-")
    resumed = her_run(tmp_path / "b")
    resumed.load_checkpoint(latest, trusted=True)
    info_b = resumed.run()
    wa, wb = reference.algorithm.policy.state_dict(), resumed.algorithm.policy.state_dict()
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert (info_a.gradient_step, info_a.train_step, info_a.best_reward) == (
        info_b.gradient_step,
        info_b.train_step,
        info_b.best_reward,
    )


def steps_left_by_next_index(buffer: BaseHERBuffer, indices: np.ndarray) -> np.ndarray:
    """The slow reference: follow next_index one step at a time until it stops."""
    left = []
    for index in indices:
        current, steps = int(index), 0
        while (following := int(buffer.next_index(np.array([current]))[0])) != current:
            current, steps = following, steps + 1
        left.append(steps)
    return np.array(left)


@pytest.mark.parametrize("seed", range(6))
def test_episode_steps_left_matches_next_index_on_random_layouts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cap, cols = int(rng.integers(3, 90)), int(rng.integers(1, 4))
    buffer = HERVectorReplayBuffer(cap * cols, cols, equal_reward, seed=seed)
    lengths = [[int(n) for n in rng.integers(1, 80, size=rng.integers(1, 6))] for _ in range(cols)]
    add_episodes(buffer, lengths, last_open=bool(rng.integers(2)))
    stored = buffer.chronological_indices()
    np.testing.assert_array_equal(buffer.episode_steps_left(stored), steps_left_by_next_index(buffer, stored))
