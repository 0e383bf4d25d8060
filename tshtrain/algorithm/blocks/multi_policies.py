"""Stochastic policies for MultiDiscrete and MultiBinary actions (A2C, PPO, REINFORCE).

* :class:`MultiCategoricalPolicy`: one independent categorical distribution per component of a
  ``MultiDiscrete(nvec, start)`` space; ``actor(obs)`` returns ``sum(nvec)`` logits, split per component.
* :class:`BernoulliPolicy`: one independent Bernoulli per bit of a ``MultiBinary`` space; ``actor(obs)``
  returns one logit per bit.

Log-probabilities and entropies are sums over the components (the components are independent). Actions
are sampled from the policy's own generator and stored as the env takes them (a MultiDiscrete action
includes ``start``).
"""

from __future__ import annotations

from typing import Any, final

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import Policy
from tshtrain.algorithm.blocks.encoders import accepts_dict_obs
from tshtrain.algorithm.blocks.policies import _as_tensor, check_output_size
from tshtrain.data.batch import ObsTensor
from tshtrain.errors import UnsupportedSpaceError


def _owner_device(net: nn.Module) -> torch.device:
    return next((p.device for p in net.parameters()), torch.device("cpu"))


@final
class MultiCategoricalPolicy(Policy):
    """Independent categorical distributions over the components of a MultiDiscrete action space.

    ``actor(obs)`` returns logits of shape (N, sum(nvec)): the first ``nvec[0]`` belong to component 0,
    and so on (``nvec`` flattened in C order for multi-dimensional spaces). Stochastic actions are drawn
    with ``torch.multinomial`` from the policy's generator, deterministic ones are the per-component
    argmax; both are returned as ``start + index``, shape (N, *nvec.shape).
    """

    component_index: torch.Tensor
    component_mask: torch.Tensor
    start: torch.Tensor

    def __init__(
        self,
        actor: nn.Module,
        action_space: gym.Space[Any],
        *,
        deterministic_eval: bool = True,
        seed: int | None = None,
    ):
        """Args:
        actor: maps observations to (N, sum(nvec)) logits.
        action_space: a MultiDiscrete space.
        deterministic_eval: test steps take the per-component argmax.
        seed: seeds the policy's generator, from which actions are sampled.
        """
        if not isinstance(action_space, gym.spaces.MultiDiscrete):
            raise UnsupportedSpaceError(
                f"MultiCategoricalPolicy needs a MultiDiscrete action space, got {action_space!r}."
            )
        super().__init__(action_space=action_space, deterministic_eval=deterministic_eval, seed=seed)
        nvec_K = np.asarray(action_space.nvec, dtype=np.int64).reshape(-1)
        self.act_shape = tuple(int(s) for s in np.shape(action_space.nvec))
        check_output_size(
            actor,
            int(nvec_K.sum()),
            "MultiCategoricalPolicy",
            "actor (logits)",
            action_space,
            layout=f"the logits of each component, sizes {nvec_K.tolist()}",
        )
        self.actor = actor
        self._takes_dict = accepts_dict_obs(actor)
        # logits of component k are flat logits [offset_k, offset_k + nvec_k); pad every component to the
        # widest one (column m of component k reads flat index offset_k + m, masked where m >= nvec_k)
        width = int(nvec_K.max())
        offsets_K = np.concatenate([[0], np.cumsum(nvec_K)[:-1]])
        column_M = np.arange(width)
        mask_KM = column_M[None, :] < nvec_K[:, None]
        index_KM = np.where(mask_KM, offsets_K[:, None] + column_M[None, :], 0)
        device = _owner_device(actor)
        self.register_buffer("component_index", torch.as_tensor(index_KM, device=device))
        self.register_buffer("component_mask", torch.as_tensor(mask_KM, device=device))
        start = np.asarray(action_space.start, dtype=np.int64).reshape(-1)
        self.register_buffer("start", torch.as_tensor(start, device=device))

    def log_probs(self, obs: ObsTensor) -> torch.Tensor:
        """Per-component log-probabilities, shape (N, K, max(nvec)); padding columns are -inf."""
        logits_NS: torch.Tensor = self.actor(_as_tensor(obs, self._takes_dict))
        logits_NKM = logits_NS[:, self.component_index].masked_fill(~self.component_mask, float("-inf"))
        return torch.log_softmax(logits_NKM, dim=-1)

    def log_prob_entropy(self, obs: ObsTensor, act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log pi(act | obs), shape (N,); entropy of pi(. | obs), shape (N,)): sums over the
        components, differentiable."""
        logp_NKM = self.log_probs(obs)
        index_NK = act.reshape(len(logp_NKM), -1).long() - self.start
        logp_N = logp_NKM.gather(2, index_NK.unsqueeze(-1)).squeeze(-1).sum(dim=-1)
        # padding columns: p = 0 and log p = -inf; zero log p there first, so that neither the value nor
        # the gradient of p * log p becomes 0 * inf = NaN
        safe_logp_NKM = logp_NKM.masked_fill(~self.component_mask, 0.0)
        return logp_N, -(safe_logp_NKM.exp() * safe_logp_NKM).masked_fill(~self.component_mask, 0.0).sum(
            dim=(1, 2)
        )

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        logp_NKM = self.log_probs(obs)
        num, num_components, width = logp_NKM.shape
        if deterministic:
            index_NK = logp_NKM.argmax(dim=-1)
        else:
            probs = logp_NKM.exp().reshape(num * num_components, width)
            index_NK = torch.multinomial(probs, 1, generator=self.generator).reshape(num, num_components)
        return (index_NK + self.start).reshape(num, *self.act_shape)


@final
class BernoulliPolicy(Policy):
    """Independent Bernoulli distributions over the bits of a MultiBinary action space.

    ``actor(obs)`` returns one logit per bit, shape (N, prod(shape)); P(bit = 1) = sigmoid(logit).
    Stochastic actions compare uniform draws from the policy's generator with those probabilities,
    deterministic ones are ``logit > 0``; both have the space's shape and dtype (N, *shape).
    """

    def __init__(
        self,
        actor: nn.Module,
        action_space: gym.Space[Any],
        *,
        deterministic_eval: bool = True,
        seed: int | None = None,
    ):
        """Args:
        actor: maps observations to (N, prod(shape)) logits.
        action_space: a MultiBinary space.
        deterministic_eval: test steps take the most likely value of each bit.
        seed: seeds the policy's generator, from which actions are sampled.
        """
        if not isinstance(action_space, gym.spaces.MultiBinary):
            raise UnsupportedSpaceError(
                f"BernoulliPolicy needs a MultiBinary action space, got {action_space!r}."
            )
        super().__init__(action_space=action_space, deterministic_eval=deterministic_eval, seed=seed)
        assert action_space.shape is not None
        self.act_shape = tuple(int(s) for s in action_space.shape)
        num_bits = int(np.prod(self.act_shape))
        check_output_size(
            actor, num_bits, "BernoulliPolicy", "actor (logits)", action_space, layout="one logit per bit"
        )
        self.actor = actor
        self._takes_dict = accepts_dict_obs(actor)
        assert action_space.dtype == np.int8  # Gymnasium's MultiBinary is always int8

    def logits(self, obs: ObsTensor) -> torch.Tensor:
        """One logit per bit, shape (N, prod(shape))."""
        logits: torch.Tensor = self.actor(_as_tensor(obs, self._takes_dict))
        return logits

    def log_prob_entropy(self, obs: ObsTensor, act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log pi(act | obs), shape (N,); entropy of pi(. | obs), shape (N,)): sums over the bits,
        differentiable."""
        logits_NB = self.logits(obs)
        bits_NB = act.reshape(len(logits_NB), -1).to(logits_NB.dtype)
        log_p1_NB = nn.functional.logsigmoid(logits_NB)
        log_p0_NB = nn.functional.logsigmoid(-logits_NB)
        logp_N = (bits_NB * log_p1_NB + (1.0 - bits_NB) * log_p0_NB).sum(dim=-1)
        p1_NB = torch.sigmoid(logits_NB)
        entropy_N = -(p1_NB * log_p1_NB + (1.0 - p1_NB) * log_p0_NB).sum(dim=-1)
        return logp_N, entropy_N

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        logits_NB = self.logits(obs)
        if deterministic:
            bits_NB = logits_NB > 0
        else:
            draws_NB = torch.rand(
                logits_NB.shape, generator=self.generator, dtype=logits_NB.dtype, device=logits_NB.device
            )
            bits_NB = draws_NB < torch.sigmoid(logits_NB)
        return bits_NB.to(torch.int8).reshape(len(logits_NB), *self.act_shape)
