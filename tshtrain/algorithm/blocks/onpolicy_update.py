"""The update loop of A2C and PPO: they differ only in the loss of a mini-batch.

One update: the learning rate from its schedule, values / GAE advantages / old log-probabilities of
the rollout once (:func:`~tshtrain.algorithm.blocks.onpolicy.prepare_rollout`), ``num_repetitions`` shuffled
passes of mini-batches with one gradient step each, then the statistics reduced in one host transfer.

With a :class:`~tshtrain.algorithm.blocks.world_critic.PerWorldCritic` the update takes its grouped
path: the rollout is prepared world-major with one critic row per world step
(:func:`~tshtrain.algorithm.blocks.onpolicy_world.prepare_world_rollout`) and the mini-batches hold
whole world steps (:func:`~tshtrain.algorithm.blocks.world_critic.world_minibatches`); the loss
functions are the same.

PPO's options (:class:`UpdateOptions`): ``recompute_advantage`` prepares the rollout again before every
repetition after the first (keeping the first preparation's old log-probabilities); ``return_scale``
makes the value targets those of :mod:`~tshtrain.algorithm.blocks.return_scaling`; ``kl_rule`` adapts
the learning rate to each mini-batch's KL estimate before its gradient step (:func:`kl_adapted_lr`);
``normalize_rollout_advantages`` standardises the advantages once per preparation, over the rollout;
``timeout_bootstrap`` chooses what truncated steps bootstrap from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import torch

from tshtrain.algorithm.base import UpdateHooks, check_finite_loss
from tshtrain.algorithm.blocks.onpolicy import (
    ActorCritic,
    ActorCriticParams,
    RolloutTensors,
    TimeoutBootstrap,
    explained_variance,
    minibatches,
    normalize_advantages,
    prepare_rollout,
)
from tshtrain.algorithm.blocks.onpolicy_world import prepare_world_rollout
from tshtrain.algorithm.blocks.policies import CategoricalPolicy
from tshtrain.algorithm.blocks.return_scaling import ReturnScale
from tshtrain.algorithm.blocks.stacked_update import StackedMembers, substituted
from tshtrain.algorithm.blocks.world_critic import (
    PerWorldCritic,
    check_world_batch_size,
    world_minibatches,
)
from tshtrain.data.batch import AnyRolloutBatch, TensorRolloutBatch
from tshtrain.errors import ConfigurationError


class LossTerms(NamedTuple):
    """The named terms of one mini-batch's loss (0-dim tensors)."""

    loss: torch.Tensor
    """the combined loss that is minimised: policy_loss + vf_coef * value_loss - ent_coef * entropy"""
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    """mean entropy of the policy on the mini-batch"""
    approx_kl: torch.Tensor
    """estimate of KL(pi_old || pi) (no gradient)"""
    clip_fraction: torch.Tensor | None = None
    """PPO: fraction of ratios outside the clip range (no gradient); None for A2C"""


class UpdateResult(NamedTuple):
    """One update's statistics: means over its mini-batches, as floats."""

    num_gradient_steps: int
    lr: float
    loss: float
    policy_loss: float
    value_loss: float
    entropy: float
    approx_kl: float
    clip_fraction: float | None
    """None when the loss function reports no clip fraction"""
    grad_norm: float
    explained_variance: float
    """of the values before the update"""


LossFunction = Callable[[RolloutTensors], LossTerms]
"""the loss of a mini-batch (what distinguishes A2C and PPO)"""


class KLRule(NamedTuple):
    """The KL-adaptive learning rate: after each mini-batch's loss, before its gradient step, the
    learning rate is divided by ``factor`` when the KL estimate exceeds ``2 * target_kl`` and
    multiplied by ``factor`` when it is positive and below ``target_kl / 2``, kept in
    ``[min_lr, max_lr]`` (the rule and numbers rsl_rl uses)."""

    target_kl: float
    factor: float
    min_lr: float
    max_lr: float


def kl_adapted_lr(lr: float, kl: float, rule: KLRule) -> float:
    """The learning rate after a mini-batch with KL estimate ``kl`` (see :class:`KLRule`); a KL of 0
    (the first mini-batch of an update, where the policy is still the collecting one) changes
    nothing."""
    if kl > 2.0 * rule.target_kl:
        return max(rule.min_lr, lr / rule.factor)
    if 0.0 < kl < rule.target_kl / 2.0:
        return min(rule.max_lr, lr * rule.factor)
    return lr


@dataclasses.dataclass(frozen=True, kw_only=True)
class UpdateOptions:
    """PPO's options of :func:`actor_critic_update` (the defaults: A2C's plain update)."""

    recompute_advantage: bool = False
    """before every repetition after the first, recompute the values, GAE advantages and returns
    with the critic as it is then; the old log-probabilities stay those of the first preparation"""
    return_scale: ReturnScale | None = None
    """value targets in units of the running std of the returns (see
    :mod:`~tshtrain.algorithm.blocks.return_scaling`), merged with this rollout's returns once, after
    the first preparation; None: unscaled targets"""
    kl_rule: KLRule | None = None
    """adapt the learning rate per mini-batch (:func:`kl_adapted_lr`); None: the lr of the schedule"""
    normalize_rollout_advantages: bool = False
    """standardise the advantages over the whole rollout, once per preparation (the loss then must not
    standardise them per mini-batch)"""
    timeout_bootstrap: TimeoutBootstrap = TimeoutBootstrap.FINAL_OBS
    """what truncated steps bootstrap from"""


def _adapt_lr(ac: ActorCritic, terms: LossTerms, rule: KLRule) -> None:
    """Set the optimizer's learning rate from the mini-batch's KL estimate (one host sync)."""
    kl = float(terms.approx_kl)
    for group in ac.optim.param_groups:  # the adapted lr lives in the optimizer (saved with it)
        group["lr"] = kl_adapted_lr(float(group["lr"]), kl, rule)


def _gradient_step(
    ac: ActorCritic,
    terms: LossTerms,
    hooks: UpdateHooks,
    max_grad_norm: float | None,
    kl_rule: KLRule | None,
) -> torch.Tensor:
    """One Adam step on ``terms.loss`` (with ``kl_rule``, at the learning rate adapted to this
    mini-batch's KL first); the detached row of the statistics of the mini-batch."""
    if kl_rule is not None:
        _adapt_lr(ac, terms, kl_rule)
    reported = {"loss": terms.loss, "policy loss": terms.policy_loss, "value loss": terms.value_loss}
    grad_norm = ac.gradient_step(terms.loss, reported, hooks, max_grad_norm)
    columns = [terms.loss, terms.policy_loss, terms.value_loss, terms.entropy, terms.approx_kl]
    if terms.clip_fraction is not None:
        columns.append(terms.clip_fraction)
    return torch.stack([*columns, grad_norm]).detach()


def actor_critic_update(
    ac: ActorCritic,
    params: ActorCriticParams,
    rollout: AnyRolloutBatch,
    loss_fn: LossFunction,
    *,
    batch_size: int | None,
    num_repetitions: int,
    hooks: UpdateHooks,
    options: UpdateOptions = UpdateOptions(),
) -> UpdateResult:
    """One A2C / PPO update of ``ac`` on ``rollout`` with the mini-batch loss ``loss_fn`` and PPO's
    ``options`` (see :class:`UpdateOptions`). The reported ``lr`` is the schedule's, or with a KL rule
    the learning rate the update ends with."""
    lr = params.lr * ac.lrs.apply(ac.num_update_steps)
    if isinstance(ac.critic, PerWorldCritic):
        check_world_batch_size(batch_size, ac.critic.num_agents)  # before the rollout pass
    first = data = _prepare(ac, params, rollout, options, merge=True)
    rows: list[torch.Tensor] = []
    passes = [num_repetitions] if not options.recompute_advantage else [1] * num_repetitions
    for k, num_passes in enumerate(passes):
        if k > 0:  # recompute_advantage: fresh values and advantages, the same logp_old
            fresh = _prepare(ac, params, _without_stored_values(rollout), options, merge=False)
            data = dataclasses.replace(fresh, logp_old=first.logp_old)
        batches = _minibatches(ac, len(data), batch_size, num_passes)
        rows += [
            _gradient_step(ac, loss_fn(data.select(idx)), hooks, params.max_grad_norm, options.kl_rule)
            for idx in batches
        ]
    if options.kl_rule is not None:
        lr = float(ac.optim.param_groups[0]["lr"])
    means = torch.stack(rows).mean(dim=0)
    check_finite_loss(ac.owner, "policy loss", means[1])
    check_finite_loss(ac.owner, "value loss", means[2])
    ac.finish_update(first.obs)
    ev = explained_variance(first.value_old, first.returns)
    values: list[float] = torch.cat([means, ev.reshape(1)]).tolist()
    named = dict(zip(_column_names(len(values)), values, strict=True))
    return UpdateResult(
        num_gradient_steps=len(rows), lr=lr, clip_fraction=named.pop("clip_fraction", None), **named
    )


def _without_stored_values(rollout: AnyRolloutBatch) -> AnyRolloutBatch:
    """The rollout without the values computed while collecting (stale once the critic has stepped)."""
    if isinstance(rollout, TensorRolloutBatch) and rollout.value is not None:
        return dataclasses.replace(rollout, value=None)
    return rollout


def _prepare(
    ac: ActorCritic,
    params: ActorCriticParams,
    rollout: AnyRolloutBatch,
    options: UpdateOptions,
    *,
    merge: bool,
) -> RolloutTensors:
    """The prepared rollout (advantages standardised over it with
    ``options.normalize_rollout_advantages``)."""
    data = _prepare_scaled(ac, params, rollout, options, merge=merge)
    if options.normalize_rollout_advantages:
        return dataclasses.replace(data, advantages=normalize_advantages(data.advantages))
    return data


def _prepare_scaled(
    ac: ActorCritic,
    params: ActorCriticParams,
    rollout: AnyRolloutBatch,
    options: UpdateOptions,
    *,
    merge: bool,
) -> RolloutTensors:
    """The prepared rollout: rows as they come, or world-major for a :class:`PerWorldCritic` (the
    grouped path). With ``options.return_scale`` the rewards are divided by its scale before GAE and
    the advantages multiplied back (reward units; values and returns stay in the critic's units), then
    the unscaled returns are merged into it if ``merge`` (the first preparation of an update)."""
    return_scale = options.return_scale
    if return_scale is None:
        return _prepare_unscaled(ac, params, rollout, options.timeout_bootstrap)
    scale = return_scale.scale
    scaled_rollout = return_scale.scale_rollout_rewards(rollout, ac.policy.device)
    data = _prepare_unscaled(ac, params, scaled_rollout, options.timeout_bootstrap)
    if merge:
        return_scale.update(data.returns * scale)
    return dataclasses.replace(data, advantages=data.advantages * scale)


def _prepare_unscaled(
    ac: ActorCritic, params: ActorCriticParams, rollout: AnyRolloutBatch, timeout_bootstrap: TimeoutBootstrap
) -> RolloutTensors:
    critic = ac.critic
    gamma, gae_lambda = params.gamma, params.gae_lambda
    if isinstance(critic, PerWorldCritic):
        return prepare_world_rollout(
            ac, critic, rollout, gamma=gamma, gae_lambda=gae_lambda, timeout_bootstrap=timeout_bootstrap
        )
    return prepare_rollout(
        ac, rollout, gamma=gamma, gae_lambda=gae_lambda, timeout_bootstrap=timeout_bootstrap
    )


def _minibatches(
    ac: ActorCritic, num_rows: int, batch_size: int | None, num_repetitions: int
) -> Iterator[torch.Tensor]:
    """Mini-batch indices: shuffled rows, or, for a :class:`PerWorldCritic`, mini-batches of whole
    world steps (``batch_size`` rows = ``batch_size / A`` world steps; a multiple of A)."""
    critic = ac.critic
    if isinstance(critic, PerWorldCritic):
        num_a = critic.num_agents
        return world_minibatches(num_rows // num_a, num_a, batch_size, num_repetitions, ac.rng)
    return minibatches(num_rows, batch_size, num_repetitions, ac.rng)


def _column_names(num_columns: int) -> list[str]:
    """The names of the columns of :func:`_gradient_step`'s rows, plus explained_variance."""
    terms = [name for name in LossTerms._fields if name != "clip_fraction" or num_columns == 8]
    return [*terms, "grad_norm", "explained_variance"]


StackedLoss = Callable[[RolloutTensors], LossTerms]
"""the loss of one member's mini-batch, written for member 0's networks (evaluated for every member
at once by :meth:`StackedMembers.vmap`)"""


def stacked_actor_critic_update(
    acs: Sequence[ActorCritic],
    params: ActorCriticParams,
    rollouts: Sequence[AnyRolloutBatch],
    loss_fn: StackedLoss,
    *,
    batch_size: int | None,
    num_repetitions: int,
    options: UpdateOptions = UpdateOptions(),
) -> list[UpdateResult]:
    """:func:`actor_critic_update` for K members in one pass (issue 35): member k's ``acs[k]`` on
    ``rollouts[k]``, with the same ``params`` and options. Each member prepares its own rollout and
    draws its own mini-batch order from its own generator, exactly as its own update would; the
    gradient steps run on the stacked networks (:class:`StackedMembers`), then the members get their
    parameters and Adam state back. One result per member.

    Raises:
        ConfigurationError: an option a stacked update does not take (``recompute_advantage``,
            ``return_scale``, ``kl_rule``, a per-world critic, per-network clipping), rollouts of
            different sizes, or members that cannot be stacked (see ``StackedMembers``).
    """
    owner = acs[0].owner if acs else "stacked update"
    check_stackable(acs, options)
    if len(acs) != len(rollouts):
        raise ConfigurationError(f"{owner}: {len(acs)} members but {len(rollouts)} rollouts.")
    stack = StackedMembers(
        [{"policy": ac.policy, "critic": ac.critic} for ac in acs], [ac.optim for ac in acs], owner=owner
    )
    lrs = [params.lr * ac.lrs.apply(ac.num_update_steps) for ac in acs]
    firsts = [
        _prepare(ac, params, rollout, options, merge=True) for ac, rollout in zip(acs, rollouts, strict=True)
    ]
    sizes = {len(data) for data in firsts}
    if len(sizes) > 1:
        raise ConfigurationError(
            f"{owner}: the members' rollouts hold different numbers of steps ({sorted(sizes)}); stacked "
            f"members collect the same number of env steps per collection step."
        )
    orders = [
        list(_minibatches(ac, len(data), batch_size, num_repetitions))
        for ac, data in zip(acs, firsts, strict=True)
    ]
    rows: list[torch.Tensor] = []
    reports_clip: list[bool] = []

    def member_loss(fields: tuple[Any, ...]) -> LossTerms:
        obs, act, logp, value, adv, ret = fields
        terms = loss_fn(
            RolloutTensors(obs=obs, act=act, logp_old=logp, value_old=value, advantages=adv, returns=ret)
        )
        reports_clip.append(terms.clip_fraction is not None)
        if terms.clip_fraction is None:  # A2C: a column of zeros, dropped below
            return terms._replace(clip_fraction=torch.zeros_like(terms.loss))
        return terms

    fast = _stacked_forwards(acs[0], stack)
    for step in range(len(orders[0])):
        batches = [data.select(order[step]) for data, order in zip(firsts, orders, strict=True)]
        stacked = _stack_rollout_tensors(batches)
        terms: LossTerms
        if fast is not None and isinstance(stacked[0], torch.Tensor):
            actor, critic = fast
            with substituted(acs[0].policy, "actor", actor), substituted(acs[0], "critic", critic):
                terms = member_loss(stacked)  # every mean of the loss runs per member
        else:
            terms = stack.vmap(member_loss, stacked)
        grad_norm = stack.step(terms.loss, params.max_grad_norm)
        assert terms.clip_fraction is not None
        columns = [terms.loss, terms.policy_loss, terms.value_loss, terms.entropy, terms.approx_kl]
        rows.append(torch.stack([*columns, terms.clip_fraction, grad_norm], dim=1).detach())
    stack.write_back()
    results = []
    means_KC = torch.stack(rows).mean(dim=0) if rows else None
    for k, (ac, first) in enumerate(zip(acs, firsts, strict=True)):
        assert means_KC is not None, "an update takes at least one mini-batch"
        means = means_KC[k]
        check_finite_loss(ac.owner, "policy loss", means[1])
        check_finite_loss(ac.owner, "value loss", means[2])
        ac.finish_update(first.obs)
        ev = explained_variance(first.value_old, first.returns)
        if not reports_clip[0]:
            means = torch.cat([means[:5], means[6:]])
        values: list[float] = torch.cat([means, ev.reshape(1)]).tolist()
        named = dict(zip(_column_names(len(values)), values, strict=True))
        results.append(
            UpdateResult(
                num_gradient_steps=len(rows),
                lr=lrs[k],
                clip_fraction=named.pop("clip_fraction", None),
                **named,
            )
        )
    return results


def _stacked_forwards(
    ac: ActorCritic, stack: StackedMembers
) -> tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[torch.Tensor], torch.Tensor]] | None:
    """The stacked actor and critic as functions of (K, N, obs) when the loss can run on stacked tensors
    without ``vmap``: a :class:`CategoricalPolicy` whose actor and critic are plain MLPs (each layer then
    one ``baddbmm`` for all members; the losses reduce over the last axis, per member). None otherwise."""
    if type(ac.policy) is not CategoricalPolicy:
        return None
    actor, critic = stack.stacked_mlp("policy.actor"), stack.stacked_mlp("critic")
    if actor is None or critic is None:
        return None
    return actor, critic


def check_stackable(acs: Sequence[ActorCritic], options: UpdateOptions) -> None:
    """Refuse what :func:`stacked_actor_critic_update` does not take (see there), in one line.

    Raises:
        ConfigurationError: naming the options.
    """
    owner = acs[0].owner if acs else "stacked update"
    unsupported = [
        name
        for name, on in (
            ("recompute_advantage", options.recompute_advantage),
            ("return_scaling", options.return_scale is not None),
            ("desired_kl (KL-adaptive learning rate)", options.kl_rule is not None),
            ("a PerWorldCritic", any(isinstance(ac.critic, PerWorldCritic) for ac in acs)),
            ("grad_clip_scope=per_network", any(ac.clip_groups is not None for ac in acs)),
        )
        if on
    ]
    if unsupported:
        raise ConfigurationError(
            f"{owner}: a stacked (seed-batched) update does not take {', '.join(unsupported)}; run these "
            f"seeds as separate runs, or turn the option off."
        )


def _stack_rollout_tensors(batches: Sequence[RolloutTensors]) -> tuple[Any, ...]:
    """The members' mini-batches as (obs, act, logp_old, value_old, advantages, returns), each with the
    member axis first (Dict observations: one stacked tensor per key)."""
    first = batches[0]
    if isinstance(first.obs, torch.Tensor):
        obs: Any = torch.stack([b.obs for b in batches])  # type: ignore[misc]
    else:
        obs = {key: torch.stack([b.obs[key] for b in batches]) for key in first.obs}  # type: ignore[index]
    return (
        obs,
        torch.stack([b.act for b in batches]),
        torch.stack([b.logp_old for b in batches]),
        torch.stack([b.value_old for b in batches]),
        torch.stack([b.advantages for b in batches]),
        torch.stack([b.returns for b in batches]),
    )
