"""Soft actor-critic (Haarnoja et al. 2018) with automatic entropy tuning, for Box actions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, final

import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OffPolicyAlgorithm,
    TrainingStats,
    UpdateHooks,
)
from tshtrain.algorithm.blocks.actor_critic_targets import ActorCriticTargets
from tshtrain.algorithm.blocks.continuous import (
    QEnsemble,
    TanhGaussianPolicy,
    critic_values,
    split_mean_log_std,
)
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import (
    ReplaySample,
    SampleScope,
    check_stackable_members,
    sample_members,
    sample_replay,
    stack_obs,
    takes_priorities,
    td_loss,
    update_priorities,
)
from tshtrain.algorithm.blocks.offpolicy_actor_critic import OffPolicyActorCriticParams, setup_actor_critic
from tshtrain.algorithm.blocks.stacked_update import ParameterHolder, StackCache, StackedMembers
from tshtrain.algorithm.blocks.temperature import box_temperature
from tshtrain.algorithm.pending_stats import gradient_step_stats, resolve_stats
from tshtrain.constraints import FiniteFloat, PositiveFloat, PositiveInt
from tshtrain.data.batch import ObsTensor
from tshtrain.data.collector_base import AnyReplayBuffer


@final
@dataclass(frozen=True, kw_only=True)
class SACParams(OffPolicyActorCriticParams):
    """Hyperparameters of :class:`SAC` (besides those of :class:`OffPolicyActorCriticParams`)."""

    alpha_lr: PositiveFloat = 1e-3
    """Adam learning rate of log(alpha) (auto_alpha=True only)"""
    alpha: PositiveFloat = 1.0
    """entropy coefficient: constant with auto_alpha=False, the starting value with auto_alpha=True"""
    auto_alpha: bool = True
    """tune alpha so that the policy's entropy tracks target_entropy"""
    target_entropy: FiniteFloat | None = None
    """entropy target of auto_alpha; None: -(number of action dimensions)"""
    n_step: PositiveInt = 1
    """transitions summed in the TD target before bootstrapping (stops early at episode ends)"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class SACTrainingStats(TrainingStats):
    """Statistics of SAC gradient steps."""

    critic_loss: float = 0.0
    """sum over the critics of the mean squared TD error"""
    actor_loss: float = 0.0
    """mean of alpha * log pi(a|o) - min_i Q_i(o, a) for fresh actions a"""
    alpha_loss: float = 0.0
    """-log(alpha) * mean(log pi + target_entropy) (0 without auto_alpha)"""
    alpha: float = 0.0
    """entropy coefficient used in the step"""
    q_mean: float = 0.0
    """mean Q_i(o, a) of the sampled transitions over the critics"""
    entropy: float = 0.0
    """-mean log pi(a|o) of the fresh actions (a single-sample entropy estimate)"""


@torch.no_grad()
def soft_td_target(
    policy: TanhGaussianPolicy, nets: ActorCriticTargets, sample: ReplaySample, alpha: torch.Tensor
) -> torch.Tensor:
    """``R + D * (min_i Q_targ_i(o', a') - alpha * log pi(a'|o'))`` with ``a' ~ pi(.|o')`` (SAC, CQL)."""
    act_next, log_prob_next = policy.sample(sample.obs_next)
    q_next = critic_values(nets.target_critic.net, sample.obs_next, act_next).min(dim=0).values
    return sample.returns + sample.discounts * (q_next - alpha * log_prob_next)


def soft_actor_step(
    policy: TanhGaussianPolicy,
    nets: ActorCriticTargets,
    obs: ObsTensor,
    alpha: torch.Tensor,
    hooks: UpdateHooks,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One actor step on ``mean(alpha * log pi(a|o) - min_i Q_i(o, a))``, ``a ~ pi(.|o)``
    reparameterised, the critics' weights frozen (SAC, CQL); returns the loss and the log pi."""
    with nets.frozen_critic():
        act, log_prob = policy.sample(obs)
        q_new = critic_values(nets.critic, obs, act).min(dim=0).values
        actor_loss = (alpha * log_prob - q_new).mean()
        nets.actor_step({"actor loss": actor_loss}, hooks)
    return actor_loss, log_prob


@final
class SAC(OffPolicyAlgorithm[TanhGaussianPolicy, SACTrainingStats]):
    """Soft actor-critic with clipped double-Q targets and (optionally) automatic entropy tuning.

    Each :meth:`update` is one gradient step of the critics, the actor and ``log(alpha)``, in this
    order (as CleanRL), followed by a Polyak update of the target critics:

    * critics: regress every ``Q_i(o, a)`` towards
      ``y = R + D * (min_i Q_targ_i(o', a') - alpha * log pi(a'|o'))``, ``a' ~ pi(.|o')``, where
      ``R`` / ``D`` are the (n-step) return and discount (``gamma^m``, 0 after a terminal state);
    * actor: minimise ``mean(alpha * log pi(a|o) - min_i Q_i(o, a))``, ``a ~ pi(.|o)`` reparameterised
      (the critics' weights get no gradient from this);
    * alpha: minimise ``-log(alpha) * mean(log pi(a|o) + target_entropy)``.

    Samples come from the policy's generator; its state is saved with the algorithm (as every
    generator of an algorithm and its policy is, by :meth:`Algorithm.state_dict`).
    """

    def __init__(
        self,
        *,
        policy: TanhGaussianPolicy,
        critic: nn.Module,
        params: SACParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
    ):
        """Args:
        policy: the actor.
        critic: ``critic(obs, act)`` -> (num_critics, N), e.g. ``QEnsemble(obs_dim, act_dim)``.
        params: hyperparameters.
        obs_normalizer: the :class:`RunningObsNormalizer` that is the first layer of every network
            reading observations; updated after every update with its batch's observations.
        """
        super().__init__(policy=policy)
        self.params = p = params or SACParams()
        self.temperature = box_temperature(p, act_dim=policy.act_dim, device=policy.device)
        self.obs_normalization, self.nets, self.lrs = setup_actor_critic(
            self,
            actor=policy.actor,
            critic=critic,
            params=p,
            target_actor=False,
            obs_normalizer=obs_normalizer,
            extra_optimizers={"alpha_optim": self.temperature.optim},
        )

    @override
    def extra_state(self) -> dict[str, Any]:
        return {"log_alpha": self.temperature.state()}

    @override
    def load_extra_state(self, state: Any) -> None:
        self.temperature.load_state(state["log_alpha"])

    @property
    def alpha(self) -> float:
        """The current entropy coefficient."""
        return self.temperature.alpha

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> SACTrainingStats:
        self.lrs.begin_update()
        p, policy = self.params, self.policy
        alpha = self.temperature.value()
        batch = sample_replay(
            buffer, batch_size, gamma=p.gamma, n_step=p.n_step, device=policy.device, hooks=hooks
        )
        target = soft_td_target(policy, self.nets, batch, alpha)
        q_MN = critic_values(self.nets.critic, batch.obs, batch.act)
        critic = td_loss(q_MN, target, batch.weight)
        self.nets.critic_step({"critic loss": critic.loss}, hooks)

        actor_loss, log_prob = soft_actor_step(policy, self.nets, batch.obs, alpha, hooks)

        alpha_loss = torch.zeros((), device=actor_loss.device)
        if self.temperature.learned:
            alpha_loss = self.temperature.loss_from_log_prob(log_prob)
            self.temperature.step(alpha_loss, hooks)
        self.nets.update_targets(p.tau)
        stats = gradient_step_stats(
            SACTrainingStats,
            "SAC",
            {
                "critic_loss": critic.loss,
                "actor_loss": actor_loss,
                "alpha_loss": alpha_loss,
                "alpha": alpha,
                "q_mean": q_MN.mean(),
                "entropy": -log_prob.mean(),
            },
            losses={"critic_loss": "critic loss", "actor_loss": "actor loss", "alpha_loss": "alpha loss"},
            deferred=self.defers_stats,
        )
        update_priorities(buffer, batch.indices, critic.td_errors)
        self.obs_normalization.update(batch.obs)
        return stats

    @staticmethod
    def check_stackable(members: Sequence[SAC]) -> None:
        """Refuse members that :meth:`stacked_update` cannot update together (one line, naming why).

        Raises:
            ConfigurationError: differing params or gradient-step counts, or an ``obs_normalizer``.
        """
        check_stackable_members("SAC.stacked_update", members, lambda m: m.lrs.num_updates)

    @staticmethod
    def stacked_update(
        members: Sequence[SAC],
        buffers: Sequence[AnyReplayBuffer],
        batch_size: int,
        num_steps: int,
        *,
        scopes: Sequence[SampleScope] | None = None,
        cache: StackCache | None = None,
    ) -> list[list[SACTrainingStats]]:
        """``num_steps`` gradient steps of K independent SAC runs (seeds) at once: member k samples from
        ``buffers[k]`` and draws its action noise from its own policy generator, in the order its own
        :meth:`update` draws them (the target's next actions, then the actor's); the critic, actor and
        temperature steps run on the members' stacked networks
        (:class:`~tshtrain.algorithm.blocks.stacked_update.StackedMembers`: the twin critics of K seeds
        are K stacked ensembles, one batched matrix product per layer), each with the members' own
        Adam state; the Polyak update of the stacked target critics is element-wise, as each member's.
        Per member, the statistics of each step. The same learning as ``num_steps`` calls of
        ``members[k].update`` to float rounding. ``scopes``: member k samples inside ``scopes[k]()`` (a
        multi-agent learner's columns of a shared buffer). ``cache``: reuse the stack of the last call
        made with this cache while it still stands for the members (:class:`StackCache`).

        Raises:
            ConfigurationError: members whose params or gradient-step counts differ, or with an
                ``obs_normalizer`` (not stacked yet).
        """
        if not members or num_steps == 0:
            return [[] for _ in members]
        SAC.check_stackable(members)
        first, p = members[0], members[0].params
        device = first.policy.device
        learned = first.temperature.learned
        stack = stack_members(members, cache)
        terms, direct = _member_terms(first, stack)

        def run(fn: Callable[..., Any], *args: Any) -> Any:  # Dict observations: through vmap
            return fn(*args) if direct and isinstance(args[0], torch.Tensor) else stack.vmap(fn, *args)

        stats: list[list[SACTrainingStats]] = [[] for _ in members]
        log_alpha_K = stack.params["nets.alpha.value"]
        for _ in range(num_steps):
            for member in members:
                member.lrs.begin_update()
            samples = sample_members(
                buffers,
                lambda _, b: sample_replay(b, batch_size, gamma=p.gamma, n_step=p.n_step, device=device),
                scopes,
            )
            noise_next, noise = _member_noise(members, batch_size)
            obs: Any = stack_obs([s.obs for s in samples])
            obs_next: Any = stack_obs([s.obs_next for s in samples])
            act = torch.stack([s.act for s in samples])
            alpha_K = log_alpha_K.detach().exp()
            with torch.no_grad():
                target_KN = run(
                    terms.soft_target,
                    obs_next,
                    noise_next,
                    alpha_K,
                    torch.stack([s.returns for s in samples]),
                    torch.stack([s.discounts for s in samples]),
                )
            weights = (torch.stack([s.weight for s in samples]),) if samples[0].weight is not None else ()  # type: ignore[misc]
            critic_loss_K, td_KMN, q_mean_K = run(terms.critic_terms, obs, act, target_KN, *weights)
            stack.step(critic_loss_K, None, optimizer=0)
            with stack.frozen("critic"):  # as soft_actor_step: the critic's weights get no gradient
                actor_loss_K, log_prob_KN = run(terms.actor_terms, obs, noise, alpha_K)
                stack.step(actor_loss_K, None, optimizer=1)
            alpha_loss_K = torch.zeros_like(actor_loss_K)
            if learned:  # EntropyTemperature.loss_from_log_prob of each member
                target_entropy = first.temperature.target_entropy
                alpha_loss_K = -(log_alpha_K.unsqueeze(1) * (log_prob_KN.detach() + target_entropy)).mean(1)
                stack.step(alpha_loss_K, None, optimizer=2)
            stack.polyak("critic", "target", p.tau)
            for k, buffer in enumerate(buffers):
                if takes_priorities(buffer):
                    update_priorities(buffer, samples[k].indices, td_KMN[k])
                stats[k].append(
                    gradient_step_stats(
                        SACTrainingStats,
                        "SAC",
                        {
                            "critic_loss": critic_loss_K[k],
                            "actor_loss": actor_loss_K[k],
                            "alpha_loss": alpha_loss_K[k],
                            "alpha": alpha_K[k],
                            "q_mean": q_mean_K[k],
                            "entropy": -log_prob_KN[k].mean(),
                        },
                        losses={
                            "critic_loss": "critic loss",
                            "actor_loss": "actor loss",
                            "alpha_loss": "alpha loss",
                        },
                        deferred=True,
                    )
                )
        stack.write_back()
        resolve_stats([stat for member_stats in stats for stat in member_stats])
        return stats


def stack_members(members: Sequence[SAC], cache: StackCache | None = None) -> StackedMembers:
    """The members' actors, critics, target critics and temperatures stacked, with their critic, actor
    and temperature Adams (optimizers 0, 1 and 2 of :meth:`StackedMembers.step`); through ``cache``
    when given (:class:`StackCache`)."""
    nets: list[dict[str, nn.Module]] = [
        {
            "actor": m.policy.actor,
            "critic": m.nets.critic,
            "target": m.nets.target_critic.net,
            "alpha": ParameterHolder(m.temperature.log_alpha),
        }
        for m in members
    ]
    optimizers = [[m.nets.critic_optim, m.nets.actor_optim, m.temperature.optim] for m in members]
    if cache is not None:
        return cache.stack(nets, optimizers, owner="SAC")
    return StackedMembers(nets, optimizers, owner="SAC")


def _member_noise(members: Sequence[SAC], batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each member's standard normal noise for one gradient step, drawn from its own policy generator in
    the order its own :meth:`SAC.update` draws it (the target's next actions, then the actor's fresh
    actions); each (K, batch_size, act_dim)."""
    first = members[0].policy
    dtype = next(iter(first.actor.parameters())).dtype
    noise_next, noise = [], []
    for member in members:
        shape, generator = (batch_size, member.policy.act_dim), member.policy.generator
        noise_next.append(torch.randn(shape, generator=generator, device=first.device, dtype=dtype))
        noise.append(torch.randn(shape, generator=generator, device=first.device, dtype=dtype))
    return torch.stack(noise_next), torch.stack(noise)


Forward = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``critic(obs, act)`` -> (..., num_critics, N)"""


class _SACTerms(NamedTuple):
    """SAC's update, written once for one member (tensors of N rows) and for K stacked members (K, N):
    every reduction runs over the trailing dims, alpha broadcasts from () or (K,)."""

    mean_log_std: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
    critic: Forward
    target: Forward
    policy: TanhGaussianPolicy

    def soft_target(
        self,
        obs_next: torch.Tensor,
        eps: torch.Tensor,
        alpha: torch.Tensor,
        ret: torch.Tensor,
        disc: torch.Tensor,
    ) -> torch.Tensor:
        """:func:`soft_td_target` with the noise given."""
        act_next, log_prob_next = self.policy.sample_with_noise(
            obs_next, eps, mu_log_std=self.mean_log_std(obs_next)
        )
        q_next = self.target(obs_next, act_next).min(dim=-2).values
        return ret + disc * (q_next - alpha.unsqueeze(-1) * log_prob_next)

    def critic_terms(
        self, obs: torch.Tensor, act: torch.Tensor, target: torch.Tensor, *weight: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:func:`td_loss`'s loss and TD errors, and the mean Q."""
        q = self.critic(obs, act)
        td = q - target.unsqueeze(-2)
        sq = td.pow(2) * weight[0].unsqueeze(-2) if weight else td.pow(2)
        return sq.mean(dim=-1).sum(dim=-1), td.detach(), q.detach().mean(dim=(-2, -1))

    def actor_terms(
        self, obs: torch.Tensor, eps: torch.Tensor, alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`soft_actor_step`'s loss with the noise given, and the log-densities."""
        act, log_prob = self.policy.sample_with_noise(obs, eps, mu_log_std=self.mean_log_std(obs))
        q_new = self.critic(obs, act).min(dim=-2).values
        return (alpha.unsqueeze(-1) * log_prob - q_new).mean(dim=-1), log_prob


def _member_terms(first: SAC, stack: StackedMembers) -> tuple[_SACTerms, bool]:
    """The terms of the stacked update and whether they take stacked tensors directly (True: a plain
    MLP actor and a :class:`QEnsemble` critic, each layer one ``baddbmm`` over the members, the K
    seeds' critics one ensemble of K * num_critics) or one member's under :meth:`StackedMembers.vmap`."""
    policy, critic = first.policy, first.nets.critic
    actor_fast = stack.stacked_mlp("actor")
    critic_fast = stack.stacked_ensemble("critic.net") if type(critic) is QEnsemble else None
    target_fast = stack.stacked_ensemble("target.net") if type(critic) is QEnsemble else None
    if actor_fast is not None and critic_fast is not None and target_fast is not None:
        assert isinstance(critic, QEnsemble)
        num_critics = critic.num_critics

        def ensemble(forward: Callable[[torch.Tensor], torch.Tensor]) -> Forward:
            def values(obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
                q_KCN1 = forward(QEnsemble.ensemble_input(obs, act, num_critics, batch_dims=2))
                return q_KCN1.squeeze(-1)

            return values

        actor = actor_fast
        stacked = _SACTerms(
            mean_log_std=lambda obs: split_mean_log_std(actor(obs)),
            critic=ensemble(critic_fast),
            target=ensemble(target_fast),
            policy=policy,
        )
        return stacked, True
    target_net = first.nets.target_critic.net
    member = _SACTerms(
        mean_log_std=policy.mean_log_std,
        critic=lambda obs, act: critic_values(critic, obs, act),
        target=lambda obs, act: critic_values(target_net, obs, act),
        policy=policy,
    )
    return member, False
