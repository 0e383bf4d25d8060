"""Rainbow (Hessel et al. 2018) as in Tianshou: C51 with dueling heads, n-step returns, prioritized replay
and noisy nets. Double-Q action choice is :attr:`C51Params.is_double` (on by default).

The pieces are the existing ones: the network is ``categorical_mlp(..., dueling=True,
noisy_sigma0=NOISY_SIGMA0)`` (:data:`~tshtrain.algorithm.blocks.noisy.NOISY_SIGMA0`), n-step is
``C51Params(n_step=3)``, prioritized replay is a
:class:`~tshtrain.data.PrioritizedVectorReplayBuffer` (the per-sample cross-entropy becomes the
priority). What Rainbow adds over :class:`~tshtrain.algorithm.C51` is the noise: see
:mod:`tshtrain.algorithm.blocks.noisy`. Each gradient step draws new noise for the online and for the
target network from the algorithm's ``generator`` (saved in checkpoints); acting draws from the
policy's ``noise_generator``.
"""

from __future__ import annotations

from typing import Any, final

from typing_extensions import override

from tshtrain.algorithm.algos.c51 import C51Params, C51TrainingStats, CategoricalLearner, categorical_net
from tshtrain.algorithm.base import NO_UPDATE_HOOKS, OffPolicyAlgorithm, UpdateHooks, seeded_generator
from tshtrain.algorithm.blocks.noisy import NoisyQPolicy, resample_noise
from tshtrain.data.collector_base import AnyReplayBuffer


@final
class Rainbow(OffPolicyAlgorithm[NoisyQPolicy, C51TrainingStats]):
    """C51 on a :class:`NoisyQPolicy` (a categorical network with noisy layers), with new noise drawn
    for every gradient step. Takes :class:`C51Params` (Rainbow's paper uses ``n_step=3``)."""

    def __init__(self, *, policy: NoisyQPolicy, params: C51Params | None = None, seed: int | None = None):
        """Args:
        policy: the noisy policy; its ``q_net`` must be a CategoricalQNet.
        params: hyperparameters.
        seed: seeds ``generator``, the source of the training noise.
        """
        super().__init__(policy=policy)
        self.params = params or C51Params()
        self.learner = CategoricalLearner(categorical_net(policy.q_net, "Rainbow"), self.params, "Rainbow")
        self.generator = seeded_generator(seed, policy.device)
        """the generator of the noise of the gradient steps (online and target network)"""
        self.register_components(self.learner.q.components())

    @override
    def extra_state(self) -> dict[str, Any]:
        return self.learner.q.extra_state()

    @override
    def load_extra_state(self, state: Any) -> None:
        self.learner.q.load_extra_state(state)

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> C51TrainingStats:
        batch = self.learner.sample(buffer, batch_size, hooks)
        resample_noise(self.learner.net, self.generator)
        resample_noise(self.learner.target_net, self.generator)
        return self.learner.step(buffer, batch, hooks, self.policy.eps)
