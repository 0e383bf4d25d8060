"""GAIL (Ho & Ermon 2016): PPO on the rewards of a discriminator that tells expert transitions from the
policy's.

A discriminator ``D(o, a) = sigmoid(logit(o, a))`` is the probability that ``(o, a)`` comes from the
expert. Each update (as Tianshou's ``GAIL``):

1. the rollout's environment rewards are replaced by ``r = -log(1 - D(o, a)) = softplus(logit)``,
   computed with the discriminator as it was *before* this update (always > 0; larger where the
   discriminator takes the step for the expert's);
2. the discriminator takes its gradient steps on
   ``-mean log(1 - D(policy rows)) - mean log D(expert rows)`` (binary cross entropy: expert = 1,
   policy = 0), each on a chunk of the shuffled rollout and as many expert transitions drawn
   uniformly (with replacement) from the expert buffer;
3. PPO (:class:`~tshtrain.algorithm.PPO`, unchanged) updates actor and critic on the rollout with
   the rewards of step 1.

The discriminator sees ``concat(flatten(o), features(a))``: ``one_hot(a)`` for Discrete actions, the
stored action (in the policy's [-1, 1] space for scaled Box actions) for Box actions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, final

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.algos.ppo import PPO, PPOParams
from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OnPolicyAlgorithm,
    TrainingStats,
    UpdateHooks,
    check_finite_loss,
    make_adam,
)
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.algorithm.blocks.onpolicy import ActorPolicy, rollout_to_torch
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.constraints import PositiveFloat, PositiveInt, validate_fields
from tshtrain.data.batch import AnyRolloutBatch
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError


@final
@dataclass(frozen=True, kw_only=True)
class GAILParams:
    """Hyperparameters of :class:`GAIL`: PPO's, and the discriminator's."""

    ppo: PPOParams = field(default_factory=PPOParams)
    """the hyperparameters of the PPO update of actor and critic (unchanged by GAIL)"""
    disc_lr: PositiveFloat = 1e-3
    """Adam learning rate of the discriminator"""
    disc_update_num: PositiveInt = 4
    """discriminator gradient steps per update (Tianshou's ``disc_update_num``). With
    ``disc_batch_size=None``, as Tianshou: the shuffled rollout of N rows is cut into chunks of
    ``N // disc_update_num`` rows, one step each, and a remainder shorter than a chunk joins the last
    chunk (so N = 10 and 4 give 5 steps of 2 rows)"""
    disc_batch_size: PositiveInt | None = None
    """rollout rows and expert rows per discriminator step; each of the ``disc_update_num`` steps
    draws its rollout rows from a fresh shuffle. None: ``N // disc_update_num`` (Tianshou's)"""

    def __post_init__(self) -> None:
        validate_fields(self)
        if not isinstance(self.ppo, PPOParams):
            raise ConfigurationError(
                f"GAILParams.ppo must be a PPOParams, got {type(self.ppo).__name__}; pass ppo=PPOParams(...)."
            )


@final
@dataclass(frozen=True, kw_only=True)
class GAILTrainingStats(TrainingStats):
    """Statistics of one GAIL update: the discriminator's, then PPO's (see
    :class:`~tshtrain.algorithm.PPOTrainingStats` for the PPO fields)."""

    disc_loss: float = 0.0
    """binary cross entropy of the discriminator, mean over its steps (before each step)"""
    acc_pi: float = 0.0
    """fraction of the policy's rows the discriminator classified as the policy's (logit < 0)"""
    acc_exp: float = 0.0
    """fraction of the expert rows the discriminator classified as the expert's (logit > 0)"""
    gail_reward: float = 0.0
    """mean of the rewards -log(1 - D) handed to PPO, over the rollout's valid steps"""
    loss: float = 0.0
    policy_loss: float = 0.0
    value_loss: float = 0.0
    entropy: float = 0.0
    approx_kl: float = 0.0
    clip_fraction: float = 0.0
    explained_variance: float = 0.0
    grad_norm: float = 0.0
    lr: float = 0.0
    clip_range: float = 0.0


def gail_rewards(logit_N: torch.Tensor) -> torch.Tensor:
    """GAIL's reward ``-log(1 - D)`` with ``D = sigmoid(logit)``, computed stably as
    ``-logsigmoid(-logit) = softplus(logit)``; shape as ``logit_N``."""
    return -F.logsigmoid(-logit_N)


def discriminator_loss(logit_pi_N: torch.Tensor, logit_exp_M: torch.Tensor) -> torch.Tensor:
    """Binary cross entropy with expert = 1, policy = 0:
    ``-mean log(1 - D(policy rows)) - mean log D(expert rows)``."""
    return -F.logsigmoid(-logit_pi_N).mean() - F.logsigmoid(logit_exp_M).mean()


def action_features(action_space: gym.Space[Any], act_N: torch.Tensor) -> torch.Tensor:
    """What the discriminator sees of the actions: one-hot for Discrete, the float actions (N, A)
    for Box."""
    if isinstance(action_space, gym.spaces.Discrete):
        return F.one_hot(act_N.long().reshape(-1) - int(action_space.start), int(action_space.n)).float()
    return act_N.float().reshape(len(act_N), -1)


def _check_spaces(policy: ActorPolicy) -> None:
    if not isinstance(policy.action_space, gym.spaces.Discrete | gym.spaces.Box):
        raise UnsupportedSpaceError(
            f"GAIL: the policy's action space is {policy.action_space!r}; GAIL's discriminator takes "
            f"Discrete or Box actions."
        )


def _expert_tensors(
    expert_buffer: object, policy: ActorPolicy, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """The expert's observations (N, ...) as float32 and actions as stored, checked against the
    policy's spaces."""
    if not isinstance(expert_buffer, BaseReplayBuffer):
        raise ConfigurationError(
            f"GAIL: expert_buffer is a {type(expert_buffer).__name__}; pass a tshtrain ReplayBuffer / "
            f"VectorReplayBuffer (what the offline algorithms take, e.g. from load_tianshou_hdf5)."
        )
    if len(expert_buffer) == 0:
        raise ConfigurationError("GAIL: expert_buffer is empty (0 transitions); fill it with expert data.")
    data = expert_buffer.sample_all()
    if not isinstance(data.obs, np.ndarray):
        raise UnsupportedSpaceError(
            f"GAIL: expert_buffer has Dict observations (keys {sorted(data.obs)}); GAIL's discriminator "
            f"takes array observations."
        )
    obs_space = policy.observation_space
    if obs_space is not None and obs_space.shape is not None and data.obs.shape[1:] != obs_space.shape:
        raise ConfigurationError(
            f"GAIL: expert_buffer observations have shape {data.obs.shape[1:]}, the policy's "
            f"observation space {obs_space.shape}; the expert data must come from the same env."
        )
    _check_expert_actions(data.act, policy)
    obs = torch.as_tensor(data.obs, device=device).float()
    act = torch.as_tensor(data.act, device=device)
    try:  # the policy must take the expert's observations (the policy may not know its obs space)
        with torch.no_grad():
            policy.log_prob_entropy(obs[:2], act[:2])
    except (RuntimeError, ValueError) as error:
        raise ConfigurationError(
            f"GAIL: expert_buffer observations have shape {data.obs.shape[1:]}, which the policy does not "
            f"take ({error}); the expert data must come from the same env."
        ) from error
    return obs, act


def _check_expert_actions(act: np.ndarray, policy: ActorPolicy) -> None:
    space = policy.action_space
    if isinstance(space, gym.spaces.Discrete):
        low, high = int(space.start), int(space.start) + int(space.n) - 1
        bad = act.ndim != 1 or not np.all((act >= low) & (act <= high) & (act == np.round(act)))
        allowed = f"integers in [{low}, {high}], shape (N,)"
    else:
        assert isinstance(space, gym.spaces.Box)
        bad = act.shape[1:] != space.shape
        allowed = f"shape (N, {', '.join(map(str, space.shape))})"
        if not bad and policy.action_scaling and not np.all(np.abs(act) <= 1.0 + 1e-6):
            bad, allowed = True, "in the policy's [-1, 1] space (map env actions with map_action_inverse)"
    if bad:
        raise ConfigurationError(
            f"GAIL: expert_buffer actions (shape {act.shape}, range [{act.min()}, {act.max()}]) do not fit "
            f"the policy's action space {space!r}; allowed: {allowed}."
        )


@final
class GAIL(OnPolicyAlgorithm[ActorPolicy, GAILTrainingStats]):
    """Generative adversarial imitation learning: PPO on the rewards ``-log(1 - D(o, a))`` of a
    discriminator trained each update to tell the expert's transitions from the rollout's (see the
    module docstring). Runs on the :class:`~tshtrain.trainer.OnPolicyTrainer`; the environment's
    rewards are ignored (the collector still reports them, so test returns are the env's)."""

    def __init__(
        self,
        *,
        policy: ActorPolicy,
        critic: nn.Module,
        expert_buffer: BaseReplayBuffer,
        discriminator: nn.Module,
        params: GAILParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
        seed: int | None = None,
    ):
        """Args:
        policy: the actor (Discrete or Box actions, array observations).
        critic: maps observations to values (see :class:`~tshtrain.algorithm.PPO`).
        expert_buffer: the expert's transitions (observations and actions are used); read once here.
        discriminator: maps ``concat(flatten(obs), action features)`` (N, O + A') to one unbounded
            logit per row, (N,) or (N, 1); positive means "expert". A' = number of actions
            (one-hot) for Discrete, the action size for Box.
        params: hyperparameters; None: ``GAILParams()``.
        obs_normalizer: as PPO's (the discriminator sees raw observations).
        seed: seeds PPO's mini-batch shuffling and the discriminator's draws.

        Raises:
            ConfigurationError: empty expert buffer, expert data that does not fit the policy's
                spaces, or a discriminator that does not return one logit per row.
            UnsupportedSpaceError: Dict observations or actions other than Discrete / Box.
        """
        super().__init__(policy=policy)
        self.params = params or GAILParams()
        _check_spaces(policy)
        self.ppo = PPO(
            policy=policy, critic=critic, params=self.params.ppo, obs_normalizer=obs_normalizer, seed=seed
        )
        self.critic = critic
        self.expert_obs, self.expert_act = _expert_tensors(expert_buffer, policy, policy.device)
        self.discriminator = discriminator
        self.disc_optim = make_adam(discriminator.parameters(), lr=self.params.disc_lr)
        self.disc_rng = torch.Generator(device=policy.device).manual_seed(
            int(np.random.SeedSequence(seed).spawn(1)[0].generate_state(1)[0])
        )
        """draws the discriminator's rollout chunks and expert samples"""
        self._check_discriminator()
        self.register_components(
            {**self.ppo.components(), "discriminator": discriminator, "disc_optim": self.disc_optim}
        )

    def _check_discriminator(self) -> None:
        rows = min(2, len(self.expert_act))
        features = self.disc_input(self.expert_obs[:rows], self.expert_act[:rows])
        try:
            with torch.no_grad():
                out: torch.Tensor = self.discriminator(features)
        except RuntimeError as error:
            raise ConfigurationError(
                f"GAIL: the discriminator failed on input of shape {tuple(features.shape)} "
                f"(flattened observation + action features): {error}"
            ) from error
        if out.shape not in ((rows,), (rows, 1)):
            raise ConfigurationError(
                f"GAIL: the discriminator returned shape {tuple(out.shape)} for {rows} rows; it must "
                f"return one logit per row, shape (N,) or (N, 1)."
            )

    def disc_input(self, obs_N: torch.Tensor, act_N: torch.Tensor) -> torch.Tensor:
        """``concat(flatten(obs), action_features(act))``, shape (N, O + A')."""
        flat = obs_N.float().reshape(len(obs_N), -1)
        return torch.cat([flat, action_features(self.policy.action_space, act_N)], dim=1)

    def logits(self, obs_N: torch.Tensor, act_N: torch.Tensor) -> torch.Tensor:
        """The discriminator's logits, shape (N,)."""
        out: torch.Tensor = self.discriminator(self.disc_input(obs_N, act_N))
        return out.reshape(-1)

    @override
    def extra_state(self) -> dict[str, Any]:
        return {"ppo": self.ppo.extra_state()}

    @override
    def load_extra_state(self, state: Any) -> None:
        self.ppo.load_extra_state(state.get("ppo", {}))

    @override
    def update(
        self,
        rollout: AnyRolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> GAILTrainingStats:
        data = rollout_to_torch(rollout, self.policy.device)
        if not isinstance(data.obs, torch.Tensor):
            raise UnsupportedSpaceError("GAIL: the rollout has Dict observations; GAIL takes array ones.")
        num_t, num_e = data.shape
        obs_all = data.obs.reshape(num_t * num_e, *data.obs.shape[2:])
        if obs_all.shape[1:] != self.expert_obs.shape[1:]:
            raise ConfigurationError(
                f"GAIL: the rollout's observations have shape {tuple(obs_all.shape[1:])}, expert_buffer's "
                f"{tuple(self.expert_obs.shape[1:])}; the expert data must come from the same env."
            )
        act_all = data.act.reshape(num_t * num_e, *data.act.shape[2:])
        valid = data.valid.reshape(-1)
        with torch.no_grad():
            rew_all = gail_rewards(self.logits(obs_all, act_all)) * valid
        rew_TE = rew_all.reshape(num_t, num_e).to(data.rew.dtype)
        disc = self._update_discriminator(obs_all[valid], act_all[valid], hooks)
        ppo = self.ppo.update(
            dataclasses.replace(data, rew=rew_TE),
            batch_size=batch_size,
            num_repetitions=num_repetitions,
            hooks=hooks,
        )
        ppo_fields = {f.name: getattr(ppo, f.name) for f in dataclasses.fields(ppo)}
        ppo_fields["num_gradient_steps"] += disc.num_steps
        mean_reward = float(rew_all.sum() / max(int(valid.sum()), 1))
        return GAILTrainingStats(
            disc_loss=disc.loss,
            acc_pi=disc.acc_pi,
            acc_exp=disc.acc_exp,
            gail_reward=mean_reward,
            **ppo_fields,
        )

    def _chunks(self, num_rows: int) -> list[torch.Tensor]:
        """Rollout row indices of each discriminator step (see :class:`GAILParams`)."""
        params = self.params
        gen = self.disc_rng
        if params.disc_batch_size is not None:
            size = min(params.disc_batch_size, num_rows)
            perms = [
                torch.randperm(num_rows, generator=gen, device=gen.device)
                for _ in range(params.disc_update_num)
            ]
            return [perm[:size] for perm in perms]
        size = max(num_rows // params.disc_update_num, 1)
        perm = torch.randperm(num_rows, generator=gen, device=gen.device)
        chunks = [perm[start : start + size] for start in range(0, num_rows, size)]
        if len(chunks) > 1 and len(chunks[-1]) < size:  # the remainder joins the last whole chunk
            chunks[-2:] = [torch.cat(chunks[-2:])]
        return chunks

    def _update_discriminator(
        self, obs_N: torch.Tensor, act_N: torch.Tensor, hooks: UpdateHooks
    ) -> _DiscStats:
        rows: list[torch.Tensor] = []
        num_expert = len(self.expert_act)
        for idx in self._chunks(len(act_N)):
            size = self.params.disc_batch_size or max(len(act_N) // self.params.disc_update_num, 1)
            exp_idx = torch.randint(num_expert, (size,), generator=self.disc_rng, device=self.disc_rng.device)
            logit_pi = self.logits(obs_N[idx], act_N[idx])
            logit_exp = self.logits(self.expert_obs[exp_idx], self.expert_act[exp_idx])
            loss = discriminator_loss(logit_pi, logit_exp)
            optimizer_step(self.disc_optim, "disc_optim", {"discriminator loss": loss}, hooks)
            with torch.no_grad():
                acc_pi = (logit_pi < 0).float().mean()
                acc_exp = (logit_exp > 0).float().mean()
            rows.append(torch.stack([loss.detach(), acc_pi, acc_exp]))
        means = torch.stack(rows).mean(dim=0)
        check_finite_loss("GAIL", "discriminator loss", means[0])
        loss_mean, acc_pi_mean, acc_exp_mean = means.tolist()
        return _DiscStats(num_steps=len(rows), loss=loss_mean, acc_pi=acc_pi_mean, acc_exp=acc_exp_mean)


@dataclass(frozen=True)
class _DiscStats:
    num_steps: int
    loss: float
    acc_pi: float
    acc_exp: float
