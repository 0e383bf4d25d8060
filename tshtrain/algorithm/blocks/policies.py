"""Policies shared by several algorithms. Actions are sampled from the policy's own generator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import Policy, module_device
from tshtrain.algorithm.blocks.encoders import accepts_dict_obs, input_encoder
from tshtrain.algorithm.blocks.host_count import HostCount
from tshtrain.constraints import NonNegativeInt, UnitFloat, validate_fields
from tshtrain.data.batch import ObsArray, ObsTensor
from tshtrain.env.spaces import sample_legal_actions
from tshtrain.env.tensor_spaces import sample_legal_actions_torch
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError


def _as_tensor(obs: ObsTensor, takes_dict: bool = False) -> ObsTensor:
    """``obs`` as the network takes it: a tensor, or a dict of tensors for networks that accept one
    (:func:`~tshtrain.algorithm.blocks.encoders.accepts_dict_obs`)."""
    if isinstance(obs, torch.Tensor) or takes_dict:
        return obs
    raise UnsupportedSpaceError(
        "This policy's network takes array observations, but got a dict of tensors (a Dict observation "
        "space). Build the network on a DictEncoder (tshtrain.algorithm.obs_encoder(space)), or give your "
        "own module an attribute accepts_dict_obs = True."
    )


def _require_discrete(space: gym.Space[Any], owner: str) -> None:
    if not isinstance(space, gym.spaces.Discrete):
        raise UnsupportedSpaceError(
            f"{owner} needs a Discrete action space, got {space!r}."
            + (
                " MultiDiscrete actions are taken by MultiCategoricalPolicy, which the on-policy "
                "algorithms accept: A2C, PPO, NPG, TRPO and REINFORCE (algorithm.name: a2c, ppo, npg, "
                "trpo, reinforce); DQN and the other Q-learning algorithms need one Discrete action "
                "(wrap the env to map the MultiDiscrete action to a Discrete one of prod(nvec) actions)."
                if isinstance(space, gym.spaces.MultiDiscrete)
                else ""
            )
        )


def check_output_size(
    net: nn.Module,
    expected: int,
    owner: str,
    what: str,
    space: gym.Space[Any],
    *,
    layout: str = "one per action",
) -> None:
    """Raise ConfigurationError if ``net`` maps an observation to another number of outputs than
    ``expected`` (``layout`` says what the outputs are, for the message).

    The check runs one forward pass on a zero observation in eval mode (no random numbers drawn, no
    statistics updated): for networks whose input module is an
    :class:`~tshtrain.algorithm.blocks.encoders.Encoder` (CNN, Dict, ...) the encoder's
    ``zero_obs``, for MLP-like ones the width of their first ``nn.Linear``. Networks it cannot feed that
    way are left to fail, if they are wrong, at their first use.
    """
    out = _zero_forward(net)
    if isinstance(out, torch.Tensor) and out.ndim == 2 and out.shape[-1] != expected:
        raise ConfigurationError(
            f"{owner}: the {what} network gives {out.shape[-1]} outputs per observation, but the action "
            f"space {space} needs {expected} ({layout}); build its last layer with {expected} outputs."
        )


def _zero_forward(net: nn.Module) -> object:
    """``net`` applied to a zero observation (None if there is no way to build one or the call fails)."""
    encoder = input_encoder(net)
    first = next((m for m in net.modules() if isinstance(m, nn.Linear)), None)
    if encoder is None and first is None:
        return None
    device = next((p.device for p in net.parameters()), torch.device("cpu"))
    was_training = net.training
    try:
        net.eval()
        with torch.no_grad():
            if encoder is not None:
                return net(encoder.zero_obs(device))
            assert first is not None
            return net(torch.zeros(1, first.in_features, dtype=first.weight.dtype, device=device))
    except Exception:  # not a network this check can feed: nothing to check here
        return None
    finally:
        net.train(was_training)


@final
class CategoricalPolicy(Policy):
    """A stochastic policy over Discrete actions: ``actor(obs)`` returns logits.

    Stochastic actions are drawn with ``torch.multinomial`` from the policy's generator; deterministic
    ones are the argmax.
    """

    def __init__(
        self,
        actor: nn.Module,
        action_space: gym.Space[Any],
        *,
        deterministic_eval: bool = True,
        seed: int | None = None,
    ):
        _require_discrete(action_space, "CategoricalPolicy")
        super().__init__(
            action_space=action_space,
            deterministic_eval=deterministic_eval,
            seed=seed,
            device=module_device(actor),
        )
        assert isinstance(action_space, gym.spaces.Discrete)
        check_output_size(actor, int(action_space.n), "CategoricalPolicy", "actor (logits)", action_space)
        self.actor = actor
        self._takes_dict = accepts_dict_obs(actor)

    def logits(self, obs: ObsTensor) -> torch.Tensor:
        """Unnormalised log-probabilities, shape (N, num_actions)."""
        logits: torch.Tensor = self.actor(_as_tensor(obs, self._takes_dict))
        return logits

    def log_prob_entropy(self, obs: ObsTensor, act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log pi(act | obs), shape (N,); entropy of pi(. | obs), shape (N,)), differentiable."""
        logp_NK = torch.log_softmax(self.logits(obs), dim=-1)
        logp_N = logp_NK.gather(-1, act.long().unsqueeze(-1)).squeeze(-1)
        entropy_N = -(logp_NK.exp() * logp_NK).sum(dim=-1)
        return logp_N, entropy_N

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        return self._sample(self.logits(obs), deterministic)

    @override
    def actions_with_log_prob(
        self, obs: ObsTensor, *, deterministic: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        logits = self.logits(obs)
        act = self._sample(logits, deterministic)
        if deterministic:
            return act, None
        # the formula of log_prob_entropy on the same logits: the value an update would recompute
        return act, torch.log_softmax(logits, dim=-1).gather(1, act.unsqueeze(-1)).squeeze(-1)

    def _sample(self, logits: torch.Tensor, deterministic: bool) -> torch.Tensor:
        if deterministic:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits, dim=-1)
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)


def _check_eps(what: str, eps: float) -> float:
    """``eps`` as a float if it is a number in [0, 1]; ConfigurationError naming ``what`` otherwise."""
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0.0 <= eps <= 1.0:
        raise ConfigurationError(f"QValuePolicy.{what} must be a number in [0, 1], got {eps!r}.")
    return float(eps)


@dataclass(frozen=True, kw_only=True)
class EpsilonSchedule:
    """Epsilon for epsilon-greedy exploration, linear from ``start`` to ``end`` over ``num_env_steps``
    env steps of training collection (counted by the policy), constant afterwards."""

    start: UnitFloat = 1.0
    """epsilon at the first env step"""
    end: UnitFloat = 0.05
    """epsilon after num_env_steps env steps"""
    num_env_steps: NonNegativeInt = 10_000
    """length of the linear decay, in env steps; 0: ``end`` from the start"""

    def __post_init__(self) -> None:
        validate_fields(self)

    def value(self, env_step: int) -> float:
        """Epsilon after ``env_step`` env steps."""
        if self.num_env_steps == 0 or env_step >= self.num_env_steps:
            return self.end
        return self.start + (self.end - self.start) * env_step / self.num_env_steps


@final
class QValuePolicy(Policy):
    """Greedy over ``q_net(obs)`` (shape (N, num_actions)); epsilon-greedy as exploration noise.

    Which epsilon a collector with ``exploration_noise=True`` applies depends on the ``deterministic``
    flag of its ``collect`` call, the counterpart of Tianshou's "within a training step":

    * ``deterministic=False`` (training collection, and any ``collect`` you call without it): the
      training epsilon, :attr:`eps` (the ``eps_schedule``, or the fixed value of
      :meth:`set_eps_training`). The policy counts the actions it explored with
      (``explored_env_steps``, saved in its state_dict: with step-based collection, the env steps of
      training collection; with episode-based collection also the steps of envs whose transitions the
      collector drops), so the schedule needs nothing from the trainer.
    * ``deterministic=True`` (test steps, whose default is the policy's ``deterministic_eval``, True
      here): ``eps_inference`` (default 0.0: greedy, no random numbers drawn), and the schedule does not
      advance. A test collector built with ``exploration_noise=True``, as Tianshou scripts do, therefore
      acts as Tianshou's does. (With ``TrainerOptions(test_deterministic=False)`` test steps count as
      training collection.)
    """

    explored_env_steps: torch.Tensor

    def __init__(
        self,
        q_net: nn.Module,
        action_space: gym.Space[Any],
        *,
        eps_schedule: EpsilonSchedule | None = None,
        eps_inference: float = 0.0,
        seed: int | None = None,
    ):
        """Args:
        q_net: observation -> Q values, shape (N, num_actions).
        action_space: a Discrete space.
        eps_schedule: the training epsilon (default ``EpsilonSchedule()``: 1.0 to 0.05 over 10,000 env
            steps); :meth:`set_eps_training` fixes it instead.
        eps_inference: the epsilon of ``deterministic=True`` collection (test steps with a collector
            built with ``exploration_noise=True``), in [0, 1]; Tianshou's ``eps_inference``.
        seed: seeds the policy's generator.
        """
        _require_discrete(action_space, "QValuePolicy")
        super().__init__(
            action_space=action_space, deterministic_eval=True, seed=seed, device=module_device(q_net)
        )
        assert isinstance(action_space, gym.spaces.Discrete)
        check_output_size(q_net, int(action_space.n), "QValuePolicy", "Q", action_space)
        self.q_net = q_net
        self._takes_dict = accepts_dict_obs(q_net)
        self.eps_schedule = eps_schedule or EpsilonSchedule()
        self.eps_inference = _check_eps("eps_inference", eps_inference)
        """the epsilon of ``deterministic=True`` collection (see the class docstring)"""
        self.eps_training_fixed: float | None = None
        """the training epsilon set by :meth:`set_eps_training` (None: ``eps_schedule`` decides)"""
        self.register_buffer("explored_env_steps", torch.zeros((), dtype=torch.int64, device=self.device))
        self._explored = HostCount()  # explored_env_steps as a Python int on the per-env-step path
        self._num_actions = int(action_space.n)
        self.__dict__["_evaluating"] = False  # set per vector step by actions(); no Module.__setattr__

    def q_values(self, obs: ObsTensor) -> torch.Tensor:
        """Q(o, .), shape (N, num_actions)."""
        q: torch.Tensor = self.q_net(
            obs if isinstance(obs, torch.Tensor) else _as_tensor(obs, self._takes_dict)
        )
        return q

    @property
    def eps(self) -> float:
        """The current training epsilon: the fixed one of :meth:`set_eps_training`, else the schedule's
        value after ``explored_env_steps``."""
        fixed = self.eps_training_fixed
        if fixed is not None:
            return fixed
        buffer = self._buffers["explored_env_steps"]
        assert buffer is not None  # registered in __init__
        return self.eps_schedule.value(self._explored.read(buffer))

    def _explore_one(self) -> float:
        """:attr:`eps`, then one explored env step counted (one read of the count for both)."""
        buffer = self._buffers["explored_env_steps"]
        assert buffer is not None  # registered in __init__
        before = self._explored.add(buffer, 1)
        fixed = self.eps_training_fixed
        return fixed if fixed is not None else self.eps_schedule.value(before)

    def _count_explored(self, num_env_steps: int) -> None:
        """Add to ``explored_env_steps`` (in place, through its Python mirror: no torch op per env step)."""
        buffer = self._buffers["explored_env_steps"]
        assert buffer is not None  # registered in __init__
        self._explored.add(buffer, num_env_steps)

    def set_eps_training(self, eps: float | None) -> None:
        """Fix the training epsilon at ``eps`` (in [0, 1]), overriding ``eps_schedule``; None returns
        to the schedule. Tianshou's ``set_eps_training``: a ported ``training_fn`` that decays epsilon
        with it works unchanged. The value is a setting, not run state: it is not in the state_dict
        (a resumed script sets it again, as it passes ``eps_schedule`` again). Nor is it pushed to the
        actor copy of ``overlap_collection``, which copies the policy when the trainer is built: there,
        set it before building the trainer."""
        self.eps_training_fixed = None if eps is None else _check_eps("set_eps_training: eps", eps)

    def set_eps_inference(self, eps: float) -> None:
        """Set :attr:`eps_inference` (in [0, 1]); Tianshou's ``set_eps_inference``."""
        self.eps_inference = _check_eps("set_eps_inference: eps", eps)

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        # greedy either way; the flag picks the epsilon of the exploration noise that may follow
        self.__dict__["_evaluating"] = deterministic
        return self.q_values(obs).argmax(dim=-1)

    def _epsilon_greedy(self, act: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
        mask = self.legal_actions
        if mask is not None:  # action masks: explore among the legal actions only
            explore = rng.random(len(act)) < eps
            if explore.any():
                act = act.copy()
                act[explore] = sample_legal_actions(np.asarray(mask)[explore], rng)
            return act
        if len(act) == 1:  # one env: scalar draws, the same numbers as the batch draws below
            if rng.random() < eps:
                act = act.copy()
                act[0] = rng.integers(0, self._num_actions)
            return act
        explore = rng.random(len(act)) < eps
        if explore.any():
            act = act.copy()
            act[explore] = rng.integers(0, self._num_actions, size=int(explore.sum()))
        return act

    @override
    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.__dict__["_evaluating"]:  # a test step: eps_inference, the schedule stays
            eps = self.eps_inference
            return act if eps == 0.0 else self._epsilon_greedy(act, eps, rng)
        eps = self.eps
        self._count_explored(len(act))
        return self._epsilon_greedy(act, eps, rng)

    @override
    def compute_noisy_actions(
        self, obs: ObsArray, rng: np.random.Generator, *, deterministic: bool
    ) -> np.ndarray:
        if deterministic or not isinstance(obs, np.ndarray) or len(obs) != 1:
            return super().compute_noisy_actions(obs, rng, deterministic=deterministic)
        # one env, training collection: the exploration draw first (the numbers add_exploration_noise
        # draws after the greedy pass, in the same order), and the Q pass only when acting greedily
        self.__dict__["_evaluating"] = False
        eps = self._explore_one()
        if rng.random() < eps:
            return np.full(1, rng.integers(0, self._num_actions), dtype=np.int64)
        return self.compute_actions(obs, deterministic=False)

    @override
    def add_exploration_noise_torch(self, act: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if self.__dict__["_evaluating"]:  # a test step: eps_inference, the schedule stays
            eps = self.eps_inference
            if eps == 0.0:
                return act
        else:
            eps = self.eps
            self._count_explored(len(act))
        explore = torch.rand(act.shape, generator=generator, device=act.device) < eps
        mask = self.legal_actions_torch
        if mask is not None:  # action masks: explore among the legal actions only
            random_act = sample_legal_actions_torch(mask, generator).to(act.dtype)
        else:
            random_act = torch.randint(
                0, self._num_actions, act.shape, generator=generator, device=act.device, dtype=act.dtype
            )
        return torch.where(explore, random_act, act)


@final
class DeterministicActorPolicy(Policy):
    """A deterministic policy for Box actions: ``tanh(actor(obs))`` in [-1, 1], mapped onto the bounds
    by :meth:`Policy.map_action`. Optional Gaussian exploration noise of std ``noise_std``."""

    def __init__(
        self,
        actor: nn.Module,
        action_space: gym.Space[Any],
        *,
        noise_std: float = 0.0,
        seed: int | None = None,
    ):
        if not isinstance(action_space, gym.spaces.Box):
            raise UnsupportedSpaceError(
                f"DeterministicActorPolicy needs a Box action space, got {action_space!r}."
            )
        super().__init__(
            action_space=action_space, deterministic_eval=True, seed=seed, device=module_device(actor)
        )
        if noise_std < 0:
            raise ConfigurationError(f"DeterministicActorPolicy.noise_std must be >= 0, got {noise_std!r}.")
        self.actor = actor
        self._takes_dict = accepts_dict_obs(actor)
        self.noise_std = noise_std

    def mean_actions(self, obs: ObsTensor) -> torch.Tensor:
        """tanh(actor(obs)), differentiable."""
        out: torch.Tensor = self.actor(_as_tensor(obs, self._takes_dict))
        return torch.tanh(out)

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        del deterministic
        return self.mean_actions(obs)

    @override
    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.noise_std == 0:
            return act
        noisy = act + rng.normal(0.0, self.noise_std, size=act.shape)
        return np.clip(noisy, -1.0, 1.0).astype(np.float32)

    @override
    def add_exploration_noise_torch(self, act: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if self.noise_std == 0:
            return act
        noise = torch.randn(act.shape, generator=generator, device=act.device, dtype=act.dtype)
        return (act + self.noise_std * noise).clamp(-1.0, 1.0)
