"""TorchCartPole against Gymnasium's CartPole, and TensorCollector against Collector on the same env
dynamics (a numpy Gymnasium vector env wrapping the same TorchCartPole)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from tshtrain.algorithm import CategoricalPolicy, QValuePolicy, mlp
from tshtrain.data import Collector, TensorCollector, TensorReplayBuffer, VectorReplayBuffer
from tshtrain.env import TensorStep, TorchCartPole, sample_actions_torch
from tshtrain.env.torch_cartpole import cartpole_dynamics
from tshtrain.errors import ConfigurationError, EpisodeLimitError

CPU = torch.device("cpu")


# ---------------------------------------------------------------------------- TorchCartPole
def test_dynamics_match_gymnasium_cartpole() -> None:
    rng = np.random.default_rng(0)
    states = rng.uniform(-0.2, 0.2, size=(200, 4))
    actions = rng.integers(0, 2, size=200)
    expected = np.empty((200, 4))
    terminated = np.empty(200, dtype=bool)
    env = CartPoleEnv()
    env.reset(seed=0)
    for i in range(200):
        env.state = states[i].copy()
        obs, rew, term, trunc, _ = env.step(int(actions[i]))
        expected[i], terminated[i] = obs, term
        assert rew == 1.0 and not trunc
    got = cartpole_dynamics(torch.tensor(states, dtype=torch.float32), torch.from_numpy(actions))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)
    batch = TorchCartPole(200, CPU, seed=0)
    batch.reset()
    batch.state = torch.tensor(states, dtype=torch.float32)
    step = batch.step(torch.from_numpy(actions))
    np.testing.assert_array_equal(step.terminated.numpy(), terminated)
    np.testing.assert_allclose(step.final_obs.numpy(), expected, rtol=1e-5, atol=1e-6)  # type: ignore[union-attr]


def test_initial_states_truncation_and_batched_autoreset() -> None:
    env = TorchCartPole(8, CPU, seed=1, max_episode_steps=5)
    obs, _ = env.reset()
    assert isinstance(obs, torch.Tensor) and obs.shape == (8, 4) and obs.dtype == torch.float32
    assert float(obs.abs().max()) <= 0.05
    for _ in range(4):
        step = env.step(torch.zeros(8, dtype=torch.int64))
        assert not bool(step.truncated.any())
    step = env.step(torch.zeros(8, dtype=torch.int64))
    assert bool(step.truncated.all())
    assert torch.equal(env.elapsed_steps, torch.zeros(8, dtype=torch.int64))
    assert float(step.obs.abs().max()) <= 0.05  # type: ignore[union-attr]  # fresh episodes
    assert not torch.equal(step.obs, step.final_obs)  # type: ignore[arg-type]


def test_same_seed_same_states_and_state_dict_round_trip() -> None:
    first, second = TorchCartPole(4, CPU, seed=3), TorchCartPole(4, CPU, seed=3)
    assert torch.equal(first.reset()[0], second.reset()[0])  # type: ignore[arg-type]
    saved = first.state_dict()
    act = torch.ones(4, dtype=torch.int64)
    after = [first.step(act).obs for _ in range(30)]
    first.load_state_dict(saved)
    again = [first.step(act).obs for _ in range(30)]
    assert all(torch.equal(a, b) for a, b in zip(after, again, strict=True))  # type: ignore[arg-type]


def test_wrong_action_shape_is_rejected() -> None:
    env = TorchCartPole(4, CPU, seed=0)
    env.reset()
    with pytest.raises(ConfigurationError, match=r"actions must have shape \(4,\), got \(3,\)"):
        env.step(torch.zeros(3, dtype=torch.int64))


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Discrete(3, start=2),
        gym.spaces.MultiDiscrete([2, 5]),
        gym.spaces.MultiBinary(3),
        gym.spaces.Box(-2.0, np.array([1.0, np.inf]), dtype=np.float32),
    ],
)
def test_sample_actions_torch_stays_in_the_space(space: gym.Space[Any]) -> None:
    gen = torch.Generator().manual_seed(0)
    act = sample_actions_torch(space, 500, gen, CPU)
    assert act.device == CPU and act.shape[0] == 500
    assert all(space.contains(a) for a in act.numpy())


# ---------------------------------------------------------------------------- collectors
class NumpyCartPole(gym.vector.VectorEnv[Any, Any, Any]):
    """A numpy Gymnasium vector env (same-step autoreset) stepping a TorchCartPole: the same
    dynamics for the numpy Collector."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, seed: int, max_episode_steps: int = 500):
        self.inner = TorchCartPole(num_envs, CPU, seed=seed, max_episode_steps=max_episode_steps)
        self.num_envs = num_envs
        self.single_observation_space = self.inner.single_observation_space
        self.single_action_space = self.inner.single_action_space

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        obs, _ = self.inner.reset(seed=seed)
        return obs.numpy(), {}  # type: ignore[union-attr]

    def step(self, actions: Any) -> Any:
        step = self.inner.step(torch.from_numpy(np.asarray(actions)))
        info: dict[str, Any] = {"final_obs": step.final_obs.numpy()}  # type: ignore[union-attr]
        return step.obs.numpy(), step.rew.numpy(), step.terminated.numpy(), step.truncated.numpy(), info  # type: ignore[union-attr]


def _policy(seed: int) -> CategoricalPolicy:
    torch.manual_seed(seed)
    return CategoricalPolicy(mlp(4, 2, (16,)), gym.spaces.Discrete(2), seed=seed)


def _pair(num_envs: int, size: int, *, max_steps: int = 500, buffer: bool = True) -> tuple[Collector, TensorCollector]:
    policy = _policy(0)
    numpy_c = Collector(
        policy, NumpyCartPole(num_envs, seed=7, max_episode_steps=max_steps),
        VectorReplayBuffer(size, num_envs) if buffer else None, seed=7,
    )  # fmt: skip
    tensor_c = TensorCollector(
        policy, TorchCartPole(num_envs, CPU, seed=7, max_episode_steps=max_steps),
        TensorReplayBuffer(size, num_envs, device=CPU) if buffer else None, seed=7,
    )  # fmt: skip
    return numpy_c, tensor_c


def _same_buffers(numpy_c: Collector, tensor_c: TensorCollector) -> None:
    assert numpy_c.buffer is not None and tensor_c.buffer is not None
    assert numpy_c.buffer.layout() == tensor_c.buffer.layout()
    expected, got = numpy_c.buffer.field_arrays(), tensor_c.buffer.field_arrays()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_n_step_collection_matches_the_numpy_collector() -> None:
    numpy_c, tensor_c = _pair(4, 4 * 40, max_steps=15)
    # deterministic actions: both collectors see the same observations, so they act alike
    for n in (30, 50, 7):
        expected = numpy_c.collect(n_step=n, deterministic=True)
        got = tensor_c.collect(n_step=n, deterministic=True)
        assert got.n_collected_steps == expected.n_collected_steps
        np.testing.assert_array_equal(got.returns, expected.returns)
        np.testing.assert_array_equal(got.lens, expected.lens)
        assert got.n_collected_episodes == expected.n_collected_episodes
    _same_buffers(numpy_c, tensor_c)
    assert tensor_c.num_collected_env_steps == numpy_c.num_collected_env_steps
    assert tensor_c.num_collected_episodes == numpy_c.num_collected_episodes > 0


def test_final_obs_is_stored_as_obs_next() -> None:
    _, tensor_c = _pair(3, 3 * 20, max_steps=6)
    tensor_c.collect(n_step=3 * 6, deterministic=True)
    assert tensor_c.buffer is not None
    rollout = tensor_c.buffer.rollout()
    assert bool(rollout.truncated[5].all())
    assert torch.equal(rollout.obs_next[:5], rollout.obs[1:6])  # type: ignore[index]
    assert float(rollout.obs_next[5].abs().max()) > 0.0  # type: ignore[index]


@pytest.mark.parametrize("n_episode", [2, 5, 9])
def test_n_episode_collection_matches_the_numpy_collector(n_episode: int) -> None:
    numpy_c, tensor_c = _pair(4, 4 * 200, max_steps=12)
    numpy_c.collect(n_step=10, deterministic=True)  # unfinished episodes: both start afresh
    tensor_c.collect(n_step=10, deterministic=True)
    expected = numpy_c.collect(n_episode=n_episode, deterministic=True)
    got = tensor_c.collect(n_episode=n_episode, deterministic=True)
    assert got.n_collected_episodes == expected.n_collected_episodes == n_episode
    assert got.n_collected_steps == expected.n_collected_steps
    np.testing.assert_array_equal(got.returns, expected.returns)
    np.testing.assert_array_equal(got.lens, expected.lens)
    _same_buffers(numpy_c, tensor_c)


def test_random_actions_exploration_noise_and_counters() -> None:
    env = TorchCartPole(4, CPU, seed=0)
    q = QValuePolicy(mlp(4, 2, (8,)), env.single_action_space, seed=0)
    collector = TensorCollector(q, env, TensorReplayBuffer(400, 4, device=CPU), exploration_noise=True, seed=0)
    stat = collector.collect(n_step=40, random=True)
    assert stat.n_collected_steps == 40 and collector.num_collected_env_steps == 40
    collector.collect(n_step=40)
    assert int(q.explored_env_steps) == 40  # epsilon-greedy counted on the torch path too
    assert collector.buffer is not None and len(collector.buffer) == 80


def test_collect_argument_errors_and_episode_limit() -> None:
    _, tensor_c = _pair(2, 2 * 10, max_steps=500)
    with pytest.raises(ConfigurationError, match="give exactly one of n_step and n_episode"):
        tensor_c.collect()
    with pytest.raises(ConfigurationError, match="needs 11 rows per env but each sub-buffer holds 10"):
        tensor_c.collect(n_step=22)
    _, test_c = _pair(2, 0, max_steps=500, buffer=False)
    with pytest.raises(EpisodeLimitError, match="max_env_steps=3"):
        test_c.collect(n_episode=1, max_env_steps=3, deterministic=True)


def test_gymnasium_env_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="must implement tshtrain.env.TensorVectorEnv"):
        TensorCollector(_policy(0), NumpyCartPole(2, 0))  # type: ignore[arg-type]


def test_state_dict_round_trip_continues_identically() -> None:
    _, tensor_c = _pair(3, 3 * 100, max_steps=20)
    tensor_c.collect(n_step=30)
    state, env_state = tensor_c.state_dict(), tensor_c.env_snapshot()
    first = tensor_c.collect(n_step=60, random=True)  # random actions: the collector's generator
    tensor_c.load_state_dict(state)
    assert tensor_c.restore_env_snapshot(env_state)
    again = tensor_c.collect(n_step=60, random=True)
    assert first.n_collected_episodes > 0
    np.testing.assert_array_equal(first.returns, again.returns)
    np.testing.assert_array_equal(first.lens, again.lens)


class MaskedTensorEnv:
    """Five actions of which only those the mask allows are legal; an illegal action ends the episode
    with reward -1 (so a collector that ignores the mask is caught)."""

    num_envs = 6
    device = torch.device("cpu")
    single_action_space = gym.spaces.Discrete(5)
    single_observation_space = gym.spaces.Dict(
        {
            "obs": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "action_mask": gym.spaces.Box(0, 1, (5,), np.int8),
        }
    )

    def __init__(self) -> None:
        self.gen = torch.Generator().manual_seed(0)
        self.illegal = 0
        self.mask = self._draw()

    def _draw(self) -> torch.Tensor:
        mask = (torch.rand(self.num_envs, 5, generator=self.gen) < 0.4).to(torch.int8)
        mask[:, 4] = 1  # at least one legal action
        return mask

    def _obs(self) -> dict[str, torch.Tensor]:
        return {"obs": torch.zeros(self.num_envs, 2), "action_mask": self.mask.clone()}

    def reset(self, *, seed: int | None = None) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        return self._obs(), {}

    def step(self, actions: torch.Tensor) -> TensorStep:
        legal = self.mask.gather(1, actions.view(-1, 1)).view(-1) == 1
        self.illegal += int((~legal).sum())
        self.mask = self._draw()
        obs = self._obs()
        false = torch.zeros(self.num_envs, dtype=torch.bool)
        return TensorStep(obs, legal.float() - 1.0 * ~legal, ~legal, false, obs, {})

    def close(self) -> None:
        pass


def test_random_actions_respect_action_masks() -> None:
    env = MaskedTensorEnv()
    policy = CategoricalPolicy(mlp(2, 5, (8,)), env.single_action_space)  # random actions: not called
    buffer = TensorReplayBuffer(60 * 6, 6, device="cpu")
    collector = TensorCollector(policy, env, buffer, seed=0)
    collector.collect(n_step=6 * 50, random=True)
    assert env.illegal == 0
    rollout = buffer.rollout()
    acts = rollout.act.reshape(-1)
    masks = rollout.obs["action_mask"].reshape(-1, 5)
    assert (masks.gather(1, acts.view(-1, 1).long()) == 1).all()  # masks are stored with the obs
    assert len(set(acts.tolist())) > 1  # not a constant legal action
