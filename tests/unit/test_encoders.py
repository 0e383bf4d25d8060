"""Observation encoders (tshtrain/algorithm/blocks/encoders.py): shapes, dtypes and scaling, the choice
of encoder per space, Dict observations through policies and PPO, and the output-size check on CNN and
Dict networks."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    PPO,
    CategoricalPolicy,
    CnnEncoder,
    CnnSpec,
    DictEncoder,
    FlatEncoder,
    GaussianPolicy,
    OneHotEncoder,
    PPOParams,
    QValuePolicy,
    cnn_encoder,
    encoder_mlp,
    mlp,
    mlp_encoder,
    obs_encoder,
)
from tshtrain.algorithm.blocks.encoders import accepts_dict_obs, input_encoder
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.data.batch import obs_to_torch
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError

IMAGE = gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)
DICT = gym.spaces.Dict(
    {"image": IMAGE, "direction": gym.spaces.Discrete(4), "pos": gym.spaces.Box(-1, 1, (2,), np.float32)}
)


def test_flat_and_mlp_encoders_flatten_and_cast_to_float() -> None:
    enc = FlatEncoder((2, 3))
    x = torch.arange(12, dtype=torch.int64).reshape(2, 2, 3)
    out = enc(x)
    assert out.dtype == torch.float32 and out.shape == (2, 6) and enc.output_dim == 6
    assert torch.equal(out, x.reshape(2, 6).float())
    m = mlp_encoder(5, (8, 4))
    assert m.output_dim == 4 and m(torch.zeros(3, 5)).shape == (3, 4)


def test_one_hot_encoder_respects_start() -> None:
    enc = OneHotEncoder(3, start=-1)
    out = enc(torch.tensor([-1, 0, 1]))
    assert torch.equal(out, torch.eye(3))
    with pytest.raises(ConfigurationError, match="n must be >= 1"):
        OneHotEncoder(0)


def test_cnn_takes_hwc_uint8_scales_by_1_over_255_and_matches_chw() -> None:
    torch.manual_seed(0)
    hwc = cnn_encoder((7, 7, 3), channels=(4, 8), kernel_sizes=(3, 2), strides=(1, 1), features=16)
    assert hwc.channels_last and hwc.output_dim == 16
    images = torch.randint(0, 256, (5, 7, 7, 3), dtype=torch.uint8)
    out = hwc(images)
    assert out.shape == (5, 16) and out.dtype == torch.float32
    # the same weights on float pixels in [0, 1], channels first, with scale 1
    chw = cnn_encoder((3, 7, 7), channels=(4, 8), kernel_sizes=(3, 2), strides=(1, 1), features=16, scale=1.0)
    assert not chw.channels_last
    chw.load_state_dict(hwc.state_dict())
    torch.testing.assert_close(chw(images.permute(0, 3, 1, 2).float() / 255.0), out)


def test_nature_cnn_defaults_on_84x84_and_too_small_images_are_refused_with_a_fix() -> None:
    enc = cnn_encoder((84, 84, 4))
    assert enc.output_dim == 512
    assert [m.kernel_size for m in enc.convs if isinstance(m, nn.Conv2d)] == [(8, 8), (4, 4), (3, 3)]
    assert enc(torch.zeros(2, 84, 84, 4, dtype=torch.uint8)).shape == (2, 512)
    with pytest.raises(ConfigurationError, match=r"8x8 convolution of stride 4 does not fit .* kernel_sizes"):
        cnn_encoder((7, 7, 3))
    with pytest.raises(ConfigurationError, match="of one length"):
        CnnSpec(channels=(16, 32), kernel_sizes=(2,), strides=(1, 1))
    with pytest.raises(ConfigurationError, match=r"CnnSpec.strides must hold ints >= 1, got \[0\]"):
        CnnSpec(channels=(16,), kernel_sizes=(2,), strides=(0,))


@pytest.mark.parametrize(
    ("space", "kind", "output_dim"),
    [
        (gym.spaces.Box(-1, 1, (3,), np.float32), FlatEncoder, 3),
        (gym.spaces.Box(0, 255, (2, 2), np.uint8), FlatEncoder, 4),  # two axes: not an image
        (IMAGE, CnnEncoder, 64),  # small image: the small-grid convolutions
        (gym.spaces.Box(0, 255, (4, 40, 40), np.uint8), CnnEncoder, 512),  # channels first, Nature CNN
        (gym.spaces.Discrete(5, start=2), OneHotEncoder, 5),
        (gym.spaces.MultiDiscrete([2, 3]), FlatEncoder, 2),
        (gym.spaces.MultiBinary(4), FlatEncoder, 4),
        (DICT, DictEncoder, 64 + 4 + 2),
    ],
)
def test_obs_encoder_picks_the_encoder_of_each_space(
    space: gym.Space[Any], kind: type, output_dim: int
) -> None:
    enc = obs_encoder(space)
    assert type(enc) is kind and enc.output_dim == output_dim
    samples = [space.sample() for _ in range(3)]
    batch: Any
    if isinstance(space, gym.spaces.Dict):
        batch = {k: np.stack([s[k] for s in samples]) for k in space.spaces}
    else:
        batch = np.stack(samples)
    out = enc(obs_to_torch(batch))
    assert out.shape == (3, output_dim)


def test_obs_encoder_names_the_key_of_an_unsupported_space() -> None:
    space = gym.spaces.Dict({"image": IMAGE, "mission": gym.spaces.Text(10)})
    with pytest.raises(UnsupportedSpaceError, match=r"observation key 'mission': .*Text.*FilterObservation"):
        obs_encoder(space)


def test_dict_encoder_concatenates_in_key_order_and_names_missing_keys() -> None:
    enc = DictEncoder({"b": OneHotEncoder(2), "a": FlatEncoder((1,))})
    out = enc({"a": torch.tensor([[7.0]]), "b": torch.tensor([1])})
    assert torch.equal(out, torch.tensor([[0.0, 1.0, 7.0]]))
    with pytest.raises(UnsupportedSpaceError, match=r"missing \['b'\]"):
        enc({"a": torch.tensor([[7.0]])})


def test_dict_networks_are_recognised_and_plain_mlps_fed_a_dict_are_refused() -> None:
    actor = encoder_mlp(obs_encoder(DICT), 3, (8,))
    assert accepts_dict_obs(actor) and isinstance(input_encoder(actor), DictEncoder)
    assert not accepts_dict_obs(mlp(4, 2))
    policy = CategoricalPolicy(actor, gym.spaces.Discrete(3), seed=0)
    obs = obs_to_torch({k: np.stack([DICT.sample()[k] for _ in range(4)]) for k in DICT.spaces})
    assert policy.actions(obs, deterministic=False).shape == (4,)
    gaussian = GaussianPolicy(encoder_mlp(obs_encoder(DICT), 2, (8,)), gym.spaces.Box(-1, 1, (2,)), seed=0)
    assert gaussian.actions(obs, deterministic=True).shape == (4, 2)
    plain = CategoricalPolicy(mlp(4, 3), gym.spaces.Discrete(3), seed=0)
    with pytest.raises(UnsupportedSpaceError, match="DictEncoder"):
        plain.actions(obs, deterministic=True)


def test_output_size_check_runs_on_cnn_and_dict_networks() -> None:
    with pytest.raises(ConfigurationError, match=r"gives 4 outputs .* needs 3 \(one per action\)"):
        CategoricalPolicy(encoder_mlp(obs_encoder(IMAGE), 4, (8,)), gym.spaces.Discrete(3))
    with pytest.raises(ConfigurationError, match=r"Q network gives 2 outputs .* needs 3"):
        QValuePolicy(encoder_mlp(obs_encoder(DICT), 2, (8,)), gym.spaces.Discrete(3))
    net = encoder_mlp(obs_encoder(DICT), 3, (8,))
    net.train()
    CategoricalPolicy(net, gym.spaces.Discrete(3))
    assert net.training  # the check restores the mode


class _ImageDictEnv(gym.Env[dict[str, Any], np.int64]):
    """Dict observations {image: uint8 (5, 5, 3), direction: Discrete(4)}; reward 1 for action 1."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict(
            {"image": gym.spaces.Box(0, 255, (5, 5, 3), np.uint8), "direction": gym.spaces.Discrete(4)}
        )
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0

    def _obs(self) -> dict[str, Any]:
        return {
            "image": self.np_random.integers(0, 256, (5, 5, 3), dtype=np.uint8),
            "direction": np.int64(self.np_random.integers(4)),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action: np.int64) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._t += 1
        return self._obs(), float(action == 1), False, self._t >= 4, {}


def test_uint8_images_stay_uint8_in_the_buffer_and_ppo_updates_on_dict_observations() -> None:
    torch.manual_seed(0)
    envs = make_vector_env(_ImageDictEnv, 2)
    space = envs.single_observation_space
    cnn = CnnSpec(channels=(4,), kernel_sizes=(2,), strides=(1,), features=8)
    policy = CategoricalPolicy(
        encoder_mlp(obs_encoder(space, cnn=cnn), 2, (8,)), envs.single_action_space, seed=0
    )
    critic = encoder_mlp(obs_encoder(space, cnn=cnn), 1, (8,))
    ppo = PPO(policy=policy, critic=critic, params=PPOParams(lr=1e-2), seed=0)
    buffer = VectorReplayBuffer(16, 2, seed=0)
    Collector(policy, envs, buffer, seed=0).collect(n_step=16)
    data = buffer.sample_all()
    assert isinstance(data.obs, dict)
    assert data.obs["image"].dtype == np.uint8 and data.obs["direction"].dtype == np.int64
    assert obs_to_torch(data.obs)["image"].dtype == torch.uint8
    before = [p.detach().clone() for p in policy.parameters()]
    stats = ppo.update(buffer.rollout(), batch_size=8, num_repetitions=2)
    assert stats.num_gradient_steps == 4
    assert any(not torch.equal(b, p) for b, p in zip(before, policy.parameters(), strict=True))
    envs.close()
