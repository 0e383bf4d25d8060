"""skrl models for ``bench_agent_scopes.py`` (module level: skrl's ParallelTrainer pickles them into
spawned processes, so they must be importable there)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model
from torch import nn


class SkrlCategoricalPolicy(CategoricalMixin, Model):
    """Logits from ``net`` (a categorical policy)."""

    def __init__(self, observation_space: Any, action_space: Any, net: nn.Module) -> None:
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device="cpu")
        CategoricalMixin.__init__(self, unnormalized_log_prob=True)
        self.net = net

    def compute(self, inputs: Mapping[str, Any], role: str = "") -> tuple[torch.Tensor, dict[str, Any]]:
        return self.net(inputs["observations"]), {}


class SkrlValue(DeterministicMixin, Model):
    """A state value from ``net``."""

    def __init__(self, observation_space: Any, action_space: Any, net: nn.Module) -> None:
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device="cpu")
        DeterministicMixin.__init__(self)
        self.net = net

    def compute(self, inputs: Mapping[str, Any], role: str = "") -> tuple[torch.Tensor, dict[str, Any]]:
        return self.net(inputs["observations"]), {}
