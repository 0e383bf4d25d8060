"""A network whose output size does not fit the action space is refused when its policy is built, not
trained silently (a Q-network with 3 outputs or a policy with 1 logit on a 2-action space)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from torch import nn

from tshtrain.algorithm import CategoricalPolicy, mlp
from tshtrain.algorithm.blocks.policies import QValuePolicy
from tshtrain.errors import ConfigurationError

TWO_ACTIONS = gym.spaces.Discrete(2)


@pytest.mark.parametrize(
    ("policy", "outputs", "what"),
    [
        (CategoricalPolicy, 1, "actor"),
        (CategoricalPolicy, 3, "actor"),
        (QValuePolicy, 3, "Q"),
        (QValuePolicy, 1, "Q"),
    ],
)
def test_a_wrong_output_size_is_refused_at_build(policy: type, outputs: int, what: str) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"the {what}.* gives {outputs} outputs .* needs 2 \(one per action\)"
    ):
        policy(mlp(4, outputs, (8,)), TWO_ACTIONS)


def test_the_check_changes_nothing_it_looks_at() -> None:
    net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    before = {k: v.clone() for k, v in net.state_dict().items()}
    rng_before = torch.get_rng_state()
    policy = CategoricalPolicy(net, TWO_ACTIONS)
    after = net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # BatchNorm statistics untouched
    assert torch.equal(rng_before, torch.get_rng_state()) and policy.actor.training


def test_networks_it_cannot_feed_are_left_alone() -> None:
    class TwoInputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = nn.Linear(4, 5)

        def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
            return self.head(obs["a"])

    CategoricalPolicy(TwoInputs(), TWO_ACTIONS)  # no check possible: built as before
